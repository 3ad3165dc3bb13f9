"""The GitHub Copilot CLI worker: `copilot --output-format json` in a sandbox, its JSONL
events turned into one answer line.

The prompt goes on stdin, never argv, where `ps` and logs would show it: copilot runs a piped
prompt as `-p` runs one, headless. The model is offered only the tools the call needs
(`--available-tools`), edits and the registry's commands are pre-approved (`--allow-tool`),
and nothing can ask for more (`--no-ask-user`; a permission headless copilot would have to
ask for is denied). The working directory is never trusted (no `--trust-folder`), so the
repository's own skills, agents, hooks and MCP servers stay unloaded. Tokens are read from
the usage file copilot writes at the end (its JSONL carries none); the final answer is the
JSON object in its last reply, and the diffs are computed by the shared shim from the
sandbox, never taken from the model.
"""

from __future__ import annotations

import math
import os
import sys
from contextlib import suppress
from pathlib import Path
from typing import Any

import orjson

from harness import __version__
from harness.base import folders, metrics
from harness.workers import cliprocess, codex_events, opencode, prompts, shim

# copilot's tools by the policy tool each one is.
READ_TOOLS = {"read": "view", "ls": "view", "glob": "glob", "grep": "grep"}
EDIT_TOOLS = {"edit": "edit", "write": "create"}
SHELL_TOOL = "bash"
# copilot reads an empty --available-tools as no limit, every tool offered; a name no tool
# has is how a call that may use none gets none.
NO_TOOL = "harness-no-tool"

# Failures no retry fixes, by copilot's errorType; a 429 or 5xx status, or its rate_limit,
# is retryable (after copilot's own five retries, about a minute).
HARD_TYPES = frozenset({"authentication", "authorization", "model_not_found", "bad_request"})
RETRYABLE_TYPES = frozenset({"rate_limit", "timeout", "network", "server"})
TAIL = 500
# Far above what one call is billed: a figure past it is no count.
MAX_PREMIUM = 1_000_000


# Where a repository configures copilot 1.0.102 (docs/agent-sandboxes.md, "What a repository
# could configure"): its repository settings (hooks among them, claude's settings files read
# as more of the same), hook files, MCP servers, custom agents, skills and extensions. An
# untrusted folder loads none of them; they are not in the sandbox either. AGENTS.md,
# CLAUDE.md, GEMINI.md and .github/copilot-instructions.md and instructions/ stay, as
# instructions only.
WITHHELD = (
    ".github/copilot",
    ".github/hooks",
    ".github/agents",
    ".github/skills",
    ".github/extensions",
    ".github/mcp.json",
    ".mcp.json",
    ".copilot",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".claude/agents",
    ".claude/skills",
    ".agents/skills",
)


def version() -> str:
    return cliprocess.cli_version("copilot", f"copilot-cli {__version__}")


def tools(writable: bool, launch: shim.Launch) -> list[str]:
    """The tools the model is offered: the read tools the policy keeps, the edit tools when
    the call writes (and the policy keeps them), the shell for the registry's commands."""
    kept = set(launch.policy.tools) if launch.policy is not None else None
    names = [name for tool, name in READ_TOOLS.items() if kept is None or tool in kept]
    if writable:
        names += [name for tool, name in EDIT_TOOLS.items() if kept is None or tool in kept]
    if launch.commands:
        names.append(SHELL_TOOL)
    return list(dict.fromkeys(names))


def command(env: shim.Envelope, box: shim.Sandbox, launch: shim.Launch, usage: Path) -> list[str]:
    """The `copilot` invocation; the prompt itself is not part of it."""
    offered = tools(env.writable, launch)
    allowed = [f"shell({c}:*)" for c in launch.commands]
    if {"edit", "create"} & set(offered):
        allowed.append("write")  # copilot's permission for its file-changing tools
    return [
        "copilot",
        "--output-format",
        "json",
        "--no-ask-user",
        "--no-auto-update",
        "--no-remote",
        "--disable-builtin-mcps",  # no GitHub MCP server: a role gets only the tools above
        "--disable-client-telemetry",
        "-C",
        str(box.root),
        "--available-tools",
        ",".join(offered) or NO_TOOL,
        *(a for rule in allowed for a in ("--allow-tool", rule)),
        "--usage-output-file",
        str(usage),
        *(["--model", launch.model] if launch.model else []),
        # The retried call's session, kept in the sandbox's home (sessions.py).
        *(["--resume", env.resumes] if env.resumes is not None else []),
    ]


def own_env(environ: dict[str, str]) -> dict[str, str]:
    """What the shim sets for copilot: no update, COPILOT_ALLOW_ALL off (its value `true`
    would trust the repository and run its hooks); and given a model provider of the user's
    (BYOK), offline, so copilot reaches nothing of GitHub's."""
    found = {"COPILOT_AUTO_UPDATE": "false", "COPILOT_ALLOW_ALL": ""}
    if environ.get("COPILOT_PROVIDER_BASE_URL"):
        found["COPILOT_OFFLINE"] = "true"
    return found


def work(env: shim.Envelope, box: shim.Sandbox, launch: shim.Launch) -> dict[str, Any]:
    brief = prompts.role_brief(str(env.payload["role"]), Path.cwd(), launch)
    prompt = prompts.render(env, brief, launch)
    # Outside the sandbox, so the usage file shows up in no diff.
    side = shim.fresh_folder(box.root.parent, "copilot")
    try:
        usage = side / "usage.json"
        argv = command(env, box, launch, usage)
        ran = cliprocess.run_cli(argv, env, box, prompt, own_env(dict(os.environ)), streams=True)
        events = codex_events.parse_events(ran.stdout)
        check(ran, events)
        check_tools(events, launch, str(box.root), env.writable)
        answer = shim.answer_in(final_text(events), "copilot's last reply")
        answer["metrics"] = metrics.measured(
            answer.get("metrics"), event_metrics(events, read_usage(usage))
        )
    finally:
        with suppress(OSError):
            folders.remove(side)
    answer["prompt"] = prompt
    return answer


