"""The Claude Code worker: `claude -p` in a sandbox, its JSON result turned into one answer line.

The prompt goes on stdin (never argv, where `ps` and logs would show it), shell tools stay off
but for the commands the registry allows, and the diffs are computed by the shared shim from
the sandbox, never taken from the model.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import orjson

from harness import __version__
from harness.base import metrics
from harness.boundary import policy
from harness.workers import cliprocess, prompts, shim

# The final answer the model must give; --json-schema makes the CLI validate it and hand it
# back in `structured_output`. Diffs are absent on purpose: the sandbox is the truth.
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "plan": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["step"],
                "additionalProperties": False,
                "properties": {"step": {"type": "string"}, "why": {"type": "string"}},
            },
        },
        "risks": {"type": "array", "items": {"type": "string"}},
        "notes": {"type": "array", "items": {"type": "string"}},
        "metrics": {"type": "object"},
        "artifacts": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "content"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "pattern": "^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$"},
                    "type": {"type": "string"},
                    "content": {"type": "string"},
                },
            },
        },
    },
}

READ_TOOLS = "Read,Grep,Glob"
WRITE_TOOLS = "Edit,Write"

# What the shim sets for claude: its own retries capped, so a rate-limited call fails in
# seconds and harness's retry takes over; no update checks or other traffic beside the model.
OWN_ENV = {
    "CLAUDE_CODE_MAX_RETRIES": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}

# api_error_status values that a later call may well not meet again.
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 529})
# A connection lost or timed out is transient too: claude words a cut stream "Connection to
# the API was lost (ECONNRESET)" and an idle one "Request timed out".
RETRYABLE_TEXT = re.compile(
    r"rate.?limit|overloaded|server.?error|too many requests|connection|ECONNRESET|timed out",
    re.I,
)
# Error words the CLI uses for failures no retry will fix; checked before the retryable text so
# an auth failure mentioning a server is still hard.
HARD_TEXT = re.compile(r"authentication_failed|billing_error|invalid_request", re.I)
HARD_SUBTYPES = frozenset({"error_max_turns", "error_max_budget_usd"})

TAIL = 500
# The fields of claude's `usage` counting tokens the model read (output_tokens: it wrote).
READ_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


# Where a repository configures claude 2.1.332 (docs/agent-sandboxes.md): settings, MCP
# servers, and any `.claude` folder's skills, agents, commands, rules (nested ones too).
WITHHELD = ("**/.claude", ".mcp.json")
# --setting-sources user keeps claude from reading these: the shim hands it them, fenced.
INSTRUCTIONS = ("CLAUDE.md", "CLAUDE.local.md", "AGENTS.md")


def version() -> str:
    return cliprocess.cli_version("claude", f"claude-cli {__version__}")


# Claude Code's own Bash sandbox (bubblewrap on Linux), with no domain reachable: the allowed
# commands run without network, and a command that cannot be sandboxed fails rather than
# running bare.
SANDBOX_SETTINGS = {
    "sandbox": {
        "enabled": True,
        "failIfUnavailable": True,
        "allowUnsandboxedCommands": False,
        "network": {"allowedDomains": []},
    }
}


def command(
    env: shim.Envelope, box: shim.Sandbox, brief: str, launch: shim.Launch, home: Path
) -> list[str]:
    """The `claude -p` invocation; the prompt itself is not part of it."""
    budgets = env.payload.get("budgets") or {}
    argv = [
        "claude",
        "-p",
        "--output-format",
        "json",
        "--json-schema",
        orjson.dumps(ANSWER_SCHEMA).decode(),
        "--append-system-prompt",
        brief,
    ]
    if launch.model:
        argv += ["--model", launch.model]
    if budgets.get("max_turns") is not None:
        argv += ["--max-turns", str(int(budgets["max_turns"]))]
    if budgets.get("max_usd") is not None:
        argv += ["--max-budget-usd", str(budgets["max_usd"])]
    allowed, denied = tool_rules(env.writable, launch, str(box.root), str(home))
    if launch.commands:
        argv += ["--settings", orjson.dumps(SANDBOX_SETTINGS).decode()]
    if denied:
        argv += ["--disallowedTools", ",".join(denied)]  # deny wins over any allow rule
    # --allowedTools only pre-approves: the model is still offered every other tool
    # (subagents, web fetch and search among them). --tools is what it is offered at all.
    argv += ["--tools", ",".join(offered(env.writable, launch))]
    # No MCP server at all: with no --mcp-config, none of the user's settings and none a
    # repository's .mcp.json names starts; and only the user's settings and the shim's.
    argv += ["--strict-mcp-config", "--setting-sources", "user"]
    argv.append("--verbose")  # the output lists each tool call and its result (check_edits)
    if env.resumes is not None:
        # The retried call's conversation goes on, under a new id: the old one stays as it was.
        argv += ["--resume", env.resumes, "--fork-session"]
    if not env.keeps_session:
        argv.append("--no-session-persistence")
    argv += [
        "--permission-mode",
        # plan mode keeps a read-only role from editing even if the model tries.
        "acceptEdits" if env.writable else "plan",
        *(["--allowedTools", ",".join(allowed)] if allowed else []),
        "--add-dir",
        str(box.root),
    ]
    return argv


# Each path tool of ai/policy.toml: the Claude Code tool it is (None: ls, which harness gives
# claude none of) and the rules Claude checks it by: Read rules hold for every tool that
# reads files, Edit rules for every tool that changes them.
POLICY_TOOLS: dict[str, tuple[str | None, str]] = {
    "read": ("Read", "Read"),
    "grep": ("Grep", "Read"),
    "glob": ("Glob", "Read"),
    "ls": (None, "Read"),
    "edit": ("Edit", "Edit"),
    "write": ("Write", "Edit"),
}
# Never given to claude; under a policy that turns them off, refused in so many words.
WEB_TOOLS = {"web_fetch": "WebFetch", "web_search": "WebSearch"}


def idle_env(env: shim.Envelope) -> dict[str, str]:
    """The call's idle_s as claude's own limits: how long it waits for a reply to begin, and
    for the next bytes of one streaming. Past either it gives up with an error the shim
    classes retryable, before harness's soft timeout."""
    idle = env.payload["timeouts"].get("idle_s")
    if idle is None:
        return {}
    ms = str(int(float(idle) * 1000))
    return {"API_TIMEOUT_MS": ms, "CLAUDE_BYTE_STREAM_IDLE_TIMEOUT_MS": ms}


