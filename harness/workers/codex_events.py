"""Codex's JSONL events: parsed, checked for failures and refused tools, commands and
changes, and its final message turned back into the worker-output shape."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from harness.base import metrics
from harness.workers import cliprocess, shim

# Failures no retry fixes; checked first because codex words an auth failure after retries as
# "exceeded retry limit, last status: 401 Unauthorized".
HARD_TEXT = re.compile(
    r"\b40[13]\b|unauthori[sz]ed|forbidden|invalid.api.key|not (?:inside )?a (?:trusted|git)"
    r"|unknown model|model .*(?:does not exist|not found|not supported)",
    re.I,
)
# Failures the next call may well not meet: rate limits, dropped streams, a quota that resets,
# a server that says it is busy (codex words a 500 "We're currently experiencing high demand").
RETRYABLE_TEXT = re.compile(
    r"\b429\b|too many requests|stream disconnected|exceeded retry limit"
    r"|usage limit.*try again|\b50[0234]\b|overloaded|high demand|temporar",
    re.I | re.S,
)

TAIL = 500


def parse_events(stdout: bytes) -> list[dict[str, Any]]:
    """The JSONL events; a line that is not a JSON object (a stray log line) is skipped."""
    events = []
    for line in stdout.splitlines():
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            events.append(doc)
    return events


def check(ran: cliprocess.Ran, events: list[dict[str, Any]]) -> None:
    """Raise the error a failed run stands for.

    `error` events also report transient reconnects during a turn that then succeeds, so they
    only count when the run failed: a non-zero exit or a `turn.failed`.
    """
    failed = [e for e in events if e.get("type") == "turn.failed"]
    if ran.code == 0 and not failed:
        return
    messages = [_message(e) for e in events if e.get("type") in ("turn.failed", "error")]
    words = "; ".join(m for m in messages if m)
    if not words:
        tail = ran.stderr.decode("utf-8", "replace").strip()[-TAIL:]
        raise shim.ShimError(f"codex exited {ran.code}: {tail or 'no detail'}", "hard")
    message = f"codex exited {ran.code}: {words}"[:2000]
    if HARD_TEXT.search(words):
        raise shim.ShimError(message, "hard")
    if RETRYABLE_TEXT.search(words):
        raise shim.ShimError(message, "retryable")
    raise shim.ShimError(message, "hard")


def check_edits(events: list[dict[str, Any]]) -> None:
    """A file change codex reports as failed is a lost edit, whatever codex's exit code says
    (it exits 0 with its final message): retryable, as the next attempt may make it."""
    for event in events:
        item = event.get("item")
        if (
            event.get("type") == "item.completed"
            and isinstance(item, dict)
            and item.get("type") == "file_change"
            and item.get("status") != "completed"
        ):
            changes = item.get("changes")
            paths = [
                str(c.get("path"))[:200]
                for c in (changes if isinstance(changes, list) else [])
                if isinstance(c, dict)
            ]
            status = str(item.get("status"))[:40]
            raise shim.ShimError(
                f"codex's edit of {', '.join(paths) or 'a file'} ended {status}", "retryable"
            )


# Items of tools no role may use. codex 0.169 offers its collaboration tools whatever its
# features say: a subagent it started refuses the answer, as a command off the list does.
FORBIDDEN_ITEMS = {
    "collab_tool_call": "a subagent",
    "web_search": "web search",
    "web_search_call": "web search",
    "mcp_tool_call": "an MCP tool",
}


def check_tools(events: list[dict[str, Any]]) -> None:
    """Refuse the whole answer (hard) if codex reports using a tool no role may use."""
    for event in events:
        item = event.get("item")
        kind = item.get("type") if isinstance(item, dict) else None
        if isinstance(kind, str) and kind in FORBIDDEN_ITEMS:
            raise shim.ShimError(f"codex used {FORBIDDEN_ITEMS[kind]} ({kind}), which no role may")


def check_commands(events: list[dict[str, Any]], launch: shim.Launch) -> None:
    """Refuse the whole answer (hard) if codex ran a command the registry does not allow,
    or one the policy denies."""
    for event in events:
        item = event.get("item")
        if isinstance(item, dict) and item.get("type") == "command_execution":
            ran = str(item.get("command", ""))
            why = launch.refusal(ran)
            if why is not None:
                raise shim.ShimError(f"codex ran a command {why}: {ran[:200]}")


# A file codex adds or deletes is written, one it updates edited, as the policy's tools go.
CHANGE_TOOL = {"add": "write", "delete": "write", "update": "edit"}


def check_changes(events: list[dict[str, Any]], launch: shim.Launch, workspace: str) -> None:
    """Under a policy, refuse the whole answer (hard) if codex reports changing a file the
    policy's write or edit rules do not allow."""
    if launch.policy is None:
        return
    for event in events:
        item = event.get("item")
        if not (isinstance(item, dict) and item.get("type") == "file_change"):
            continue
        changes = item.get("changes")
        for change in changes if isinstance(changes, list) else []:
            if not isinstance(change, dict):
                continue
            tool = CHANGE_TOOL.get(str(change.get("kind")), "edit")
            path = str(change.get("path", ""))
            why = launch.policy.path_refusal(tool, path, workspace, str(shim.home()))
            if why is not None:
                raise shim.ShimError(f"codex's {tool} of {path[:200]} is refused: {why}")


def final_text(events: list[dict[str, Any]], last: Path) -> str:
    """The last agent_message of the run, else what codex wrote to the -o file."""
    for event in reversed(events):
        item = event.get("item")
        if (
            event.get("type") == "item.completed"
            and isinstance(item, dict)
            and item.get("type") == "agent_message"
            and isinstance(item.get("text"), str)
        ):
            return str(item["text"])
    if last.is_file():
        return last.read_text("utf-8", "replace")
    raise shim.ShimError("codex gave no final message")


def answer_of(text: str) -> dict[str, Any]:
    """The schema-shaped final message, back in the shape of the worker-output schema."""
    try:
        doc = orjson.loads(text.strip())
    except orjson.JSONDecodeError:
        raise shim.ShimError("codex's final message is not JSON") from None
    answer = shim.structured(doc)
    if isinstance(answer.get("metrics"), list):
        answer["metrics"] = {
            str(m["name"]): m.get("value")
            for m in answer["metrics"]
            if isinstance(m, dict) and "name" in m
        }
    elif not isinstance(answer.get("metrics"), dict):
        answer.pop("metrics", None)
    # Drop the nulls the strict schema made the model write; the output schema wants strings.
    for key, fields in (("plan", ("why",)), ("artifacts", ("type",))):
        items = answer.get(key)
        if isinstance(items, list):
            answer[key] = [
                {k: v for k, v in i.items() if not (k in fields and v is None)}
                if isinstance(i, dict)
                else i
                for i in items
            ]
    return answer


def _message(event: dict[str, Any]) -> str:
    err = event.get("error")
    if isinstance(err, dict) and err.get("message") is not None:
        return str(err["message"])
    if event.get("message") is not None:
        return str(event["message"])
    return ""


def event_metrics(events: list[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for event in events:
        if event.get("type") == "thread.started" and event.get("thread_id") is not None:
            found["session_id"] = str(event["thread_id"])
    # One turn per exec call as a rule, but sum in case codex ever reports several. Its
    # input_tokens count the cached ones too.
    turns = [
        usage
        for event in events
        if event.get("type") == "turn.completed" and isinstance(usage := event.get("usage"), dict)
    ]
    found |= metrics.usage(
        (u.get("input_tokens") for u in turns), (u.get("output_tokens") for u in turns)
    )
    return found
