"""The OpenCode worker: `opencode run --format json` in a sandbox, its NDJSON events turned
into one answer line.

The prompt goes on stdin, never argv, where `ps` and logs would show it (`opencode run` reads
a non-TTY stdin as the message). OpenCode takes its whole configuration from the shim, in
OPENCODE_CONFIG_CONTENT: no file in the repository it edits (its opencode.json and .opencode
folder are never in the sandbox, so a committed one can neither widen the worker's tools nor
run a plugin), none in the user's home. Its permissions allow exactly the
tools the call needs and deny the rest, which headless opencode then never offers the model:
it would reject, silently, any permission it had to ask for. The final answer is the JSON
object in its last reply's text; the diffs are computed by the shared shim from the sandbox,
never taken from the model.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import orjson

from harness import __version__
from harness.base import metrics
from harness.workers import cliprocess, codex_events, prompts, shim

# The provider the shim defines when the environment names a base URL: any API that speaks
# OpenAI's Chat Completions, through the OpenAI-compatible provider opencode ships built in.
PROVIDER = "harness"
# A fixed title, so opencode asks its model for none: a side call nobody reads, and paid.
TITLE = "harness"

# What the shim sets for opencode beside its config: nothing fetched (the models catalogue,
# updates, language servers, plugins), nothing of the repository's or the user's own config
# read, no session shared.
OWN_ENV = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    "OPENCODE_PURE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
}
# opencode installs its plugin package into its config folder at start (from npm, which the
# sandbox cannot reach); a manifest that already lists it is what makes it skip that.
PLUGIN = "@opencode-ai/plugin"

# How a repository configures opencode. opencode 1.18.33 reads them, and runs a plugin they
# name, whatever OPENCODE_DISABLE_PROJECT_CONFIG and OPENCODE_PURE say: a committed
# `.opencode/plugin/x.js` would run in the worker with its key. So they are never in the
# sandbox (shim.Sandbox.withheld), nor are the skill folders it scans when
# OPENCODE_DISABLE_EXTERNAL_SKILLS is not set (docs/agent-sandboxes.md). AGENTS.md stays.
WITHHELD = ("opencode.json", "opencode.jsonc", ".opencode", ".claude/skills", ".agents/skills")

# opencode's tools by the policy tool each one is; `edit` is also the permission of `write`
# and `apply_patch`: opencode cannot allow one without the others.
READ_TOOLS = {"read": "read", "glob": "glob", "grep": "grep", "ls": "list"}
EDITING = {"edit": "edit", "write": "write", "apply_patch": "edit", "multiedit": "edit"}

# Statuses no retry fixes; opencode marks the others (429, 5xx, a cut stream) isRetryable and
# retries each five times itself first, waiting as the API's retry-after asks.
HARD_STATUS = frozenset({400, 401, 403, 404, 413, 422})
HARD_NAMES = re.compile(r"auth|ContextOverflow|NotFound|Unknown.?Model", re.I)
TAIL = 500


def version() -> str:
    return cliprocess.cli_version("opencode", f"opencode-cli {__version__}")


def model_of(launch: shim.Launch, environ: dict[str, str]) -> str | None:
    """The `-m provider/model` opencode is told: under a base URL the shim's provider with
    the registry's model (else OPENCODE_MODEL), which it must have; without one the model
    as named (opencode's own providers), or None for opencode's own choice."""
    name = launch.model or environ.get("OPENCODE_MODEL", "")
    if environ.get("OPENCODE_BASE_URL"):
        if not name:
            raise shim.ShimError(
                "OPENCODE_BASE_URL needs a model: the registry's or OPENCODE_MODEL"
            )
        if not shim.MODEL.fullmatch(name):
            raise shim.ShimError(f"OPENCODE_MODEL {name[:80]!r}: not a model name")
        return f"{PROVIDER}/{name.removeprefix(PROVIDER + '/')}"
    if name and not shim.MODEL.fullmatch(name):
        raise shim.ShimError(f"OPENCODE_MODEL {name[:80]!r}: not a model name")
    return name or None


def permissions(writable: bool, launch: shim.Launch) -> dict[str, Any]:
    """opencode's permission rules for the call: everything denied but the read tools the
    policy keeps, edits when the call writes, and the shell for the registry's commands
    only (each a prefix, as the other shims take them; checked again afterwards)."""
    kept = set(launch.policy.tools) if launch.policy is not None else None
    rules: dict[str, Any] = {"*": "deny"}
    for tool, name in READ_TOOLS.items():
        if kept is None or tool in kept:
            rules[name] = "allow"
    if writable and (kept is None or {"write", "edit"} & kept):
        rules["edit"] = "allow"
    if launch.commands:
        shell: dict[str, str] = {"*": "deny"}
        for command in launch.commands:
            shell |= {command: "allow", f"{command} *": "allow"}
        rules["bash"] = shell
    return rules


def config(
    writable: bool,
    launch: shim.Launch,
    environ: dict[str, str],
    model: str | None,
    idle_s: float | None = None,
) -> dict[str, Any]:
    """The whole opencode config of the call: its permissions, no snapshots, updates or
    sharing, and, given a base URL, the provider it names (its key read from
    OPENCODE_API_KEY by opencode itself, so the config holds no secret) with the call's
    idle_s as its wait for the response's headers and for each streamed chunk."""
    doc: dict[str, Any] = {
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,  # the sandbox is the shim's git repository: diffs come from there
        "permission": permissions(writable, launch),
    }
    url = environ.get("OPENCODE_BASE_URL")
    wait = int(idle_s * 1000) if idle_s is not None else None
    if url and model is not None:
        name = model.split("/", 1)[1]
        doc["provider"] = {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": PROVIDER,
                "options": {
                    "baseURL": url,
                    "apiKey": "{env:OPENCODE_API_KEY}",
                    **({"headerTimeout": wait, "chunkTimeout": wait} if wait else {}),
                },
                "models": {name: {"name": name}},
            }
        }
    if model is not None:
        doc["model"] = model
    return doc


