"""The Claude Code worker: `claude -p` in a sandbox, its JSON result turned into one answer line.

The prompt goes on stdin (never argv, where `ps` and logs would show it), shell tools stay off
but for the commands the registry allows,
and the diffs are computed by the shared shim from the sandbox, never taken from the model.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import orjson

from harness import __version__
from harness.workers import shim

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

# api_error_status values that a later call may well not meet again.
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 529})
RETRYABLE_TEXT = re.compile(r"rate.?limit|overloaded|server.?error|too many requests", re.I)
# Error words the CLI uses for failures no retry will fix; checked before the retryable text so
# an auth failure mentioning a server is still hard.
HARD_TEXT = re.compile(r"authentication_failed|billing_error|invalid_request", re.I)
HARD_SUBTYPES = frozenset({"error_max_turns", "error_max_budget_usd"})

TAIL = 500


def version() -> str:
    return shim.cli_version("claude", f"claude-cli {__version__}")


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


def command(env: shim.Envelope, box: shim.Sandbox, brief: str, launch: shim.Launch) -> list[str]:
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
    if budgets.get("max_turns") is not None:
        argv += ["--max-turns", str(int(budgets["max_turns"]))]
    if budgets.get("max_usd") is not None:
        argv += ["--max-budget-usd", str(budgets["max_usd"])]
    # plan mode keeps a read-only role from editing even if the model tries.
    tools = READ_TOOLS + ("," + WRITE_TOOLS if env.writable else "")
    tools += "".join(f",Bash({c}:*)" for c in launch.commands)
    if launch.commands:
        argv += ["--settings", orjson.dumps(SANDBOX_SETTINGS).decode()]
    else:
        argv += ["--disallowedTools", "Bash"]  # deny wins over anything a settings file allows
    argv += [
        "--no-session-persistence",
        "--permission-mode",
        "acceptEdits" if env.writable else "plan",
        "--allowedTools",
        tools,
        "--add-dir",
        str(box.root),
    ]
    return argv


def work(env: shim.Envelope, box: shim.Sandbox, launch: shim.Launch) -> dict[str, Any]:
    brief = shim.role_brief(str(env.payload["role"]), Path.cwd(), launch)
    prompt = shim.render(env, brief, launch)
    ran = shim.run_cli(command(env, box, brief, launch), env, box, prompt)
    final = result_message(ran)
    check(final)
    answer = answer_of(final)
    denials = final.get("permission_denials") or []
    if denials:
        # Exit 0 and success, yet the model was stopped: say so rather than hide it.
        risks = list(answer.get("risks") or [])
        risks += [f"permission denied: {_tool_name(d)}" for d in denials]
        answer["risks"] = risks
    answer["metrics"] = {**dict(answer.get("metrics") or {}), **_metrics(final)}
    answer["prompt"] = prompt
    return answer


def result_message(ran: shim.Ran) -> dict[str, Any]:
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


def answer_of(final: dict[str, Any]) -> dict[str, Any]:
    """structured_output if the CLI gave one, else a JSON object found in the result text."""
    if isinstance(final.get("structured_output"), dict):
        return shim.structured(final["structured_output"])
    text = final.get("result")
    if isinstance(text, str):
        found = shim.json_in(text)
        if found is not None:
            return shim.structured(found)
    raise shim.ShimError("claude gave no structured answer")


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
        counts = [usage.get(k) for k in ("input_tokens", "output_tokens")]
        if any(isinstance(c, int) for c in counts):
            found["tokens"] = sum(c for c in counts if isinstance(c, int))
    return found


def main(argv: list[str] | None = None) -> int:
    return shim.main("claude", work, version, argv)


if __name__ == "__main__":
    sys.exit(main())