def offered(writable: bool, launch: shim.Launch) -> list[str]:
    """The only tools the model is offered: the read tools, the edit tools when the subtask
    writes, Bash when the registry allows commands; under a policy, only those it keeps."""
    names = READ_TOOLS.split(",") + (WRITE_TOOLS.split(",") if writable else [])
    if launch.policy is not None:
        kept = {tool for key, (tool, _) in POLICY_TOOLS.items() if key in launch.policy.tools}
        names = [n for n in names if n in kept]
    return names + (["Bash"] if launch.commands else [])


def tool_rules(
    writable: bool, launch: shim.Launch, workspace: str, home: str
) -> tuple[list[str], list[str]]:
    """The allowed and the disallowed tools and permission rules.

    Without a policy: the read tools, the edit tools when the subtask writes, and the
    registry's commands as `Bash(cmd:*)`; Bash disallowed when there are none. Under a
    policy, each tool it turns off is disallowed, a tool's allow globs become its allow
    rules in place of the bare tool, its deny globs deny rules, and each denylist pattern a
    `Bash(...:*)` deny rule; a rule both allowed and denied is only denied.
    """
    shell = [f"Bash({c}:*)" for c in launch.commands]
    effective = launch.policy
    if effective is None:
        tools = READ_TOOLS + ("," + WRITE_TOOLS if writable else "")
        return tools.split(",") + shell, ([] if launch.commands else ["Bash"])
    allowed: list[str] = []
    denied: list[str] = []
    for name, (tool, family) in POLICY_TOOLS.items():
        rules = effective.tools.get(name)
        if rules is None:
            denied += [tool] if tool else []
            continue
        if family == "Edit" and not writable:
            continue
        if rules.allow is None:
            allowed += [tool] if tool else []
        else:
            allowed += [f"{family}({_path_rule(g, workspace, home)})" for g in rules.allow]
        denied += [f"{family}({_path_rule(g, workspace, home)})" for g in rules.deny]
    denied += [tool for name, tool in WEB_TOOLS.items() if name not in effective.tools]
    if launch.commands:
        denied += [_bash_rule(p) for p in effective.denied]
    else:
        denied.append("Bash")
    denied = list(dict.fromkeys(denied))
    return [a for a in dict.fromkeys(allowed + shell) if a not in denied], denied