def command(env: shim.Envelope, box: shim.Sandbox, model: str | None) -> list[str]:
    """The `opencode run` invocation; the prompt itself is not part of it."""
    return [
        "opencode",
        "run",
        "--format",
        "json",
        "--title",
        TITLE,
        # opencode takes its project from PWD, which still names the shim's own working
        # copy: the sandbox is named outright.
        "--dir",
        str(box.root),
        *(["-m", model] if model else []),
        # The retried call's session, kept in the sandbox's home (sessions.py).
        *(["--session", env.resumes] if env.resumes is not None else []),
    ]


def quiet_plugins(home: Path) -> None:
    """Mark opencode's plugin package as installed in its config folder, so it does not try
    npm at start."""
    folder = home / ".config" / "opencode"
    (folder / "node_modules").mkdir(parents=True, exist_ok=True)
    needs = {"dependencies": {PLUGIN: "*"}}
    (folder / "package.json").write_bytes(orjson.dumps(needs))
    (folder / "package-lock.json").write_bytes(orjson.dumps({"packages": {"": needs}}))


def work(env: shim.Envelope, box: shim.Sandbox, launch: shim.Launch) -> dict[str, Any]:
    brief = prompts.role_brief(str(env.payload["role"]), Path.cwd(), launch)
    prompt = prompts.render(env, brief, launch)
    environ = dict(os.environ)
    model = model_of(launch, environ)
    idle_s = (env.payload.get("timeouts") or {}).get("idle_s")
    doc = config(env.writable, launch, environ, model, idle_s)
    quiet_plugins(shim.home())
    extra = OWN_ENV | {"OPENCODE_CONFIG_CONTENT": orjson.dumps(doc).decode()}
    # Not `streams`: opencode prints a part only once it is whole, so a long answer is
    # silent; a stuck model API is what the provider's timeouts above catch.
    ran = cliprocess.run_cli(command(env, box, model), env, box, prompt, extra)
    events = codex_events.parse_events(ran.stdout)
    check(ran, events)
    check_tools(events, launch, str(box.root), env.writable)
    answer = shim.answer_in(final_text(events), "opencode's last reply")
    answer["metrics"] = metrics.measured(answer.get("metrics"), event_metrics(events))
    answer["prompt"] = prompt
    return answer


def _obj(value: object) -> dict[str, Any]:
    """A JSON object of an event, or {} for anything else there."""
    return value if isinstance(value, dict) else {}


def _part(event: dict[str, Any]) -> dict[str, Any]:
    return _obj(event.get("part"))


