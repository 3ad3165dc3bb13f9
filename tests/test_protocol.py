"""The protocol model: what a log says, and which orders of events are legal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.record import protocol
from harness.repository.layout import Layout

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


MODES = ("stop", protocol.CONTINUE, protocol.SKIP_DEPENDENTS)


def drawn_plan(
    draw: st.DrawFn, modes: bool, failures: int
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Up to four subtasks, each depending on some earlier ones (with `modes`, each with an
    on_error of its own), and each worker's answers: up to `failures` failures, then a
    success."""
    n = draw(st.integers(1, 4))
    subtasks, answers = [], {}
    for i in range(n):
        sid = f"T{i + 1}"
        deps = (
            draw(st.lists(st.sampled_from([f"T{j + 1}" for j in range(i)]), unique=True))
            if i
            else []
        )
        extra = {"on_error": draw(st.sampled_from(MODES))} if modes else {}
        last = draw(st.sampled_from([DIFF, NO_DIFF]))
        # An answer without a change completes only a subtask that says it may (else it is
        # a lost edit, retried: test_step has those).
        extra |= {"no_change_ok": True} if last == NO_DIFF else {}
        subtasks.append(subtask(sid, creates=["src/made_*.py"], depends_on=deps, **extra))
        answers[sid] = [*draw(st.lists(FAILURE, max_size=failures)), last]
    return subtasks, answers


