"""The protocol model's rules for supervised subtasks and loops: who may ask a verdict and
when, who may give one and on what, what a verdict lets follow, and a loop's rounds. Each
illegal order is named by exactly its finding, and a legal twin of the same shape by none."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.record import protocol

from .builders import FAST
from .test_protocol import blocker, call, ev, fed

Event = dict[str, Any]

BASE = "0123456789abcdef0123456789abcdef01234567"
TREE = "fedcba9876543210fedcba9876543210fedcba98"
ADA = "Ada Reviewer <ada@example.org>"
ONE = {"T1": ()}


def worked(step: str = "T1", call_id: str = "a", attempt: int = 1) -> list[Event]:
    """A call that succeeded and passed its check: a change ready for a verdict."""
    return [
        call(step, call_id, attempt),
        ev("subagent_succeeded", step, call_id=call_id),
        ev("build_succeeded", step, check="build"),
    ]


START = [ev("task_started"), *worked()]  # the worker's call a is seq 1


def asked(call_id: str = "s", of: str = "a", tree: str | None = TREE, step: str = "T1") -> Event:
    """The supervisor's call on call `of`'s change, as Subtask.ask logs it."""
    return ev(
        "supervisor_invoked",
        step,
        call_id=call_id,
        subagent="auditor",
        of=of,
        base=BASE,
        tree=tree,
    )


def requested(of: str = "a", tree: str | None = TREE, step: str = "T1") -> Event:
    """A person's verdict asked on call `of`'s change, as Subtask.supervise logs it."""
    return ev("approval_requested", step, call_id=of, base=BASE, tree=tree)


def said(name: str, call_id: str = "s", step: str = "T1") -> Event:
    """The supervisor's verdict, as log_verdict logs it."""
    return ev(name, step, call_id=call_id, by="auditor", reason="because")


def person(name: str, call_id: str = "a", who: str | None = ADA, step: str = "T1") -> Event:
    """A person's verdict, as decide logs it (`who` None: left out)."""
    details: dict[str, Any] = {"call_id": call_id, "by": protocol.HUMAN, "reason": "because"}
    if who is not None:
        details["who"] = who
    return ev(name, step, **details)


def sup_failed(call_id: str = "s", kind: str = "timeout", step: str = "T1") -> Event:
    return ev("supervisor_failed", step, call_id=call_id, by="auditor", kind=kind)


def applied(call_id: str = "a", commit: str = "c1", step: str = "T1") -> Event:
    return ev("subagent_diffs_applied", step, call_id=call_id, commit=commit)


def completed(call_id: str = "a", commit: str | None = "c1", step: str = "T1") -> Event:
    return ev("step_completed", step, call_id=call_id, commit=commit)


def retried(call_id: str = "a", after: str = "step_reoriented", step: str = "T1") -> Event:
    return ev("subagent_retried", step, call_id=call_id, after=after)


def fallback(call_id: str = "a", step: str = "T1") -> Event:
    return ev("subagent_fallback", step, call_id=call_id)


def step_failed(on_error: str | None = None, step: str = "T1") -> Event:
    failed = ev("step_failed", step, phase="supervisor")
    if on_error is not None:
        failed["details"]["on_error"] = on_error
    failed["error"] = "paused by auditor: because"
    return failed


def continued(rnd: int, call_id: str = "a", commit: str | None = "c1", step: str = "T1") -> Event:
    return ev("loop_continued", step, round=rnd, call_id=call_id, commit=commit, why="changed")