def check(ran: cliprocess.Ran, events: list[dict[str, Any]]) -> None:
    """Raise the error the run stands for: an `error` event by its HTTP status, its name and
    whether opencode calls it retryable (after its own retries); a failed exit without one
    is hard."""
    errors = [e.get("error") for e in events if e.get("type") == "error"]
    if ran.code == 0 and not errors:
        return
    err = next((e for e in reversed(errors) if isinstance(e, dict)), None)
    if err is None:
        raise shim.ShimError(f"opencode exited {ran.code}{ran.stderr_tail(TAIL) or ': no detail'}")
    data = _obj(err.get("data"))
    name = str(err.get("name", "error"))[:80]
    status = data.get("statusCode")
    words = f"{name}: {str(data.get('message', ''))[:300]}"
    headers = data.get("responseHeaders")
    wait = headers.get("retry-after") if isinstance(headers, dict) else None
    if isinstance(status, int):
        words += f" (status {status})"
    if isinstance(wait, str) and re.fullmatch(r"\d+(?:\.\d+)?", wait):
        words += f" (retry-after: {wait})"
    message = f"opencode exited {ran.code}: {words}"
    if status in HARD_STATUS or HARD_NAMES.search(name):
        raise shim.ShimError(message, "hard")
    if data.get("isRetryable") is True or (isinstance(status, int) and status in (408, 429)):
        raise shim.ShimError(message, "retryable")
    if isinstance(status, int) and status >= 500:
        raise shim.ShimError(message, "retryable")
    raise shim.ShimError(message, "hard")


def check_tools(
    events: list[dict[str, Any]], launch: shim.Launch, workspace: str, writable: bool
) -> None:
    """What opencode reports its tools did, checked as the other shims check theirs: a
    command off the registry's list, or an edit the policy's rules refuse, refuses the whole
    answer (hard); a file whose last edit failed is a lost edit, retryable. In a call that
    may not write, opencode was never allowed an edit, and no diff is taken."""
    last: dict[str, str] = {}  # file -> why its last edit failed, or "" when it did not
    for event in events:
        part = _part(event)
        if event.get("type") != "tool_use" or part.get("type") != "tool":
            continue
        tool = str(part.get("tool", ""))
        state = _obj(part.get("state"))
        given = _obj(state.get("input"))
        if tool == "bash":
            ran = str(given.get("command", ""))
            why = launch.refusal(ran)
            if why is not None:
                raise shim.ShimError(f"opencode ran a command {why}: {ran[:200]}")
        if tool not in EDITING or not writable:
            continue
        path = str(given.get("filePath") or given.get("path") or "a file")[:200]
        if launch.policy is not None:
            why = launch.policy.path_refusal(EDITING[tool], path, workspace, str(shim.home()))
            if why is not None:
                raise shim.ShimError(f"opencode's {tool} of {path} is refused: {why}")
        failed = state.get("status") == "error"
        last[path] = str(state.get("error") or "no detail")[:300] if failed else ""
    lost = [(path, why) for path, why in sorted(last.items()) if why]
    if lost:
        path, why = lost[0]
        raise shim.ShimError(f"opencode's edit of {path} failed: {why}", "retryable")


def final_text(events: list[dict[str, Any]]) -> str:
    """The last reply: the text opencode printed since its last tool call."""
    reply: list[str] = []
    for event in events:
        kind = event.get("type")
        if kind == "tool_use":
            reply = []
        elif kind == "text" and isinstance(_part(event).get("text"), str):
            reply.append(str(_part(event)["text"]))
    if not reply:
        raise shim.ShimError("opencode gave no final reply")
    return "\n".join(reply)


# The fields of a step's `tokens` that count tokens the model wrote (its `input` and its
# cache's `read` and `write`, those it read).
WRITTEN_FIELDS = ("output", "reasoning")


def event_metrics(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The session, tokens (read, written, reasoned, and read from or written to the
    cache, summed over the steps) and cost (as opencode prices its model) of the run."""
    found: dict[str, Any] = {}
    session = next(
        (e.get("sessionID") for e in events if isinstance(e.get("sessionID"), str)), None
    )
    if session is not None:
        found["session_id"] = session
    steps = [_part(e) for e in events if e.get("type") == "step_finish"]
    read: list[object] = []
    written: list[object] = []
    costs: list[float] = []
    for step in steps:
        tokens = step.get("tokens")
        if isinstance(tokens, dict):
            read.append(tokens.get("input"))
            written += [tokens.get(k) for k in WRITTEN_FIELDS]
            cache = tokens.get("cache")
            if isinstance(cache, dict):
                read += [cache.get("read"), cache.get("write")]
        cost = metrics.figure("cost_usd", step.get("cost"))
        if cost is not None:
            costs.append(cost)
    found |= metrics.usage(read, written)
    if costs:
        found["cost_usd"] = sum(costs)
    if steps:
        found["turns"] = len(steps)
    return found


def main(argv: list[str] | None = None) -> int:
    return shim.main("opencode", work, version, argv, WITHHELD)


if __name__ == "__main__":
    sys.exit(main())