def _path_rule(path_glob: str, workspace: str, home: str) -> str:
    """A policy glob as Claude Code reads a rule's path: `//` starts an absolute one, and
    a relative one is relative to its working directory, the workspace."""
    found = policy.expand(path_glob, workspace, home)
    return "/" + found if found.startswith("/") else found


def _bash_rule(pattern: str) -> str:
    """A denylist pattern as a Bash rule; `:*` gives it the pattern's prefix meaning."""
    words = pattern.split()
    while words and words[-1] == "*":
        words.pop()
    return f"Bash({' '.join(words)}:*)" if words else "Bash"


def work(env: shim.Envelope, box: shim.Sandbox, launch: shim.Launch) -> dict[str, Any]:
    brief = prompts.role_brief(str(env.payload["role"]), Path.cwd(), launch)
    prompt = prompts.render(env, brief, launch) + prompts.instructions(box.root, INSTRUCTIONS)
    argv = command(env, box, brief, launch, shim.home())
    ran = cliprocess.run_cli(argv, env, box, prompt, OWN_ENV | idle_env(env))
    final = result_message(ran)
    check(final)
    check_tool_calls(ran, final, launch, str(box.root))
    check_edits(ran)
    answer = answer_of(final)
    denials = final.get("permission_denials") or []
    if denials:
        # Exit 0 and success, yet the model was stopped: say so rather than hide it.
        risks = list(answer.get("risks") or [])
        risks += [f"permission denied: {_tool_name(d)}" for d in denials]
        answer["risks"] = risks
    answer["metrics"] = metrics.measured(answer.get("metrics"), _metrics(final))
    answer["prompt"] = prompt
    return answer


def result_message(ran: cliprocess.Ran) -> dict[str, Any]:
    """The `type: result` object from stdout: one object, or the last of a --verbose array."""
    text = ran.stdout.strip()
    if not text:
        raise shim.ShimError(f"claude printed nothing (exit {ran.code}){ran.stderr_tail(TAIL)}")
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise shim.ShimError(
            f"claude printed no JSON (exit {ran.code}){ran.stderr_tail(TAIL)}"
        ) from None
    if isinstance(doc, list):
        results = [m for m in doc if isinstance(m, dict) and m.get("type") == "result"]
        if not results:
            raise shim.ShimError("claude's message list holds no result")
        doc = results[-1]
    if not isinstance(doc, dict):
        raise shim.ShimError("claude's output is not a JSON object")
    return doc


def check(final: dict[str, Any]) -> None:
    """Raise the error the result stands for; is_error wins even over subtype `success`."""
    subtype = str(final.get("subtype", ""))
    if not final.get("is_error") and subtype == "success":
        return
    words = _error_text(final)
    message = f"claude {subtype or 'error'}: {words or 'no detail'}"[:2000]
    if subtype in HARD_SUBTYPES or HARD_TEXT.search(words):
        raise shim.ShimError(message, "hard")
    if final.get("api_error_status") in RETRYABLE_STATUS or RETRYABLE_TEXT.search(words):
        raise shim.ShimError(message, "retryable")
    raise shim.ShimError(message, "hard")


# The tools that change files, and the policy tool each one is.
EDITING = {"Edit": "edit", "MultiEdit": "edit", "NotebookEdit": "edit", "Write": "write"}


def check_tool_calls(
    ran: cliprocess.Ran, final: dict[str, Any], launch: shim.Launch, workspace: str
) -> None:
    """Refuse the whole answer (hard) if the messages show a Bash command the launch does
    not allow, or, under a policy, a file change the policy does not allow. Only the
    message list of `--verbose` shows the calls; calls Claude Code itself denied (its
    `permission_denials`) never ran and are let be."""
    doc = orjson.loads(ran.stdout)  # result_message has parsed it already
    if not isinstance(doc, list):
        return
    denials = final.get("permission_denials")
    refused = {d.get("tool_use_id") for d in denials or [] if isinstance(d, dict)} - {None}
    for call in _tool_calls(doc):
        if call.get("id") in refused:
            continue
        name, given = call.get("name"), call.get("input")
        given = given if isinstance(given, dict) else {}
        if name == "Bash":
            ran_command = str(given.get("command", ""))
            why = launch.refusal(ran_command)
            if why is not None:
                raise shim.ShimError(f"claude ran a command {why}: {ran_command[:200]}")
        elif name in EDITING and launch.policy is not None:
            path = str(given.get("file_path") or given.get("notebook_path") or "")
            tool = EDITING[name]
            why = launch.policy.path_refusal(tool, path, workspace, str(shim.home()))
            if why is not None:
                raise shim.ShimError(f"claude's {tool} of {path[:200]} is refused: {why}")


