"""State queries over the events of a log."""

from __future__ import annotations

from typing import Any

import pytest

from harness import state


def ev(event: str, step: str | None = None, **details: Any) -> dict[str, Any]:
    made: dict[str, Any] = {"event": event}
    if step is not None:
        made["step"] = step
    if details:
        made["details"] = details
    return made


def test_blocker_and_epoch() -> None:
    events = [ev("task_started"), ev("blocker_encountered", "T1")]
    assert state.blocker(events) is events[-1] and state.epoch(events) == 0
    events.append(ev("blocker_resolved", "T1"))
    assert state.blocker(events) is None and state.epoch(events) == 1
    events.append(ev("blocker_encountered", "T2"))
    assert state.blocker(events) is events[-1]
    events.append(ev("blocker_resolved", "T2"))
    assert state.blocker(events) is None and state.epoch(events) == 2
    assert state.blocker([]) is None and state.epoch([]) == 0


def test_current_is_the_steps_events_since_the_last_resolve() -> None:
    events = [
        ev("subagent_invoked", "T1", call_id="a"),
        ev("subagent_failed", "T1"),
        ev("blocker_encountered", "T1"),
        ev("blocker_resolved", "T1"),
        ev("subagent_invoked", "T1", call_id="b"),
        ev("subagent_invoked", "T2"),
    ]
    assert state.current(events, "T1") == [events[4]]
    assert state.current(events[:3], "T1") == events[:3]


def test_attempt_counts_retries_and_keeps_only_the_latest_events() -> None:
    first = [ev("subagent_invoked", "T1", call_id="a"), ev("subagent_failed", "T1", kind="timeout")]
    att = state.attempt(first)
    assert att.number == 1 and att.call_id == "a" and att.has("subagent_failed")
    assert state.failure(att) is first[1]
    retried = [*first, ev("subagent_retried", "T1"), ev("subagent_invoked", "T1", call_id="b")]
    att = state.attempt(retried)
    assert att.number == 2 and att.call_id == "b" and att.events == retried[3:]
    assert state.failure(att) is None and not att.has("subagent_failed")
    assert att.last("subagent_failed") is None
    empty = state.attempt([])
    assert empty.number == 1 and empty.call_id is None and state.failure(empty) is None


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (ev("subagent_failed", kind="retryable"), True),
        (ev("subagent_failed", kind="timeout"), True),
        (ev("subagent_failed", kind="hard"), False),
        (ev("subagent_failed", kind="format"), False),
        (ev("subagent_failed"), False),
        (ev("build_failed"), True),
        (ev("test_failed"), True),
        (ev("acceptance_failed"), False),
    ],
)
def test_retryable(event: dict[str, Any], expected: bool) -> None:
    assert state.retryable(event) is expected


def test_failure_picks_the_last_failure_event() -> None:
    att = state.Attempt(
        1,
        [
            ev("subagent_invoked", "T1"),
            ev("subagent_succeeded", "T1"),
            ev("build_succeeded", "T1"),
            ev("test_failed", "T1"),
        ],
    )
    assert state.failure(att) is att.events[-1]


def test_subtask_status() -> None:
    events = [ev("task_started")]
    assert state.subtask_status(events, "T1") == "pending"
    events.append(ev("subagent_invoked", "T1"))
    assert state.subtask_status(events, "T1") == "running"
    events.append(ev("step_failed", "T1"))
    assert state.subtask_status(events, "T1") == "failed"
    events.append(ev("blocker_encountered", "T1"))
    assert state.subtask_status(events, "T1") == "blocked"
    assert state.subtask_status(events, "T2") == "pending"
    events.append(ev("blocker_resolved", "T1"))
    assert state.subtask_status(events, "T1") == "running"
    events += [ev("subagent_invoked", "T1"), ev("step_completed", "T1", commit=None)]
    assert state.subtask_status(events, "T1") == "done"
    assert state.done(events) == {"T1": events[-1]}
    assert state.has(events, "step_completed") and not state.has(events, "task_completed")
