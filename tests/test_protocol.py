"""The protocol model: what a log says, and which orders of events are legal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import protocol
from harness.layout import Layout

from .builders import FAST
from .conftest import subtask
from .scripted import DIFF, NO_DIFF, TIMEOUT, Scripted, repository, run

Event = dict[str, Any]


def ev(event: str, step: str | None = None, **details: Any) -> Event:
    made: Event = {"event": event}
    if step is not None:
        made["step"] = step
    if details:
        made["details"] = details
    return made


def fed(
    events: list[Event], subtasks: dict[str, tuple[str, ...]] | None = None
) -> tuple[protocol.Model, list[str]]:
    model = protocol.Model(subtasks, history=True)
    found = [f.text for i, e in enumerate(events) for f in model.feed(i, e)]
    return model, found


def call(step: str, call_id: str, attempt: int = 1) -> Event:
    return ev("subagent_invoked", step, call_id=call_id, attempt=attempt)


def test_blockers_epochs_and_status() -> None:
    events = [ev("task_started"), call("T1", "a"), ev("subagent_failed", "T1", call_id="a")]
    events += [ev("step_failed", "T1"), ev("blocker_encountered", "T1")]
    model, found = fed(events)
    assert found == [] and model.blocker is events[-1] and model.epoch == 0
    assert model.status("T1") == "blocked" and model.status("T2") == "pending"
    model.feed(5, ev("blocker_resolved", "T1"))
    assert model.blocker is None and model.epoch == 1
    assert model.status("T1") == "failed"  # its last event, until it runs again
    assert model.attempt("T1").number == 1 and model.attempt("T1").events == []
    model.feed(6, call("T1", "b"))
    assert model.status("T1") == "running" and model.attempt("T1").call_id == "b"


def test_attempts_count_retries_and_keep_their_own_events() -> None:
    events = [
        ev("task_started"),
        call("T1", "a"),
        ev("subagent_failed", "T1", call_id="a", kind="timeout"),
        ev("subagent_retried", "T1", call_id="a"),
        call("T1", "b", attempt=2),
        ev("subagent_succeeded", "T1", call_id="b"),
        ev("step_completed", "T1", call_id="b", commit=None),
    ]
    model, found = fed(events)
    assert found == []
    first, second = model.attempts("T1")
    assert (first.number, first.call_id, first.outcome()[0]) == (1, "a", "failed (subagent_failed)")
    assert first.failure is events[2] and first.events == events[1:4]
    assert (second.number, second.call_id, second.outcome()) == (2, "b", ("completed", None))
    assert model.done["T1"] == protocol.Completed("b", None, 6)
    assert model.status("T1") == "done"


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (ev("subagent_failed", kind="retryable"), True),
        (ev("subagent_failed", kind="timeout"), True),
        (ev("subagent_failed", kind="hard"), False),
        (ev("subagent_failed"), False),
        (ev("build_failed"), True),
        (ev("test_failed"), True),
        (ev("acceptance_failed"), False),
    ],
)
def test_retryable(event: Event, expected: bool) -> None:
    assert protocol.retryable(event) is expected


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        ([ev("subagent_succeeded", "T1", call_id="zz")], "awaits no outcome"),
        ([call("T1", "b")], "while call a has no outcome"),
        ([ev("subagent_retried", "T1")], "not a retryable failure"),
        ([ev("step_completed", "T1", call_id="a")], "has no outcome"),
        ([ev("blocker_encountered", "T1")], "without its step_failed"),
        ([ev("blocker_resolved")], "not blocked"),
        ([ev("task_started")], "task_started again"),
        ([call("T2", "b")], "before T1 completed"),
    ],
)
def test_illegal_orders_are_named(tail: list[Event], reason: str) -> None:
    _, found = fed([ev("task_started"), call("T1", "a"), *tail], {"T1": (), "T2": ("T1",)})
    assert any(reason in text for text in found), found


def test_a_check_logged_twice_in_one_attempt_is_refused_a_different_one_is_not() -> None:
    start = [ev("task_started"), call("T1", "a"), ev("subagent_succeeded", "T1", call_id="a")]
    build = ev("build_succeeded", "T1", check="build")
    assert fed([*start, build, ev("build_succeeded", "T1", check="lint")])[1] == []
    assert "repeats" in fed([*start, build, build])[1][0]


# -- every log harness writes is legal; a single change to it is not ---------------------------

FAILURE = st.sampled_from([TIMEOUT, "retryable", "hard"])
# Structural events: taking one out (but the last line) always breaks the order.
STRUCTURAL = (protocol.STEP_EVENTS - protocol.CHECK_PASSED - protocol.CHECK_FAILED) | {
    "task_started",
    "task_completed",
    "blocker_encountered",
    "blocker_resolved",
}


@st.composite
def plans(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Up to four subtasks, each depending on some earlier ones, and each worker's answers:
    some failures, then a success, so every run ends complete."""
    n = draw(st.integers(1, 4))
    subtasks, answers = [], {}
    for i in range(n):
        sid = f"T{i + 1}"
        deps = (
            draw(st.lists(st.sampled_from([f"T{j + 1}" for j in range(i)]), unique=True))
            if i
            else []
        )
        subtasks.append(subtask(sid, creates=["src/made_*.py"], depends_on=deps))
        answers[sid] = [
            *draw(st.lists(FAILURE, max_size=3)),
            draw(st.sampled_from([DIFF, NO_DIFF])),
        ]
    return subtasks, answers


def mutations(events: list[Event]) -> list[tuple[str, list[Event]]]:
    out = []
    for i, event in enumerate(events):
        out.append((f"line {i} ({event['event']}) twice", [*events[: i + 1], *events[i:]]))
        if event["event"] in STRUCTURAL and i < len(events) - 1:
            out.append((f"line {i} ({event['event']}) taken out", events[:i] + events[i + 1 :]))
    return out


@settings(FAST, max_examples=12)
@given(plans())
def test_every_log_the_orchestrator_writes_is_legal_and_no_single_change_is(
    tmp_path: Path, drawn: tuple[list[dict[str, Any]], dict[str, list[str]]]
) -> None:
    subtasks, answers = drawn
    root = repository(tmp_path, subtasks)
    worker = Scripted(answers)
    run(root, worker)
    worker.assert_used()
    log = Layout(root).log("demo")
    events = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    needs = {s["id"]: tuple(s["depends_on"]) for s in subtasks}
    assert events[-1]["event"] == "task_completed"
    assert fed(events, needs)[1] == []
    for what, changed in mutations(events):
        assert fed(changed, needs)[1], f"{what} went unnoticed"