def _tool_calls(messages: list[Any]) -> list[dict[str, Any]]:
    """The tool_use blocks of the assistant's messages."""
    found = []
    for message in messages:
        if not isinstance(message, dict) or message.get("type") != "assistant":
            continue
        inner = message.get("message")
        content = inner.get("content") if isinstance(inner, dict) else None
        if not isinstance(content, list):
            continue
        found += [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    return found


def answer_of(final: dict[str, Any]) -> dict[str, Any]:
    """structured_output if the CLI gave one, else a JSON object found in the result text.

    A `success` with an empty result and no structured output is how claude reports a
    model stream cut short: retryable, though it exits 0."""
    if isinstance(final.get("structured_output"), dict):
        return shim.structured(final["structured_output"])
    text = final.get("result")
    if isinstance(text, str):
        found = shim.json_in(text)
        if found is not None:
            return shim.structured(found)
    if not text:
        raise shim.ShimError("claude gave an empty answer (the model's reply was cut)", "retryable")
    raise shim.ShimError("claude gave no structured answer")


def check_edits(ran: cliprocess.Ran) -> None:
    """An edit whose tool result is an error, with no later edit of the same file that
    worked, is a lost edit: retryable, though claude may still end `success`."""
    doc = orjson.loads(ran.stdout)
    if not isinstance(doc, list):
        return
    edits = {c.get("id"): c for c in _tool_calls(doc) if c.get("name") in EDITING}
    last: dict[str, tuple[bool, str]] = {}
    for result in _tool_results(doc):
        call = edits.get(result.get("tool_use_id"))
        if call is None:
            continue
        given = call.get("input")
        given = given if isinstance(given, dict) else {}
        path = str(given.get("file_path") or given.get("notebook_path") or "a file")
        last[path] = (bool(result.get("is_error")), _text_of(result.get("content")))
    failed = [(p, why) for p, (error, why) in sorted(last.items()) if error]
    if failed:
        path, why = failed[0]
        raise shim.ShimError(f"claude's edit of {path[:200]} failed: {why[:300]}", "retryable")


def _tool_results(messages: list[Any]) -> list[dict[str, Any]]:
    """The tool_result blocks the CLI sent back to the model, in order."""
    found = []
    for message in messages:
        if not isinstance(message, dict) or message.get("type") != "user":
            continue
        inner = message.get("message")
        content = inner.get("content") if isinstance(inner, dict) else None
        if isinstance(content, list):
            found += [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    return found


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def _error_text(final: dict[str, Any]) -> str:
    parts: list[str] = []
    for key in ("error", "terminal_reason"):
        if isinstance(final.get(key), str):
            parts.append(final[key])
    errs = final.get("errors")
    if isinstance(errs, list):
        parts += [e if isinstance(e, str) else orjson.dumps(e).decode() for e in errs]
    if isinstance(final.get("result"), str):
        parts.append(final["result"][:TAIL])
    return "; ".join(parts)


def _tool_name(denial: object) -> str:
    if isinstance(denial, dict):
        return str(denial.get("tool_name") or denial.get("tool") or "unknown tool")
    return str(denial)


def _metrics(final: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, name in (("num_turns", "turns"), ("total_cost_usd", "cost_usd")):
        if final.get(key) is not None:
            found[name] = final[key]
    if final.get("session_id") is not None:
        found["session_id"] = final["session_id"]
    usage = final.get("usage")
    if isinstance(usage, dict):
        # Tokens read from and written to the prompt cache are read too, and billed.
        found |= metrics.usage((usage.get(k) for k in READ_FIELDS), [usage.get("output_tokens")])
    return found


def main(argv: list[str] | None = None) -> int:
    return shim.main("claude", work, version, argv, WITHHELD)


if __name__ == "__main__":
    sys.exit(main())