def _data(event: dict[str, Any]) -> dict[str, Any]:
    data = event.get("data")
    return data if isinstance(data, dict) else {}


def check(ran: cliprocess.Ran, events: list[dict[str, Any]]) -> None:
    """Raise the error the run stands for: a `session.error` by its status and type; a
    failed exit without one is hard."""
    errors = [_data(e) for e in events if e.get("type") == "session.error"]
    if ran.code == 0 and not errors:
        return
    if not errors:
        raise shim.ShimError(f"copilot exited {ran.code}{ran.stderr_tail(TAIL) or ': no detail'}")
    err = errors[-1]
    kind, status = str(err.get("errorType", "error"))[:40], err.get("statusCode")
    message = f"copilot exited {ran.code}: {kind}: {str(err.get('message', ''))[:500]}"
    if isinstance(status, int):
        message += f" (status {status})"
    if kind in HARD_TYPES or status in opencode.HARD_STATUS:
        raise shim.ShimError(message, "hard")
    if kind in RETRYABLE_TYPES or (isinstance(status, int) and (status == 429 or status >= 500)):
        raise shim.ShimError(message, "retryable")
    raise shim.ShimError(message, "hard")


def check_tools(
    events: list[dict[str, Any]], launch: shim.Launch, workspace: str, writable: bool
) -> None:
    """What copilot reports its tools did: a command off the registry's list, or an edit the
    policy's rules refuse, refuses the whole answer (hard); a file whose last edit failed
    (or was denied) is a lost edit, retryable."""
    asked: dict[str, tuple[str, dict[str, Any]]] = {}  # toolCallId -> (tool, arguments)
    last: dict[str, str] = {}  # file -> why its last edit failed, or ""
    for event in events:
        data = _data(event)
        call = str(data.get("toolCallId", ""))
        if event.get("type") == "tool.execution_start":
            given = data.get("arguments")
            asked[call] = (str(data.get("toolName", "")), given if isinstance(given, dict) else {})
            continue
        if event.get("type") != "tool.execution_complete" or call not in asked:
            continue
        tool, given = asked[call]
        if tool == SHELL_TOOL:
            ran = str(given.get("command", ""))
            why = launch.refusal(ran)
            if why is not None:
                raise shim.ShimError(f"copilot ran a command {why}: {ran[:200]}")
        rule = {"edit": "edit", "create": "write"}.get(tool)
        if rule is None or not writable:
            continue
        path = str(given.get("path") or "a file")[:200]
        if launch.policy is not None:
            why = launch.policy.path_refusal(rule, path, workspace, str(shim.home()))
            if why is not None:
                raise shim.ShimError(f"copilot's {tool} of {path} is refused: {why}")
        error = data.get("error")
        said = error.get("message") if isinstance(error, dict) else None
        failed = data.get("success") is not True
        last[path] = str(said or "no detail")[:300] if failed else ""
    lost = [(path, why) for path, why in sorted(last.items()) if why]
    if lost:
        path, why = lost[0]
        raise shim.ShimError(f"copilot's edit of {path} failed: {why}", "retryable")


def final_text(events: list[dict[str, Any]]) -> str:
    """The content of copilot's last reply that asked for no tool."""
    for event in reversed(events):
        data = _data(event)
        if event.get("type") == "assistant.message" and not data.get("toolRequests"):
            content = data.get("content")
            if isinstance(content, str) and content.strip():
                return content
    raise shim.ShimError("copilot gave no final reply")


def read_usage(path: Path) -> dict[str, Any]:
    """The usage statistics copilot wrote at its end, or {} without them."""
    try:
        doc = orjson.loads(path.read_bytes()[: 1 << 20])
    except (OSError, orjson.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


# The fields of a model's usage that count tokens it read (its outputTokens, those it wrote).
READ_FIELDS = ("inputTokens", "cacheReadTokens", "cacheWriteTokens")


def event_metrics(events: list[dict[str, Any]], usage: dict[str, Any]) -> dict[str, Any]:
    """The session, the tokens of every model the run asked (from the usage file), its
    model turns, and the premium requests GitHub bills it as (its JSONL's `result`)."""
    found: dict[str, Any] = {}
    result: dict[str, Any] = next((e for e in reversed(events) if e.get("type") == "result"), {})
    if isinstance(result.get("sessionId"), str):
        found["session_id"] = result["sessionId"]
    billed = result.get("usage")
    premium = billed.get("premiumRequests") if isinstance(billed, dict) else None
    # A count GitHub may bill in fractions (a model's multiplier); anything else is unknown.
    if (
        isinstance(premium, int | float)
        and not isinstance(premium, bool)
        and math.isfinite(premium)
        and 0 <= premium <= MAX_PREMIUM
    ):
        found["premium_requests"] = premium
    models = usage.get("modelMetrics")
    read: list[object] = []
    written: list[object] = []
    for model in models.values() if isinstance(models, dict) else ():
        spent = model.get("usage") if isinstance(model, dict) else None
        if isinstance(spent, dict):
            read += [spent.get(k) for k in READ_FIELDS]
            written.append(spent.get("outputTokens"))
    found |= metrics.usage(read, written)
    turns = sum(1 for e in events if e.get("type") == "assistant.turn_start")
    if turns:
        found["turns"] = turns
    return found


def main(argv: list[str] | None = None) -> int:
    return shim.main("copilot", work, version, argv, WITHHELD)


if __name__ == "__main__":
    sys.exit(main())