def findings(events: list[Event], needs: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    return fed(events, needs)[1]


# A change rejected (by the supervisor, or a person), retried, and called again: attempt 2
# succeeded, ready for its own ask.
REASKED = [*START, asked(), said("step_reoriented"), retried(), *worked(call_id="b", attempt=2)]
REREQUESTED = [
    *START,
    requested(),
    person("step_reoriented"),
    retried(),
    *worked(call_id="b", attempt=2),
]

# A loop's round 1 went on; round 2's change is applied.
ROUND_2 = [*START, applied(), continued(1), *worked("T1", "b", 2), applied("b", "c2")]

CASES = [
    # -- supervisor_invoked ---------------------------------------------------------------
    pytest.param(
        [ev("task_started"), call("T1", "a"), asked()],
        ["supervisor_invoked before a subagent_succeeded in attempt 1"],
        [ev("task_started"), call("T1", "a"), ev("subagent_succeeded", "T1", call_id="a"), asked()],
        id="invoked-before-success",
    ),
    pytest.param(
        [*START[:3], ev("build_failed", "T1", check="build"), asked()],
        ["supervisor_invoked after build_failed in the same attempt"],
        [*START[:3], ev("build_succeeded", "T1", check="build"), asked()],
        id="invoked-after-check-failure",
    ),
    pytest.param(
        [*START, asked("s"), asked("s2")],
        ["supervisor_invoked in attempt 1, which asked a verdict already"],
        [*REASKED, asked("s2", of="b")],
        id="invoked-twice",
    ),
    pytest.param(
        [*START, applied(), asked()],
        ["supervisor_invoked after the attempt's change was committed"],
        [*START, asked(), said("step_approved"), applied()],
        id="invoked-after-applied",
    ),
    pytest.param(
        [*START, ev("supervisor_invoked", "T1", of="a", base=BASE, tree=TREE)],
        ["supervisor_invoked names no details.call_id"],
        [*START, asked()],
        id="invoked-without-call-id",
    ),
    pytest.param(
        [*START, asked("a")],
        ["call a was invoked before (seq 1)"],
        [*START, asked("s")],
        id="invoked-reusing-the-workers-call-id",
    ),
    pytest.param(
        [*REASKED, asked("s", of="b")],
        ["call s was invoked before (seq 4)"],
        [*REASKED, asked("s2", of="b")],
        id="invoked-reusing-an-earlier-supervisor-call-id",
    ),
    # -- approval_requested ---------------------------------------------------------------
    pytest.param(
        [*START, requested(), requested()],
        ["approval_requested in attempt 1, which asked a verdict already"],
        [*REREQUESTED, requested("b")],
        id="requested-twice",
    ),
    pytest.param(
        [*START, requested(), asked()],
        ["supervisor_invoked in attempt 1, which asked a verdict already"],
        [*REREQUESTED, asked("s", of="b")],
        id="requested-then-invoked",
    ),
    pytest.param(
        [*START, applied(), requested()],
        ["approval_requested after the attempt's change was committed"],
        [*START, requested(), person("step_approved"), applied()],
        id="requested-after-applied",
    ),
    # -- verdicts -------------------------------------------------------------------------
    *(
        pytest.param(
            [*START, said(name)],
            [f"{name} for call s, which awaits no verdict"],
            [*START, asked(), said(name)],
            id=f"{name}-with-no-request",
        )
        for name in protocol.VERDICTS
    ),
    pytest.param(
        [*START, asked(), said("step_approved"), said("step_approved")],
        ["step_approved after step_approved in attempt 1"],
        [*START, asked(), said("step_approved")],
        id="second-verdict",
    ),
    pytest.param(
        [*START, asked(), said("step_reoriented"), said("step_approved")],
        ["step_approved after step_reoriented in attempt 1"],
        [*START, asked(), said("step_reoriented")],
        id="approved-after-reoriented",
    ),
    pytest.param(
        [*START, requested(), person("step_approved"), person("step_reoriented")],
        ["step_reoriented after step_approved in attempt 1"],
        [*START, requested(), person("step_approved")],
        id="second-verdict-by-a-person",
    ),
    pytest.param(
        [*START, asked("s"), said("step_approved", "x")],
        ["step_approved for call x, which awaits no verdict"],
        [*START, asked("s"), said("step_approved", "s")],
        id="agent-verdict-naming-another-call",
    ),
    pytest.param(
        [*START, asked("s"), said("step_approved", "a")],
        ["step_approved for call a, which awaits no verdict"],
        [*START, asked("s"), said("step_approved", "s")],
        id="agent-verdict-naming-the-workers-call",
    ),
    pytest.param(
        [*START, requested(), said("step_approved", "a")],
        ["step_approved for call a, which awaits no verdict"],
        [*START, requested(), person("step_approved", "a")],
        id="agent-verdict-on-a-request-to-a-person",
    ),
    pytest.param(
        [*START, person("step_approved")],
        ["step_approved by a person for T1, which awaits no approval"],
        [*START, requested(), person("step_approved")],
        id="person-verdict-without-request",
    ),
    pytest.param(
        [*START, asked(), person("step_reoriented")],
        ["step_reoriented by a person for T1, which awaits no approval"],
        [*START, requested(), person("step_reoriented")],
        id="person-verdict-on-the-supervisors-call",
    ),
    pytest.param(
        [*START, requested(), person("step_paused")],
        ["step_paused by a person: a person approves or rejects"],
        [*START, requested(), person("step_reoriented")],
        id="person-pauses",
    ),
    pytest.param(
        [*START, requested(), person("step_approved", who=None)],
        ["step_approved by a person names nobody (details.who)"],
        [*START, requested(), person("step_approved")],
        id="person-verdict-without-who",
    ),
    pytest.param(
        [*START, requested(), person("step_reoriented", who="")],
        ["step_reoriented by a person names nobody (details.who)"],
        [*START, requested(), person("step_reoriented")],
        id="person-verdict-with-empty-who",
    ),
    # -- what a verdict lets follow -------------------------------------------------------
    pytest.param(
        [*START, asked(), applied()],
        ["subagent_diffs_applied before step_approved in attempt 1, which asked a verdict"],
        [*START, asked(), said("step_approved"), applied()],
        id="applied-before-approved",
    ),
    pytest.param(
        [*START, requested(), applied()],
        ["subagent_diffs_applied before step_approved in attempt 1, which asked a verdict"],
        [*START, requested(), person("step_approved"), applied()],
        id="applied-before-a-person-approved",
    ),
    pytest.param(
        [*START, asked(), completed(commit=None)],
        ["step_completed before step_approved in attempt 1, which asked a verdict"],
        [*START, asked(), said("step_approved"), completed(commit=None)],
        id="completed-before-approved",
    ),
    pytest.param(
        [*START, requested(tree=None), completed(commit=None)],
        ["step_completed before step_approved in attempt 1, which asked a verdict"],
        [*START, requested(tree=None), person("step_approved"), completed(commit=None)],
        id="completed-before-a-person-approved",
    ),
    pytest.param(
        [*START, asked(), applied(), completed()],
        [
            "subagent_diffs_applied before step_approved in attempt 1, which asked a verdict",
            "step_completed before step_approved in attempt 1, which asked a verdict",
        ],
        [*START, asked(), said("step_approved"), applied(), completed()],
        id="applied-and-completed-before-approved",
    ),
    pytest.param(
        [*START, asked(), said("step_reoriented"), applied()],
        ["subagent_diffs_applied after step_reoriented in the same attempt"],
        [*START, asked(), said("step_approved"), applied()],
        id="applied-after-reoriented",
    ),
    pytest.param(
        [*START, asked(), said("step_reoriented"), completed(commit=None)],
        ["step_completed after step_reoriented in the same attempt"],
        [*START, asked(), said("step_approved"), completed(commit=None)],
        id="completed-after-reoriented",
    ),
    pytest.param(
        [*START, requested(), person("step_reoriented"), applied()],
        ["subagent_diffs_applied after step_reoriented in the same attempt"],
        [*START, requested(), person("step_approved"), applied()],
        id="applied-after-a-person-rejected",
    ),
    pytest.param(
        [*START, asked(), said("step_paused"), applied()],
        ["subagent_diffs_applied after step_paused in the same attempt"],
        [*START, asked(), said("step_approved"), applied()],
        id="applied-after-paused",
    ),
    # -- retries, fallbacks and ends after a verdict --------------------------------------
    pytest.param(
        [*START, asked(), said("step_approved"), retried(after="step_approved")],
        ["subagent_retried after step_approved, not a retryable failure"],
        [*START, asked(), said("step_reoriented"), retried()],
        id="retried-after-approved",
    ),
    pytest.param(
        [*START, asked(), said("step_paused"), retried(after="step_paused")],
        ["subagent_retried after step_paused, not a retryable failure"],
        [*START, asked(), said("step_reoriented"), retried()],
        id="retried-after-paused",
    ),
    pytest.param(
        [*REASKED, asked("s2", of="b"), said("step_reoriented", "s2"), retried("b")],
        [
            "a second subagent_retried for one agent since the last blocker_resolved "
            "(attempt 2 is its last)"
        ],
        [*REASKED, asked("s2", of="b"), said("step_reoriented", "s2"), step_failed()],
        id="retried-after-a-second-reorient",
    ),
    pytest.param(
        [*START, asked(), said("step_paused"), fallback()],
        ["subagent_fallback after step_paused, which stops the task for a person"],
        [*START, asked(), sup_failed(kind=protocol.NO_VERDICT), fallback()],
        id="fallback-after-paused",
    ),
    pytest.param(
        [*START, asked(), said("step_reoriented"), fallback()],
        ["subagent_fallback after step_reoriented, which had a retry left"],
        [*REASKED, asked("s2", of="b"), said("step_reoriented", "s2"), fallback("b")],
        id="fallback-after-reoriented-with-a-retry-left",
    ),
    *(
        pytest.param(
            [*START, asked(), said("step_paused"), step_failed(on_error)],
            [f"step_failed for T1 under on_error {on_error} after step_paused"],
            [*START, asked(), said("step_paused"), step_failed()],
            id=f"paused-then-failed-under-{on_error}",
        )
        for on_error in (protocol.CONTINUE, protocol.SKIP_DEPENDENTS)
    ),
    # -- supervisor_failed ----------------------------------------------------------------
    pytest.param(
        [*START, sup_failed()],
        ["supervisor_failed for call s, which awaits no verdict"],
        [*START, asked(), sup_failed()],
        id="supervisor-failed-with-no-call",
    ),
    pytest.param(
        [*START, asked(), sup_failed("x")],
        ["supervisor_failed for call x, which awaits no verdict"],
        [*START, asked(), sup_failed("s")],
        id="supervisor-failed-naming-another-call",
    ),
    pytest.param(
        [*START, asked(), said("step_approved"), sup_failed()],
        ["supervisor_failed for call s, which awaits no verdict"],
        [*START, asked(), said("step_approved")],
        id="supervisor-failed-after-its-verdict",
    ),
    pytest.param(
        [*START, asked(), sup_failed(), sup_failed()],
        ["supervisor_failed for call s, which awaits no verdict"],
        [*START, asked(), sup_failed(), retried(after="supervisor_failed")],
        id="supervisor-failed-twice",
    ),
    pytest.param(
        [*START, asked(), sup_failed(), said("step_approved")],
        ["step_approved for call s, which awaits no verdict"],
        [*START, asked(), said("step_approved")],
        id="verdict-after-supervisor-failed",
    ),
    # -- loop_continued -------------------------------------------------------------------
    pytest.param(
        [*START, applied(), continued(2)],
        ["loop_continued names round 2, not 1"],
        [*START, applied(), continued(1)],
        id="round-1-named-2",
    ),
    pytest.param(
        [*ROUND_2, continued(1, "b", "c2")],
        ["loop_continued names round 1, not 2"],
        [*ROUND_2, continued(2, "b", "c2")],
        id="round-2-named-1",
    ),
    pytest.param(
        [*START, applied(), continued(1, "x")],
        ["loop_continued names call x and commit c1, not the round's"],
        [*START, applied(), continued(1, "a")],
        id="round-naming-another-call",
    ),
    pytest.param(
        [*START, applied(), continued(1, "a", "c9")],
        ["loop_continued names call a and commit c9, not the round's"],
        [*START, applied(), continued(1, "a", "c1")],
        id="round-naming-another-commit",
    ),
    pytest.param(
        [*START, continued(1, "a", "c1")],
        ["loop_continued names call a and commit c1, not the round's"],
        [*START, continued(1, "a", None)],
        id="round-naming-a-commit-never-applied",
    ),
    pytest.param(
        [ev("task_started"), call("T1", "a"), continued(1, "a", None)],
        ["loop_continued before a subagent_succeeded in attempt 1"],
        [ev("task_started"), call("T1", "a"), START[2], continued(1, "a", None)],
        id="round-before-success",
    ),
    pytest.param(
        [*START, asked(tree=None), continued(1, "a", None)],
        ["loop_continued before step_approved in attempt 1, which asked a verdict"],
        [*START, asked(tree=None), said("step_approved"), continued(1, "a", None)],
        id="round-before-approved",
    ),
    pytest.param(
        [*START, asked(), said("step_reoriented"), continued(1, "a", None)],
        ["loop_continued after step_reoriented in the same attempt"],
        [*START, asked(), said("step_approved"), continued(1, "a", None)],
        id="round-after-reoriented",
    ),
]


@pytest.mark.parametrize(("illegal", "expected", "legal"), CASES)
def test_an_illegal_order_is_named_and_its_legal_twin_is_not(
    illegal: list[Event], expected: list[str], legal: list[Event]
) -> None:
    assert findings(legal) == []
    assert findings(illegal) == expected


# -- the paths the orchestrator takes ---------------------------------------------------------


@pytest.mark.parametrize(
    ("ask", "reorient", "reask", "approve"),
    [
        (
            asked(),
            said("step_reoriented"),
            asked("s2", of="b"),
            said("step_approved", "s2"),
        ),
        (
            requested(),
            person("step_reoriented"),
            requested("b"),
            person("step_approved", "b"),
        ),
    ],
    ids=["supervisor", "person"],
)
def test_the_correction_path_is_legal(
    ask: Event, reorient: Event, reask: Event, approve: Event
) -> None:
    """reoriented -> retried -> a new call and ask -> approved -> applied -> completed."""
    events = [*START, ask, reorient, retried(), *worked("T1", "b", 2), reask, approve]
    events += [applied("b", "c2"), completed("b", "c2"), ev("task_completed")]
    model, found = fed(events, ONE)
    assert found == []
    assert model.status("T1") == "done" and model.done["T1"] == protocol.Completed("b", "c2", 13)
    first, second = model.attempts("T1")
    assert first.verdict is reorient and first.outcome() == (
        "failed (step_reoriented)",
        None,
    )
    assert second.verdict is approve and second.outcome() == ("completed", None)
    assert second.asked is reask and second.judged == TREE


def test_a_step_reoriented_is_retryable_and_a_pause_is_not() -> None:
    assert protocol.retryable(said("step_reoriented"))
    assert protocol.retryable(person("step_reoriented"))
    assert not protocol.retryable(said("step_paused"))
    assert not protocol.retryable(said("step_approved"))
    assert protocol.retryable(sup_failed(kind="timeout"))
    assert protocol.retryable(sup_failed(kind="retryable"))
    assert not protocol.retryable(sup_failed(kind=protocol.NO_VERDICT))


def test_a_pause_fails_the_step_under_stop_and_blocks_it() -> None:
    events = [*START, asked(), said("step_paused"), step_failed(), blocker("T1")]
    model, found = fed(events, {"T1": (), "T2": ("T1",)})
    assert found == []
    assert model.stops("T1") and not model.goes_on("T1") and model.status("T1") == "blocked"
    # Without its step_failed, the blocker finds the pause unfinished.
    assert findings([*events[:-2], blocker("T1")]) == [
        "blocker_encountered for T1 without its step_failed"
    ]


def test_a_pause_failed_under_an_explicit_stop_is_legal() -> None:
    events = [*START, asked(), said("step_paused"), step_failed("stop")]
    assert findings(events) == []


# -- what the model records of the supervisor's call ------------------------------------------


@pytest.mark.parametrize(
    ("tail", "said_of_s"),
    [
        ([], ""),
        ([said("step_approved")], "ok"),
        ([said("step_reoriented")], "ok"),
        ([said("step_paused")], "ok"),
        ([sup_failed(kind=protocol.NO_VERDICT)], "ok"),
        ([sup_failed(kind="timeout")], "timeout"),
        ([sup_failed(kind="hard")], "hard"),
    ],
    ids=["pending", "approved", "reoriented", "paused", "no-verdict", "timeout", "hard"],
)
def test_the_supervisors_call_is_recorded_in_calls(tail: list[Event], said_of_s: str) -> None:
    model, found = fed([*START, asked(), *tail])
    assert found == []
    assert model.calls == {"a": (1, "ok"), "s": (4, said_of_s)}


def test_a_persons_verdict_is_no_call() -> None:
    model, found = fed([*START, requested(), person("step_approved")])
    assert found == [] and model.calls == {"a": (1, "ok")}


# -- status: a change awaiting a person -------------------------------------------------------


@pytest.mark.parametrize("verdict", ["step_approved", "step_reoriented"])
def test_status_awaits_approval_until_the_persons_verdict(verdict: str) -> None:
    model, found = fed([*START, requested()], ONE)
    assert found == []
    assert model.status("T1") == "awaiting approval"
    assert model.reason("T1") == (
        f"review `git diff {BASE[:12]} {TREE[:12]}`, then `harness approve` or `harness reject`"
    )
    assert model.summary("T1")["status"] == "awaiting approval"
    att = model.attempt("T1")
    assert att.awaiting and not att.judging and att.verdict is None
    assert att.asked is not None and att.asked["event"] == "approval_requested"
    assert att.judged == TREE
    assert [f.text for f in model.feed(5, person(verdict))] == []
    assert (model.status("T1"), model.reason("T1")) == ("running", None)
    att = model.attempt("T1")
    assert not att.awaiting and att.verdict is not None and att.verdict["event"] == verdict


def test_a_supervisors_call_is_judging_not_awaiting_a_person() -> None:
    model, found = fed([*START, asked()], ONE)
    assert found == []
    att = model.attempt("T1")
    assert att.judging and not att.awaiting and att.judged == TREE
    assert (model.status("T1"), model.reason("T1")) == ("running", None)
    model.feed(5, sup_failed())
    assert not model.attempt("T1").judging


def test_an_unsupervised_attempt_asked_nothing() -> None:
    att = fed(START)[0].attempt("T1")
    assert att.asked is None and att.judged is None and att.verdict is None
    assert not (att.awaiting or att.judging)


def test_the_reason_for_an_answer_without_a_change_names_no_tree_of_none() -> None:
    model, found = fed([*START, requested(tree=None)], ONE)
    assert found == [] and model.status("T1") == "awaiting approval"
    assert "None" not in str(model.reason("T1"))


# -- a blocker while the supervisor's call has no verdict -------------------------------------

BOTH = {"T1": (), "T2": ()}
T2_FAILS = [
    call("T2", "b"),
    ev("subagent_failed", "T2", call_id="b", kind="hard"),
    ev("step_failed", "T2"),
]


def test_a_blocker_while_the_supervisors_call_has_no_verdict_is_refused() -> None:
    before = [ev("task_started"), *worked(), asked()]
    model, found = fed([*before, *T2_FAILS], BOTH)
    assert found == [] and model.unsettled() == "the supervisor's call of T1 has no verdict"
    assert findings([*before, *T2_FAILS, blocker("T2")], BOTH) == [
        "blocker_encountered while the supervisor's call of T1 has no verdict"
    ]
    # The twin: the verdict came before T2's failure blocked the task.
    assert findings([*before, said("step_approved"), *T2_FAILS, blocker("T2")], BOTH) == []


def test_a_blocker_after_the_supervisor_failed_wants_its_retry_or_end() -> None:
    before = [ev("task_started"), *worked(), asked(), sup_failed()]
    assert findings([*before, *T2_FAILS, blocker("T2")], BOTH) == [
        "blocker_encountered while T1's supervisor_failed is followed by no retry or step_failed"
    ]
    ended = [*before, step_failed(), *T2_FAILS, blocker("T1")]
    assert findings(ended, BOTH) == []


# -- loops ------------------------------------------------------------------------------------


def test_rounds_count_and_each_round_is_its_own_attempts() -> None:
    events = [*START, applied(), continued(1)]
    model, found = fed(events, ONE)
    assert found == [] and model.rounds("T1") == 2
    events += [*worked("T1", "b", 2), asked("s", of="b"), said("step_approved")]
    events += [applied("b", "c2"), continued(2, "b", "c2")]
    model, found = fed(events, ONE)
    assert found == [] and model.rounds("T1") == 3
    events += [*worked("T1", "c", 3), completed("c", None), ev("task_completed")]
    model, found = fed(events, ONE)
    assert found == [] and model.status("T1") == "done"
    assert [a.number for a in model.attempts("T1")] == [1, 2, 3]
    assert model.rounds("T2") == 1


def test_loop_continued_resets_the_retry_budget() -> None:
    round_1 = [
        ev("task_started"),
        call("T1", "a"),
        ev("subagent_succeeded", "T1", call_id="a"),
        ev("build_failed", "T1", check="build"),
        retried("a", after="build_failed"),
        *worked("T1", "b", 2),
        applied("b", "c1"),
        continued(1, "b", "c1"),
    ]
    round_2 = [
        call("T1", "c", 3),
        ev("subagent_succeeded", "T1", call_id="c"),
        ev("test_failed", "T1", check="test"),
    ]
    model, found = fed([*round_1, *round_2], ONE)
    assert found == [] and model.may_retry("T1")
    tail = [retried("c", after="test_failed"), *worked("T1", "d", 4), applied("d", "c2")]
    model, found = fed([*round_1, *round_2, *tail, completed("d", "c2")], ONE)
    assert found == [] and model.status("T1") == "done"
    # The twin: a third attempt in one round is one retry too many.
    again = [ev("build_failed", "T1", check="build"), retried("b", after="build_failed")]
    model, found = fed([*round_1[:-2], *again], ONE)
    assert found == [
        "a second subagent_retried for one agent since the last blocker_resolved "
        "(attempt 2 is its last)"
    ]


# -- gaps: verdicts and requests that name a call nothing ties them to -------------------------


@pytest.mark.parametrize(
    "events",
    [
        [*START, requested(), person("step_approved", "zz")],
        [*START, requested("zz")],
        [*START, asked(of="zz")],
    ],
    ids=["person-verdict", "approval-requested", "supervisor-of"],
)
def test_a_request_or_persons_verdict_naming_another_call_is_refused(
    events: list[Event],
) -> None:
    assert findings([*START, requested(), person("step_approved")]) == []
    assert any("zz" in text for text in findings(events))


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (
            [sup_failed(kind=protocol.NO_VERDICT), retried(after="supervisor_failed")],
            "subagent_retried after supervisor_failed (no-verdict), not a retryable failure",
        ),
        (
            [sup_failed(kind="timeout"), fallback()],
            "subagent_fallback after supervisor_failed (timeout), which had a retry left",
        ),
    ],
    ids=["retried", "fallback"],
)
def test_a_finding_after_supervisor_failed_names_supervisor_failed(
    tail: list[Event], expected: str
) -> None:
    assert findings([*START, asked(), *tail]) == [expected]