@st.composite
def plans(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Plans whose every run ends complete (failures are retried or resumed)."""
    return drawn_plan(draw, modes=False, failures=3)


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


# -- on_error: step_skipped, failures that go on, the task-level blocker -----------------------

Needs = dict[str, tuple[str, ...]]
CHAIN: Needs = {"P1": (), "P2": ("P1",), "P3": ("P2",)}
PAIR: Needs = {"P1": (), "P2": ("P1",)}
ONE: Needs = {"P1": ()}


def failing(step: str, call_id: str, on_error: str | None = None, error: str = "no") -> list[Event]:
    """A call that failed for good, then its step_failed (`on_error` absent: "stop")."""
    failed = ev("step_failed", step, phase="subagent_failed")
    if on_error is not None:
        failed["details"]["on_error"] = on_error
    failed["error"] = error
    return [call(step, call_id), ev("subagent_failed", step, call_id=call_id, kind="hard"), failed]


def completing(step: str, call_id: str) -> list[Event]:
    return [
        call(step, call_id),
        ev("subagent_succeeded", step, call_id=call_id),
        ev("step_completed", step, call_id=call_id, commit=None),
    ]


def skipped(step: str, cause: str) -> Event:
    return ev("step_skipped", step, cause=cause)


def blocker(step: str | None = None, error: str = "see the log") -> Event:
    """A blocker_encountered at `step`, or (None) for the task at its end."""
    return ev("blocker_encountered", step) | {"error": error}


@pytest.mark.parametrize(
    ("on_error", "legal"),
    [("skip_dependents", True), (None, False), ("stop", False), ("continue", False)],
)
def test_step_skipped_needs_its_cause_to_have_failed_under_skip_dependents(
    on_error: str | None, legal: bool
) -> None:
    events = [ev("task_started"), *failing("P1", "a", on_error), skipped("P2", "P1")]
    _, found = fed(events, CHAIN)
    if legal:
        assert found == []
    else:
        assert found == ["step_skipped for P2: 'P1' neither failed to skip its dependents"]


def test_step_skipped_carries_down_the_graph_but_not_from_a_subtask_that_went_on() -> None:
    start = [ev("task_started"), *failing("P1", "a", "skip_dependents"), skipped("P2", "P1")]
    assert fed([*start, skipped("P3", "P2")], CHAIN)[1] == []
    # P2 completed (in a log without a plan, where nothing checks what P2 waited for).
    went_on = [ev("task_started"), *failing("P1", "a", "skip_dependents"), *completing("P2", "b")]
    assert fed([*went_on, skipped("P3", "P2")])[1] == [
        "step_skipped for P3: 'P2' neither failed to skip its dependents"
    ]


@pytest.mark.parametrize(
    ("needs", "legal"),
    [({"P1": (), "P2": ("P1",)}, True), ({"P1": (), "P2": ()}, False)],
)
def test_step_skipped_must_name_one_of_its_dependencies(
    needs: dict[str, tuple[str, ...]], legal: bool
) -> None:
    events = [ev("task_started"), *failing("P1", "a", "skip_dependents"), skipped("P2", "P1")]
    _, found = fed(events, needs)
    assert found == ([] if legal else ["step_skipped for P2 names 'P1', none of its dependencies"])


@pytest.mark.parametrize(("ran", "legal"), [("P3", True), ("P2", False)])
def test_step_skipped_for_a_subtask_that_ran_this_epoch_is_refused(ran: str, legal: bool) -> None:
    # No plan: nothing else about the order is in question. The one that ran is open.
    events = [ev("task_started"), call(ran, "b"), *failing("P1", "a", "skip_dependents")]
    _, found = fed([*events, skipped("P2", "P1")])
    assert found == ([] if legal else ["step_skipped for P2, which ran in this epoch"])


def test_a_subtask_skipped_in_an_earlier_epoch_may_be_skipped_again() -> None:
    epoch = [*failing("P1", "a", "skip_dependents"), skipped("P2", "P1")]
    events = [ev("task_started"), *epoch, blocker(), ev("blocker_resolved")]
    _, found = fed([*events, *failing("P1", "b", "skip_dependents"), skipped("P2", "P1")], PAIR)
    assert found == []


@pytest.mark.parametrize(
    "tail",
    [
        [call("P2", "b")],
        [call("P2", "b"), ev("subagent_succeeded", "P2", call_id="b")],
        completing("P2", "b"),
        failing("P2", "b"),
        [
            call("P2", "b"),
            ev("subagent_failed", "P2", call_id="b", kind="retryable"),
            ev("subagent_retried", "P2", call_id="b"),
        ],
        [ev("step_failed", "P2")],
        [skipped("P2", "P1")],
    ],
    ids=["invoked", "succeeded", "completed", "failed", "retried", "step_failed", "skipped"],
)
def test_every_step_event_after_a_step_skipped_is_refused(tail: list[Event]) -> None:
    start = [ev("task_started"), *failing("P1", "a", "skip_dependents")]
    # The twin: the same lines, but the subtask skipped is another one.
    assert fed([*start, skipped("P3", "P1"), *tail])[1] == []
    model = protocol.Model()
    for i, event in enumerate([*start, skipped("P2", "P1")]):
        assert model.feed(i, event) == []
    for i, event in enumerate(tail, start=len(start) + 1):
        found = [f.text for f in model.feed(i, event)]
        assert f"{event['event']} for P2 after its step_skipped" in found, (event, found)


@pytest.mark.parametrize("on_error", ["continue", "skip_dependents"])
def test_a_task_level_blocker_needs_a_failure_in_its_epoch(on_error: str) -> None:
    events = [ev("task_started"), *failing("P1", "a", on_error), blocker()]
    assert fed(events, ONE)[1] == []
    # Nothing failed: the same shape, with the call succeeding.
    _, found = fed([ev("task_started"), *completing("P1", "a"), blocker()], ONE)
    assert found == ["blocker_encountered for the task while no subtask failed"]


FAILED_P2 = [call("P2", "b"), ev("subagent_failed", "P2", call_id="b", kind="hard")]


@pytest.mark.parametrize(
    ("needs", "before", "ended"),
    [
        # P2 depends on P1, which failed under skip_dependents: it must be skipped first.
        (PAIR, [*failing("P1", "a", "skip_dependents")], [skipped("P2", "P1")]),
        # P2 depends on P1, which failed under continue: it must run first.
        (PAIR, [*failing("P1", "a", "continue")], completing("P2", "b")),
        # P2 failed and neither retried nor ended: it has not failed yet.
        (
            {"P1": (), "P2": ()},
            [*failing("P1", "a", "continue"), *FAILED_P2],
            [ev("step_failed", "P2", on_error="continue")],
        ),
    ],
    ids=["not-skipped", "dependent-not-run", "failure-not-ended"],
)
def test_a_task_level_blocker_waits_for_every_subtask_to_end(
    needs: dict[str, tuple[str, ...]], before: list[Event], ended: list[Event]
) -> None:
    start = [ev("task_started"), *before]
    assert fed([*start, *ended, blocker()], needs)[1] == []
    _, found = fed([*start, blocker()], needs)
    assert found == ["blocker_encountered for the task while P2 may still run"]


def test_a_task_level_blocker_after_a_skip_is_legal() -> None:
    events = [ev("task_started"), *failing("P1", "a", "skip_dependents"), skipped("P2", "P1")]
    model, found = fed([*events, skipped("P3", "P2"), blocker()], CHAIN)
    assert found == [] and model.blocker is not None


@pytest.mark.parametrize(("again", "legal"), [("failed", True), ("completed", False)])
def test_a_task_level_blocker_counts_only_its_own_epochs_failures(again: str, legal: bool) -> None:
    events = [ev("task_started"), *failing("P1", "a", "continue"), blocker()]
    events.append(ev("blocker_resolved"))
    events += failing("P1", "b", "continue") if again == "failed" else completing("P1", "b")
    _, found = fed([*events, blocker()], ONE)
    assert found == ([] if legal else ["blocker_encountered for the task while no subtask failed"])


@pytest.mark.parametrize(
    ("on_error", "legal"),
    [("continue", True), (None, False), ("stop", False), ("skip_dependents", False)],
)
def test_a_dependent_may_run_after_a_failure_under_continue_only(
    on_error: str | None, legal: bool
) -> None:
    _, found = fed([ev("task_started"), *failing("P1", "a", on_error), call("P2", "b")], CHAIN)
    assert found == ([] if legal else ["subagent_invoked for P2 before P1 completed"])


def test_a_dependent_waits_for_every_dependency_to_go_on() -> None:
    needs = {"P1": (), "P0": (), "P2": ("P0", "P1")}
    start = [ev("task_started"), *failing("P1", "a", "continue")]
    assert fed([*start, call("P2", "b")], needs)[1] == [
        "subagent_invoked for P2 before P0 completed"
    ]
    assert fed([*start, *completing("P0", "c"), call("P2", "b")], needs)[1] == []


def test_queries_and_status_of_failures_that_go_on_and_skips() -> None:
    needs = {**CHAIN, "P4": (), "P5": ("P4",)}
    events = [ev("task_started"), *failing("P1", "a", "skip_dependents", error="cannot do it")]
    events += [skipped("P2", "P1"), skipped("P3", "P2"), *failing("P4", "b", "continue")]
    events += completing("P5", "c")
    model, found = fed(events, needs)
    assert found == []
    words = {s: (model.status(s), model.reason(s)) for s in needs}
    assert words == {
        "P1": ("failed", "cannot do it"),
        "P2": ("skipped", "P1 failed"),
        "P3": ("skipped", "P2 skipped"),
        "P4": ("failed", "no"),
        "P5": ("done", None),
    }
    assert model.ended() == ["P1", "P2", "P3", "P4"]
    assert [s for s in needs if model.resolved(s)] == list(needs)
    assert [s for s in needs if model.skips_dependents(s)] == ["P1", "P2", "P3"]
    assert [s for s in needs if model.goes_on(s)] == ["P4", "P5"]
    assert [s for s in needs if model.stops(s)] == []
    # A task-level blocker blocks no subtask: each keeps its own word.
    model.feed(len(events), blocker(error="P1 failed: cannot do it"))
    assert {s: (model.status(s), model.reason(s)) for s in needs} == words


@pytest.mark.parametrize("on_error", [None, "stop"])
def test_a_failure_under_stop_stops_and_blocks_at_its_step(on_error: str | None) -> None:
    events = [ev("task_started"), *failing("P1", "a", on_error, error="cannot do it")]
    model, found = fed(events, CHAIN)
    assert found == [] and model.stops("P1") and not model.goes_on("P1")
    assert not model.skips_dependents("P1") and model.resolved("P1")
    assert (model.status("P1"), model.reason("P1")) == ("failed", "cannot do it")
    model.feed(len(events), blocker("P1", "cannot do it"))
    assert (model.status("P1"), model.reason("P1")) == ("blocked", "cannot do it")
    assert (model.status("P2"), model.reason("P2")) == ("pending", None)


def test_after_blocker_resolved_a_failed_or_skipped_subtask_runs_again() -> None:
    needs = {**CHAIN, "P4": ()}
    events = [ev("task_started"), *failing("P1", "a", "skip_dependents")]
    events += [skipped("P2", "P1"), skipped("P3", "P2"), *failing("P4", "b", "continue")]
    events += [blocker(), ev("blocker_resolved")]
    model, found = fed(events, needs)
    assert found == [] and model.epoch == 1 and model.blocker is None
    for s in needs:
        assert not model.resolved(s), s
        assert not (model.goes_on(s) or model.stops(s) or model.skips_dependents(s)), s
        assert model.step(s) is None
        assert (model.attempt(s).number, model.attempt(s).events) == (1, [])
    assert model.ended() == []
    # Each keeps its last word until it runs again.
    assert (model.status("P2"), model.reason("P2")) == ("skipped", "P1 failed")
    assert model.status("P4") == "failed"
    # The dependents wait for their dependency again, which may now complete.
    assert [f.text for f in model.feed(len(events), call("P2", "x"))] == [
        "subagent_invoked for P2 before P1 completed"
    ]
    _, found = fed([*events, *completing("P1", "c"), *completing("P2", "d")], needs)
    assert found == []
    # And a blocker for the task wants a failure of the new epoch.
    _, found = fed([*events, *completing("P1", "c"), blocker()], needs)
    assert found == ["blocker_encountered for the task while no subtask failed"]


def round_of(step: str, call_id: str, n: int, files: list[Any], attempt: int = 1) -> list[Event]:
    """A loop round that committed `files` and goes on."""
    commit = f"c{n}"
    return [
        call(step, call_id, attempt),
        ev("subagent_succeeded", step, call_id=call_id),
        ev("subagent_diffs_applied", step, call_id=call_id, commit=commit, files=files),
        ev("loop_continued", step, call_id=call_id, commit=commit, round=n),
    ]


@pytest.mark.parametrize(("round_", "legal"), [(2, True), (1, False), (3, False)])
def test_a_resumed_loop_goes_on_at_its_round_with_what_it_made(round_: int, legal: bool) -> None:
    events = [ev("task_started"), *round_of("L1", "a", 1, ["src/a.py", "src/b.py"])]
    round_2 = failing("L1", "b")
    round_2[0]["details"]["attempt"] = 2
    events += [*round_2, blocker("L1"), ev("blocker_resolved", "L1")]
    model, found = fed(events, {"L1": ()})
    assert found == [] and model.epoch == 1
    # The next round is 2, with round 1's files its own, before and after its first event.
    assert model.rounds("L1") == 2 and model.made("L1") == {"src/a.py", "src/b.py"}
    model.feed(len(events), call("L1", "c"))
    assert model.rounds("L1") == 2 and model.made("L1") == {"src/a.py", "src/b.py"}
    _, found = fed([*events, *round_of("L1", "c", round_, [7, "src/c.py"])], {"L1": ()})
    assert found == ([] if legal else [f"loop_continued names round {round_}, not 2"])
    if legal:  # a recorded name that is not a string is never taken for a path
        model, _ = fed([*events, *round_of("L1", "c", 2, [7, "src/c.py"])], {"L1": ()})
        assert model.rounds("L1") == 3 and model.made("L1") == {"src/a.py", "src/b.py", "src/c.py"}


# -- every log a run with on_error modes and several slots writes is legal ---------------------

Drawn = tuple[list[dict[str, Any]], dict[str, list[str]], int]


@st.composite
def plans_with_modes(draw: st.DrawFn) -> Drawn:
    """As plans(), each subtask with an on_error of its own, and the slots to run with."""
    subtasks, answers = drawn_plan(draw, modes=True, failures=2)
    return subtasks, answers, draw(st.integers(1, 3))


def end(model: protocol.Model, sid: str) -> str:
    """How the subtask stands in the model's epoch: done (in any epoch), failed, blocked,
    skipped, pending (not seen this epoch), or running (seen, not ended)."""
    if sid in model.done:
        return "done"
    mine = model.step(sid)
    if mine is None:
        return "pending"
    if mine.skipped is not None:
        return "skipped"
    if mine.failed is not None:
        return "blocked" if model.status(sid) == "blocked" else "failed"
    return "running"


def check_halt(model: protocol.Model, block: Event, subtasks: list[dict[str, Any]]) -> None:
    """At a blocker, each subtask ended as its on_error and its dependencies' say."""
    ids = [s["id"] for s in subtasks]
    mode = {s["id"]: s["on_error"] for s in subtasks}
    deps = {s["id"]: s["depends_on"] for s in subtasks}
    ends = {sid: end(model, sid) for sid in ids}
    assert "running" not in ends.values(), ends  # nothing is left in flight at a halt

    def failed(d: str) -> bool:
        return ends[d] in ("failed", "blocked")

    def went_on(d: str) -> bool:
        return ends[d] == "done" or (failed(d) and mode[d] == protocol.CONTINUE)

    def skips(d: str) -> bool:
        return ends[d] == "skipped" or (failed(d) and mode[d] == protocol.SKIP_DEPENDENTS)

    stopped = [sid for sid in ids if failed(sid) and mode[sid] == "stop"]
    if block.get("step") is None:  # the task's end: everything ran that could
        assert not stopped and "pending" not in ends.values(), ends
        assert {"failed", "skipped"} & set(ends.values()), ends
    else:  # the first failure under stop, in plan order
        assert stopped and block["step"] == stopped[0], (block, ends)
    assert [sid for sid in ids if ends[sid] == "blocked"] == stopped[:1], ends
    for sid in ids:
        word = (model.status(sid), model.reason(sid))
        if ends[sid] == "done":
            # nothing is done whose dependency failed under stop or skip_dependents
            assert all(ends[d] == "done" for d in deps[sid] if mode[d] != protocol.CONTINUE)
            assert word == ("done", None)
        elif ends[sid] in ("failed", "blocked"):
            assert all(went_on(d) for d in deps[sid]), (sid, ends)
            assert word[0] == ends[sid] and word[1], word
        elif ends[sid] == "skipped":
            mine = model.step(sid)
            assert mine is not None and mine.skipped is not None
            cause = mine.skipped["details"]["cause"]
            assert cause in deps[sid] and skips(cause), (sid, cause, ends)
            assert word == (
                "skipped",
                f"{cause} {'skipped' if ends[cause] == 'skipped' else 'failed'}",
            )
        else:  # pending: it keeps the word of an earlier epoch, if any
            assert word[0] in ("pending", "failed", "skipped"), word
        # a dependent of a skip (or of a failure under skip_dependents) is skipped, and only it
        assert (ends[sid] == "skipped") == any(skips(d) for d in deps[sid]), (sid, ends)


def logged(root: Path) -> list[Event]:
    return [orjson.loads(line) for line in Layout(root).log("demo").read_bytes().splitlines()]


@settings(FAST, max_examples=10)
@given(plans_with_modes())
def test_every_log_a_run_with_on_error_modes_and_slots_writes_is_legal_and_no_change_is(
    tmp_path: Path, drawn: Drawn
) -> None:
    subtasks, answers, slots = drawn
    root = repository(tmp_path, subtasks)
    worker = Scripted(answers)
    done = run(root, worker, resumes=20, slots=slots)
    worker.assert_used()
    needs = {s["id"]: tuple(s["depends_on"]) for s in subtasks}
    assert sorted(done) == sorted(needs)
    events = logged(root)
    assert events[-1]["event"] == "task_completed"
    model = protocol.Model(needs)
    for i, event in enumerate(events):
        assert [f.text for f in model.feed(i, event)] == [], (i, event)
        if event["event"] == "blocker_encountered":
            check_halt(model, event, subtasks)
    assert all(model.status(sid) == "done" for sid in needs)
    for what, changed in mutations(events):
        assert fed(changed, needs)[1], f"{what} went unnoticed"


BOTH = {"T1": (), "T2": ()}
CALLS = [ev("task_started"), call("T1", "a"), call("T2", "b")]
FAILED = [ev("subagent_failed", t, call_id=c, kind="hard") for t, c in (("T1", "a"), ("T2", "b"))]


@pytest.mark.parametrize(
    ("needs", "full", "cut"),
    [
        pytest.param(
            BOTH,
            [
                *CALLS,
                FAILED[0],
                ev("step_failed", "T1"),
                FAILED[1],
                ev("step_failed", "T2"),
                blocker("T1"),
            ],
            6,
            id="second-stop-failure-taken-out",
        ),
        pytest.param(
            BOTH,
            [
                *CALLS,
                FAILED[0],
                ev("step_failed", "T1", on_error="continue"),
                FAILED[1],
                ev("step_failed", "T2"),
                blocker("T2"),
            ],
            4,
            id="continue-failure-taken-out",
        ),
        pytest.param(
            {"T1": (), "T2": ("T1",), "T3": ()},
            [
                ev("task_started"),
                *failing("T1", "a", "skip_dependents"),
                skipped("T2", "T1"),
                *failing("T3", "c"),
                blocker("T3"),
            ],
            4,
            id="skip-taken-out",
        ),
    ],
)
def test_a_blocker_at_a_step_while_another_subtask_has_not_ended_is_refused(
    needs: dict[str, tuple[str, ...]], full: list[Event], cut: int
) -> None:
    assert fed(full, needs)[1] == []  # what the orchestrator writes (the property test's)
    assert full[cut]["event"] in ("step_failed", "step_skipped")
    assert fed(full[:cut] + full[cut + 1 :], needs)[1]


@settings(FAST, max_examples=4)
@given(plans_with_modes())
def test_the_same_plan_and_answers_with_three_slots_log_the_same_bytes(
    tmp_path: Path, drawn: Drawn
) -> None:
    subtasks, answers, _ = drawn
    ids = [s["id"] for s in subtasks]
    logs = []
    # Calls end first-to-last in one run and last-to-first in the other.
    for name, delays in (
        ("forwards", {sid: 0.01 * i for i, sid in enumerate(ids)}),
        ("backwards", {sid: 0.01 * i for i, sid in enumerate(reversed(ids))}),
    ):
        root = repository(tmp_path / name, subtasks)
        worker = Scripted(answers, delays)
        run(root, worker, resumes=20, slots=3)
        worker.assert_used()
        logs.append(Layout(root).log("demo").read_bytes())
    assert logs[0] == logs[1]


# -- nested plans: a plan_started opens a unit, its step_completed or step_failed ends it -----

UNIT: Needs = {"U": ()}
AFTER_P1: Needs = {"P1": (), "U": ("P1",)}


def started(step: str, plan: str = "child") -> Event:
    return ev("plan_started", step, plan=plan, base="b0")


def unit_done(step: str, plan: str = "child") -> Event:
    return ev("step_completed", step, plan=plan, log_head="h1", commit="c1")


def unit_failed(step: str, plan: str = "child", on_error: str | None = None) -> Event:
    """How the orchestrator logs a nested plan that halted (nesting.run's error)."""
    failed = ev("step_failed", step, phase="plan", plan=plan, log_head="h1", commit="c1")
    if on_error is not None:
        failed["details"]["on_error"] = on_error
    failed["error"] = f"task {plan}: halted"
    return failed


def test_a_unit_run_to_its_end_is_legal_and_its_subtask_done_with_no_call() -> None:
    events = [ev("task_started"), started("U"), unit_done("U")]
    model, found = fed([*events, ev("task_completed")], UNIT)
    assert found == []
    assert model.status("U") == "done" and model.done["U"] == protocol.Completed(None, "c1", 2)
    (att,) = model.attempts("U")
    assert att.unit is events[1] and att.call_id is None and att.outcome() == ("completed", None)
    assert model.summary("U")["call_id"] is None


def test_a_unit_in_progress_is_running() -> None:
    model, found = fed([ev("task_started"), started("U")], UNIT)
    assert found == [] and model.status("U") == "running"
    assert model.attempt("U").outcome() == ("in progress", None)
    assert model.unanswered() == []  # no call was made: none awaits its outcome
    assert model.unsettled() == "the plan U runs has not ended"


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        ([started("U"), unit_done("U", "other")], "names a plan its plan_started does not"),
        (
            [started("U"), ev("step_completed", "U", log_head="h1", commit="c1")],
            "names a plan its plan_started does not",
        ),
        ([unit_done("U")], "names a plan its plan_started does not"),
        ([started("U"), unit_failed("U", "other")], "names a plan its plan_started does not"),
        ([unit_failed("U")], "names a plan its plan_started does not"),
    ],
    ids=["other-plan", "no-plan", "never-started", "failed-other-plan", "failed-never-started"],
)
def test_an_end_naming_another_plan_than_its_plan_started_is_refused(
    tail: list[Event], reason: str
) -> None:
    _, found = fed([ev("task_started"), *tail], UNIT)
    name = tail[-1]["event"]
    assert found == [f"{name} for U {reason}"]


