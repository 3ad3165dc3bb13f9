"""What the log says about a task: pure queries over its events (re-anchoring, §9)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Event = dict[str, Any]
FAILURES = ("subagent_failed", "build_failed", "test_failed", "acceptance_failed")
RETRYABLE_KINDS = ("retryable", "timeout")


def blocker(events: Sequence[Event]) -> Event | None:
    """The blocker_encountered in force (not followed by blocker_resolved), if any."""
    for ev in reversed(events):
        if ev["event"] == "blocker_resolved":
            return None
        if ev["event"] == "blocker_encountered":
            return ev
    return None


def epoch(events: Sequence[Event]) -> int:
    """How many times a human resolved a blocker: a new epoch means fresh calls."""
    return sum(1 for ev in events if ev["event"] == "blocker_resolved")


def done(events: Sequence[Event]) -> dict[str, Event]:
    """Subtask id -> its step_completed event."""
    return {ev["step"]: ev for ev in events if ev["event"] == "step_completed"}


def has(events: Sequence[Event], name: str) -> bool:
    return any(ev["event"] == name for ev in events)


def current(events: Sequence[Event], step: str) -> list[Event]:
    """The subtask's events since the last blocker_resolved."""
    start = 0
    for i, ev in enumerate(events):
        if ev["event"] == "blocker_resolved":
            start = i + 1
    return [ev for ev in events[start:] if ev.get("step") == step]


@dataclass(frozen=True)
class Attempt:
    number: int
    events: list[Event]

    def has(self, name: str) -> bool:
        return has(self.events, name)

    def last(self, name: str) -> Event | None:
        return next((ev for ev in reversed(self.events) if ev["event"] == name), None)

    @property
    def call_id(self) -> str | None:
        invoked = self.last("subagent_invoked")
        return None if invoked is None else str(invoked["details"]["call_id"])


def attempt(step_events: Sequence[Event]) -> Attempt:
    """The attempt in progress: its number (1 + retries) and its events so far."""
    retries = [i for i, ev in enumerate(step_events) if ev["event"] == "subagent_retried"]
    start = retries[-1] + 1 if retries else 0
    return Attempt(len(retries) + 1, list(step_events[start:]))


def failure(att: Attempt) -> Event | None:
    """The failure event that ended this attempt, if it ended in one."""
    return next((ev for ev in reversed(att.events) if ev["event"] in FAILURES), None)


def retryable(ev: Event) -> bool:
    if ev["event"] == "subagent_failed":
        return ev.get("details", {}).get("kind") in RETRYABLE_KINDS
    return ev["event"] in ("build_failed", "test_failed")


def subtask_status(events: Sequence[Event], step: str) -> str:
    """pending, running, done, failed or blocked, as `harness status` shows it."""
    mine = [ev for ev in events if ev.get("step") == step]
    if not mine:
        return "pending"
    if has(mine, "step_completed"):
        return "done"
    block = blocker(events)
    if block is not None and block.get("step") == step:
        return "blocked"
    if mine[-1]["event"] == "step_failed":
        return "failed"
    return "running"


def uncontained(events: Sequence[Event]) -> int:
    """How many events ran with the sandbox off ([sandbox] mode = "off")."""
    return sum(1 for ev in events if ev.get("details", {}).get("contained") is False)
