"""The Gemini worker: `gemini` headless in a sandbox, its event stream turned into one line.

The prompt goes on stdin, never argv, where `ps` and logs would show it. Gemini reads a
non-TTY stdin and appends the `-p` text after it, so `-p` carries only a fixed, harmless
nudge: a non-empty `-p` is what makes the run headless whatever the stdin, and an empty value
is something an argument parser may refuse. Its output is `stream-json`, one event a line as
it happens (init, messages, each tool call and its result, the result), so a gemini that
prints nothing for the call's idle_s is stuck, and a failed edit shows. Gemini has no
output-schema flag, so the answer is the JSON object in its last reply's text; the diffs are
computed by the shared shim from the sandbox, never taken from the model.
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
from harness.workers import cliprocess, prompts, shim

NUDGE = "Carry out the task above and finish with the JSON object it asks for."

# Exit codes gemini documents for failures no retry fixes: auth, bad input, sandbox, config,
# turn limit, fatal tool error, untrusted workspace.
HARD_CODES = {
    41: "authentication failed",
    42: "bad input",
    44: "sandbox error",
    52: "configuration error",
    53: "turn limit reached",
    54: "fatal tool error",
    55: "untrusted workspace",
}
# On the general exit code 1, these words mean a limit or an overload the next call may not
# meet; anything else on exit 1 is hard.
RETRYABLE_TEXT = re.compile(
    r"\b429\b|quota|resource.?exhausted|rate.?limit|overloaded|too many requests"
    r"|\b50[03]\b|unavailable",
    re.I,
)
_STDERR_ERROR = re.compile(r"^\[ERROR\]\s*(\{.*\})\s*$", re.M)
# A model stream cut short, or a request that never got an answer: gemini says "terminated"
# or "Incomplete JSON segment" for the one, "fetch failed" for the other.
CUT_TEXT = re.compile(
    r"incomplete json segment|\bterminated\b|ECONNRESET|fetch failed|socket hang up", re.I
)
# HTTP statuses in an error's `code`: auth and bad requests are hard, limits and outages not.
HARD_STATUS = frozenset({400, 401, 403, 404})
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
# A fatal API error exits with its HTTP status modulo 256 (145 for 401, 173 for 429, 244 for
# 500): the status, when the error object itself cannot be read.
STATUS_OF_EXIT = {status % 256: status for status in HARD_STATUS | RETRYABLE_STATUS}

# Tries of each request to the model, gemini's own retries included (it makes 10 over some
# 200 s by default): harness owns retries and time.
OWN_ATTEMPTS = 2
# Tools gemini offers that no role needs: the web, subagents, its own memory and planning.
NEVER = (
    "web_fetch",
    "google_web_search",
    "invoke_agent",
    "enter_plan_mode",
    "exit_plan_mode",
    "update_topic",
    "save_memory",
    "write_todos",
    "activate_skill",
    "ask_user",
)
WRITE_TOOLS = ("replace", "write_file")
SHELL_TOOL = "run_shell_command"

TAIL = 500


# Where a repository configures gemini-cli 0.61.0 (docs/agent-sandboxes.md, "What a
# repository could configure"): `.gemini` (settings.json with hooks, MCP servers and a tool
# discovery command; .env; commands, skills, agents, extensions, policies), `.agents`
# (skills) and the `.env` gemini loads into its own environment. --skip-trust makes the
# sandbox a trusted folder, which would load them all: they are never in it. GEMINI.md
# stays, as instructions only.
WITHHELD = (".gemini", ".agents", ".env")


def version() -> str:
    return cliprocess.cli_version("gemini", f"gemini-cli {__version__}")


# gemini's tools that change files, by the policy tool each one is.
EDIT_TOOLS = {"write": "write_file", "edit": "replace"}
# Its tools that read, likewise: they need no approval, so only leaving them out turns them off.
READ_TOOLS = {
    "read": ("read_file", "read_many_files"),
    "glob": ("glob",),
    "grep": ("grep_search",),
    "ls": ("list_directory",),
}


def command(env: shim.Envelope, launch: shim.Launch) -> list[str]:
    """The `gemini` invocation; the prompt itself is not part of it.

    Headless gemini leaves out every tool that would ask for approval, the shell included;
    `--allowed-tools` lets through only the registry's commands. Gemini has no way to run
    them without network short of its container sandbox, which the shim does not assume.
    Under a policy that turns write or edit off, edits are no longer approved as a whole
    (auto_edit) but tool by tool; its read and search tools need no approval, so its
    settings leave out those the policy turns off (`settings`).
    """
    edits: list[str] = []
    if not env.writable:
        mode = "plan"  # keeps a read-only role from editing even if the model tries
    elif launch.policy is None or set(EDIT_TOOLS) <= set(launch.policy.tools):
        mode = "auto_edit"
    else:
        mode = "default"
        edits = [name for tool, name in EDIT_TOOLS.items() if tool in launch.policy.tools]
    allowed = ",".join(edits + [f"run_shell_command({c})" for c in launch.commands])
    return [
        "gemini",
        "-p",
        NUDGE,
        "--output-format",
        "stream-json",
        "--approval-mode",
        mode,
        # The sandbox is a fresh directory gemini has never seen; without this it refuses
        # to work there (exit 55).
        "--skip-trust",
        *(["--model", launch.model] if launch.model else []),
        # The retried call's session, the only one its store (sessions.py) holds here.
        *(["--resume", "latest"] if env.resumes is not None else []),
        *(["--allowed-tools", allowed] if allowed else []),
    ]


def settings(
    writable: bool,
    launch: shim.Launch,
    environ: dict[str, str],
    turns: int | None = None,
    user: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """gemini's settings for the call: the user's, with the shim's on top: its retries
    capped, the tools no role needs or the policy turns off left out, the call's max_turns,
    and, when the user's settings choose no way to authenticate, the one the environment
    provides (headless gemini refuses to start without one, and a base URL alone selects one
    it refuses)."""
    user = user or {}
    excluded = list(NEVER)
    if not writable:
        excluded += WRITE_TOOLS
    if not launch.commands:
        excluded.append(SHELL_TOOL)
    if launch.policy is not None:
        kept = launch.policy.tools
        excluded += [
            name for tool, names in READ_TOOLS.items() if tool not in kept for name in names
        ]
        excluded += [name for tool, name in EDIT_TOOLS.items() if tool not in kept]
    doc: dict[str, Any] = {
        "general": {"maxAttempts": OWN_ATTEMPTS},
        "tools": {"exclude": excluded},
        # No usage statistics: no traffic beside the model's (its proxy would refuse it).
        "privacy": {"usageStatisticsEnabled": False},
        # No `.env` of the folders it runs in: only the home's (the sandbox's own).
        "advanced": {"ignoreLocalEnv": True},
    }
    if turns is not None:
        doc["model"] = {"maxSessionTurns": turns}
    if _chosen_auth(user) is None:
        if environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() == "true":
            doc["security"] = {"auth": {"selectedType": "vertex-ai"}}
        elif environ.get("GEMINI_API_KEY"):
            doc["security"] = {"auth": {"selectedType": "gemini-api-key"}}
    found = merged(user, doc)
    # No MCP server, and no command the user's settings run to find tools: only the above.
    found.pop("mcpServers", None)
    for key in ("discoveryCommand", "callCommand"):
        found.get("tools", {}).pop(key, None)
    return found


def user_settings() -> dict[str, Any]:
    """The user's own gemini settings, which harness binds read-only beside the file gemini
    reads; {} when they have none."""
    try:
        doc = orjson.loads((shim.home() / ".gemini" / "user-settings.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def merged(user: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """`user` with `ours` on top, object by object; the excluded tools are both lists."""
    out = dict(user)
    for key, value in ours.items():
        theirs = out.get(key)
        if isinstance(value, dict) and isinstance(theirs, dict):
            out[key] = merged(theirs, value)
        elif key == "exclude" and isinstance(value, list) and isinstance(theirs, list):
            out[key] = list(dict.fromkeys([*theirs, *value]))
        else:
            out[key] = value
    return out


def _chosen_auth(user: dict[str, Any]) -> str | None:
    """The way to authenticate the user's own settings choose, if any."""
    auth = user.get("security", {}).get("auth", {}) if isinstance(user, dict) else {}
    chosen = auth.get("selectedType") if isinstance(auth, dict) else None
    return chosen if isinstance(chosen, str) else None