def test_plan_started_twice_in_one_attempt_is_refused() -> None:
    start = [ev("task_started"), started("U")]
    assert fed([*start, started("U")], UNIT)[1] == [
        "plan_started for U in an attempt that began already"
    ]
    # Nor after a call in the same attempt.
    called = [ev("task_started"), call("U", "a"), ev("subagent_succeeded", "U", call_id="a")]
    assert fed([*called, started("U")], UNIT)[1] == [
        "plan_started for U in an attempt that began already"
    ]


def test_plan_started_names_its_plan() -> None:
    _, found = fed([ev("task_started"), ev("plan_started", "U", base="b0")], UNIT)
    assert found == ["plan_started names no details.plan"]


def test_a_call_inside_a_unit_is_refused() -> None:
    _, found = fed([ev("task_started"), started("U"), call("U", "a")], UNIT)
    assert found == ["subagent_invoked for U, which runs a plan"]


def test_plan_started_waits_for_its_dependencies() -> None:
    _, found = fed([ev("task_started"), call("P1", "a"), started("U")], AFTER_P1)
    assert found == ["plan_started for U before P1 completed"]
    assert fed([ev("task_started"), *completing("P1", "a"), started("U")], AFTER_P1)[1] == []
    # A dependency that failed under continue lets it run; under stop it does not.
    went_on = [ev("task_started"), *failing("P1", "a", "continue"), started("U")]
    assert fed(went_on, AFTER_P1)[1] == []
    stopped = [ev("task_started"), *failing("P1", "a"), started("U")]
    assert fed(stopped, AFTER_P1)[1] == ["plan_started for U before P1 completed"]