# -- every supervised log of a small state machine is legal; without its approval it is not ----

KINDS = ("timeout", "retryable", "hard", protocol.NO_VERDICT)


@st.composite
def supervised_logs(draw: st.DrawFn) -> list[Event]:
    """One subtask, supervised by the auditor or a person (drawn per attempt), perhaps
    looped: each attempt's checked change gets CONTINUE (approved, applied or not, then the
    next round or the end), REORIENT (retried while the agent has an attempt left), PAUSE
    (the supervisor's only) or the supervisor's failure; what cannot go on fails the step,
    blocks the task and may be resolved for a new epoch."""
    rounds = draw(st.integers(1, 3))  # 1: not looped
    epochs = draw(st.integers(1, 3))
    events = [ev("task_started")]
    made = 0

    def fresh(prefix: str) -> str:
        nonlocal made
        made += 1
        return f"{prefix}{made}"

    rnd = 1  # a round outlives its epoch: a resumed loop goes on at the round that failed
    for epoch in range(epochs):
        attempt = first = 1
        while True:
            worker = fresh("w")
            events += worked("T1", worker, attempt)
            change = draw(st.booleans())
            tree = f"tree{worker}" if change else None
            if draw(st.booleans()):
                events.append(requested(worker, tree))
                action = draw(st.sampled_from(["CONTINUE", "REORIENT"]))
                verdict = {
                    "CONTINUE": person("step_approved", worker),
                    "REORIENT": person("step_reoriented", worker),
                }[action]
            else:
                judge = fresh("s")
                events.append(asked(judge, worker, tree))
                action = draw(st.sampled_from(["CONTINUE", "REORIENT", "PAUSE", "FAIL"]))
                verdict = {
                    "CONTINUE": said("step_approved", judge),
                    "REORIENT": said("step_reoriented", judge),
                    "PAUSE": said("step_paused", judge),
                    "FAIL": sup_failed(judge, draw(st.sampled_from(KINDS))),
                }[action]
            events.append(verdict)
            if action == "CONTINUE":
                commit = f"c{worker}" if change else None
                if change:
                    events.append(applied(worker, f"c{worker}"))
                if change and rnd < rounds:
                    events.append(continued(rnd, worker, commit))
                    rnd += 1
                    attempt += 1
                    first = attempt
                    continue
                events += [completed(worker, commit), ev("task_completed")]
                return events
            if protocol.retryable(verdict) and attempt - first + 1 < protocol.MAX_ATTEMPTS:
                events.append(retried(worker, after=verdict["event"]))
                attempt += 1
                continue
            events += [step_failed(), blocker("T1")]
            break
        if epoch < epochs - 1:
            events.append(ev("blocker_resolved", "T1"))
    return events


@settings(FAST, max_examples=200)
@given(supervised_logs())
def test_every_supervised_log_is_legal_and_none_without_its_approval(
    events: list[Event],
) -> None:
    model, found = fed(events, ONE)
    assert found == [], found
    if events[-1]["event"] == "task_completed":
        assert model.status("T1") == "done"
    else:
        assert model.status("T1") == "blocked"
    approvals = [i for i, e in enumerate(events) if e["event"] == "step_approved"]
    for i in approvals:
        cut = events[:i] + events[i + 1 :]
        assert findings(cut, ONE), f"line {i} (step_approved) taken out went unnoticed"
    # In particular every change the log applied needed its approval.
    if any(e["event"] == "subagent_diffs_applied" for e in events):
        assert approvals