def work(env: shim.Envelope, box: shim.Sandbox, launch: shim.Launch) -> dict[str, Any]:
    brief = prompts.role_brief(str(env.payload["role"]), Path.cwd(), launch)
    prompt = prompts.render(env, brief, launch)
    turns = (env.payload.get("budgets") or {}).get("max_turns")
    doc = settings(env.writable, launch, dict(os.environ), turns, user_settings())
    target = shim.home() / ".gemini" / "settings.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(orjson.dumps(doc))
    ran = cliprocess.run_cli(command(env, launch), env, box, prompt, streams=True)
    doc = output_of(ran)
    check(ran, doc)
    check_edits(doc)
    text = doc.get("response")
    if not isinstance(text, str):
        raise shim.ShimError("gemini gave no response text")
    answer = shim.answer_in(text, "gemini's response")
    answer["metrics"] = metrics.measured(answer.get("metrics"), _metrics(doc))
    answer["prompt"] = prompt
    return answer


def output_of(ran: cliprocess.Ran) -> dict[str, Any]:
    """What the run says: from the event stream on stdout, the session, the text of the last
    reply, the edits and how each ended, and the result's status, error and stats; without
    a result event, the error object a fatal error puts on stderr: a pretty-printed
    `{session_id, error}` after a stack trace, or an `[ERROR] {...}` line."""
    doc = _events(ran.stdout)
    if "status" in doc:
        return doc
    stderr = ran.stderr.decode("utf-8", "replace")
    found = _STDERR_ERROR.findall(stderr)
    for chunk in reversed(found):
        try:
            err = orjson.loads(chunk)
        except orjson.JSONDecodeError:
            continue
        if isinstance(err, dict):
            return {"error": err}
    trailing = _trailing_object(stderr)
    if trailing is not None:
        return trailing
    if ran.code != 0:
        return {}  # check() words the failure from the exit code and stderr
    raise shim.ShimError(f"gemini printed no JSON (exit {ran.code}){ran.stderr_tail(TAIL)}")