def test_a_unit_depended_on_lets_its_dependent_run_once_done() -> None:
    needs = {"U": (), "P2": ("U",)}
    start = [ev("task_started"), started("U")]
    assert fed([*start, call("P2", "a")], needs)[1] == [
        "subagent_invoked for P2 before U completed"
    ]
    assert fed([*start, unit_done("U"), *completing("P2", "a")], needs)[1] == []


@pytest.mark.parametrize(
    ("needs", "before", "block", "reason"),
    [
        (UNIT, [], blocker("U"), "blocker_encountered for U without its step_failed"),
        (
            {"P1": (), "U": ()},
            failing("P1", "a", "continue"),
            blocker(),
            "blocker_encountered for the task while U may still run",
        ),
        (
            None,  # no plan: what is unsettled names it
            failing("P1", "a", "continue"),
            blocker(),
            "blocker_encountered while the plan U runs has not ended",
        ),
    ],
    ids=["at-its-step", "for-the-task", "for-the-task-no-plan"],
)
def test_a_blocker_while_a_unit_runs_is_refused(
    needs: Needs | None, before: list[Event], block: Event, reason: str
) -> None:
    start = [ev("task_started"), *before, started("U")]
    assert fed([*start, block], needs)[1] == [reason]
    # The twin: the unit failed first (under continue, for a blocker of the task).
    ended = unit_failed("U", on_error=None if block.get("step") else "continue")
    assert fed([*start, ended, block], needs)[1] == []


