"""`harness log`: the log as lines a person reads, made by pure functions over its events."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from harness.base import clock, schemas
from harness.base.printable import printable

Event = dict[str, Any]

EVENTS: list[str] = schemas.document("progress-event")["properties"]["event"]["enum"]
# The details worth a glance, in the order shown; call ids and commits are cut to 12.
DETAILS = ("plan", "call_id", "commit", "token", "check", "kind", "phase", "after", "attempt")
SHORTENED = frozenset({"call_id", "commit"})
FAILED = frozenset({"error", "blocked"})
ERROR_WIDTH = 72
RED, RESET = "\x1b[31m", "\x1b[0m"


@dataclass(frozen=True)
class Row:
    event: Event
    duration: int | None  # seconds, where a span ends at this event


def rows(events: Iterable[Event]) -> Iterator[Row]:
    """Each event with the span it closes: a call's outcome since its subagent_invoked, a
    step's end since the subtask's first event, task_completed since the first event.

    Spans are measured over all events, so filter the rows, not the events given here.
    """
    invoked: dict[str, datetime] = {}
    first: dict[str, datetime] = {}
    start: datetime | None = None
    for ev in events:
        at = clock.parse(ev["ts"])
        start = start or at
        name, step = ev["event"], ev.get("step")
        call = ev.get("details", {}).get("call_id")
        if step is not None:
            first.setdefault(step, at)
        since = None
        if name == "subagent_invoked" and isinstance(call, str):
            invoked[call] = at
        elif name in ("subagent_succeeded", "subagent_failed") and call in invoked:
            since = invoked.pop(call)
        elif name in ("step_completed", "step_failed") and step is not None:
            since = first[step]
        elif name == "task_completed":
            since = start
        yield Row(ev, None if since is None else int((at - since).total_seconds()))


def selected(ev: Event, event: str | None, subtask: str | None) -> bool:
    """True when the event passes the filters (None lets everything through)."""
    return (event is None or ev["event"] == event) and (
        subtask is None or ev.get("step") == subtask
    )


def failed(ev: Event) -> bool:
    return ev["status"] in FAILED


def render(row: Row, color: bool) -> str:
    """One line: mark, seq, ts, step, event, status, span, details; `!` marks a failure,
    which is also red when `color` (stdout is a terminal)."""
    ev = row.event
    bad = failed(ev)
    # Errors and details come from agents: an escape sequence must not reach the terminal,
    # where it could rewrite what the reader sees.
    text = printable(
        f"{'!' if bad else ' '} {ev['seq']:>6} {ev['ts']} {ev.get('step', '-'):<8} "
        f"{ev['event']:<22} {ev['status']:<7} {span(row.duration):>6}  {details(ev)}"
    ).rstrip()
    return f"{RED}{text}{RESET}" if bad and color else text


def span(seconds: int | None) -> str:
    if seconds is None:
        return ""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def details(ev: Event) -> str:
    """The key details as name=value, then the error, cut to one short line."""
    found = ev.get("details", {})
    parts = []
    for key in DETAILS:
        value = found.get(key)
        if value is None:
            continue
        text = str(value)
        parts.append(f"{key}={text[:12] if key in SHORTENED else text}")
    if "error" in ev:
        error = " ".join(str(ev["error"]).split())
        if len(error) > ERROR_WIDTH:
            error = error[: ERROR_WIDTH - 3] + "..."
        parts.append(f"error: {error}")
    return " ".join(parts)