# gemini's tools that change a file, and the argument naming it.
EDITING = {"replace": "file_path", "write_file": "file_path"}


def _events(stdout: bytes) -> dict[str, Any]:
    """The stream-json events folded into one document; a line that is not a JSON object is
    skipped. `response` is the last reply: its text since the last tool call, deltas joined."""
    doc: dict[str, Any] = {"edits": {}}
    reply: list[str] = []
    edits: dict[str, str] = {}  # tool_id -> the file it edits
    for line in stdout.splitlines():
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "init" and isinstance(event.get("session_id"), str):
            doc["session_id"] = event["session_id"]
        elif kind == "message" and event.get("role") == "assistant":
            if not event.get("delta"):
                reply = []
            reply.append(str(event.get("content", "")))
        elif kind == "tool_use":
            reply = []
            params = event.get("parameters")
            arg = EDITING.get(str(event.get("tool_name")))
            if arg is not None and isinstance(params, dict):
                edits[str(event.get("tool_id"))] = str(params.get(arg, "a file"))
        elif kind == "tool_result" and str(event.get("tool_id")) in edits:
            path = edits[str(event.get("tool_id"))]
            doc["edits"][path] = (str(event.get("status")), _error_text(event.get("error")))
        elif kind == "result":
            doc |= {k: event[k] for k in ("status", "error", "stats") if k in event}
    doc["response"] = "".join(reply)
    return doc


def check_edits(doc: dict[str, Any]) -> None:
    """A file whose last edit ended in an error is a lost edit: retryable, though gemini may
    still end with success."""
    edits = doc.get("edits", {})
    failed = [(p, why) for p, (status, why) in sorted(edits.items()) if status == "error"]
    if failed:
        path, why = failed[0]
        raise shim.ShimError(f"gemini's edit of {path[:200]} failed: {why[:300]}", "retryable")


def _trailing_object(text: str) -> dict[str, Any] | None:
    """The JSON object that ends `text`, starting on a line of its own."""
    starts = [m.start() for m in re.finditer(r"^\{", text, re.M)]
    for start in reversed(starts[-20:]):
        try:
            doc = orjson.loads(text[start:].strip())
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict) and "error" in doc:
            return doc
    return None


def check(ran: cliprocess.Ran, doc: dict[str, Any]) -> None:
    """Raise the error the run stands for: by the HTTP status the error names, then by
    exit code, then by the error's words."""
    err = doc.get("error")
    if ran.code == 0 and not err and doc.get("status", "success") == "success":
        return
    words = _error_text(err) or ran.stderr_tail(TAIL).removeprefix(": ")
    message = f"gemini exited {ran.code}: {words or 'no detail'}"[:2000]
    code: Any = err.get("code") if isinstance(err, dict) else None
    if code is None:
        code = STATUS_OF_EXIT.get(ran.code)
    if code in HARD_STATUS:
        raise shim.ShimError(message, "hard")
    if code in RETRYABLE_STATUS or CUT_TEXT.search(words):
        raise shim.ShimError(message, "retryable")
    if ran.code in HARD_CODES or code in HARD_CODES:
        key = ran.code if ran.code in HARD_CODES else code
        raise shim.ShimError(f"{message} ({HARD_CODES[key]})", "hard")
    if ran.code in (0, 1) and (code == 429 or RETRYABLE_TEXT.search(words)):
        raise shim.ShimError(message, "retryable")
    raise shim.ShimError(message, "hard")


def _error_text(err: object) -> str:
    if isinstance(err, dict):
        parts = [str(err[k]) for k in ("type", "message", "code") if err.get(k) is not None]
        return " ".join(parts)
    return "" if err is None else str(err)


def _metrics(doc: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if doc.get("session_id") is not None:
        found["session_id"] = str(doc["session_id"])
    stats = doc.get("stats")
    if isinstance(stats, dict):
        # The result's totals over every model it asked (its router's side call included):
        # tokens read and written, comparable to the other shims' input + output.
        found |= metrics.usage([stats.get("input_tokens")], [stats.get("output_tokens")])
    return found


def main(argv: list[str] | None = None) -> int:
    return shim.main("gemini", work, version, argv, WITHHELD)


if __name__ == "__main__":
    sys.exit(main())