@pytest.mark.parametrize("needs", [{"U": (), "P2": ()}, None], ids=["plan", "no-plan"])
def test_a_budget_blocker_while_a_unit_runs_is_refused(needs: Needs | None) -> None:
    budget = ev("blocker_encountered", budget="max_steps", limit=2, used=2)
    budget["error"] = "budget max_steps (task): 2 of 2 worker calls used"
    start = [ev("task_started"), started("U")]
    # The twin: the unit ended, then P2's call found the budget spent.
    assert fed([*start, unit_done("U"), budget], needs)[1] == []
    # As a call with no outcome is (test_illegal_orders_are_named's kin), a unit with no
    # end is something a run out of budget takes first.
    called = [ev("task_started"), call("P2", "a"), budget]
    assert fed(called, needs)[1] == ["blocker_encountered for a budget while P2 awaits its call"]
    assert fed([*start, budget], needs)[1] != []


def test_a_unit_that_failed_runs_again_after_its_blocker_is_resolved() -> None:
    first = [ev("task_started"), started("U"), unit_failed("U"), blocker("U", "task child: no")]
    second = [ev("blocker_resolved", "U"), started("U"), unit_done("U"), ev("task_completed")]
    model, found = fed([*first, *second], UNIT)
    assert found == []
    assert model.status("U") == "done" and model.epoch == 1
    one, two = model.attempts("U")
    assert (one.epoch, one.outcome()) == (0, ("failed (step_failed)", "task child: halted"))
    assert (two.epoch, two.outcome()) == (1, ("completed", None))
    # Without the blocker_resolved, the second start is in the blocked epoch.
    _, found = fed([*first, started("U")], UNIT)
    assert "plan_started while the task is blocked (seq 3)" in found
    assert "plan_started for U after its step_failed (seq 2)" in found


@pytest.mark.parametrize(
    ("needs", "events"),
    [
        (
            AFTER_P1,
            [
                ev("task_started"),
                *completing("P1", "a"),
                started("U"),
                unit_done("U"),
                ev("task_completed"),
            ],
        ),
        (
            UNIT,
            [
                ev("task_started"),
                started("U"),
                unit_failed("U"),
                blocker("U"),
                ev("blocker_resolved", "U"),
                started("U"),
                unit_done("U"),
                ev("task_completed"),
            ],
        ),
    ],
    ids=["after-a-call", "failed-then-resumed"],
)
def test_a_log_with_units_is_legal_and_no_single_change_to_it_is(
    needs: Needs, events: list[Event]
) -> None:
    assert fed(events, needs)[1] == []
    for what, changed in mutations(events):
        assert fed(changed, needs)[1], f"{what} went unnoticed"


@pytest.mark.parametrize(
    ("unverified", "commit", "shown"),
    [
        (5, 7, ([], None)),
        ([1, None, "docs name it"], ["c"], (["docs name it"], None)),
        ({"a": 1}, "c1", ([], "c1")),
        (["docs name it"], "c1", (["docs name it"], "c1")),  # the twin, as harness writes it
    ],
)
def test_a_summary_holds_only_the_text_harness_writes(
    unverified: object, commit: object, shown: tuple[list[str], str | None]
) -> None:
    """`harness status` prints these as text: a forged log's 5 or [1] crashed it."""
    events = [ev("task_started"), call("T1", "a"), ev("subagent_succeeded", "T1", call_id="a")]
    events += [ev("subagent_diffs_applied", "T1", call_id="a", commit=commit)]
    events += [ev("phase_completed", "T1", phase="acceptance", unverified=unverified)]
    model, _ = fed(events)
    summary = model.summary("T1")
    assert (summary["unverified"], summary["commit"]) == shown
    assert summary["call_id"] == "a"
