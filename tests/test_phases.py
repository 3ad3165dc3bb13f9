"""A subtask's phases one at a time, in process: the decisions each makes, from plain values
where the phase is one (a loop's stop, a verdict's event, a lost edit), else from a task
loaded on the demo's repository with the scripted worker (no process but git)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.boundary import registry, worker
from harness.spec import plan as plan_mod
from harness.step import (
    answering,
    calling,
    gating,
    orchestrator,
    phases,
    rounds,
    supervising,
    supervision,
)
from harness.step.subtask import Subtask
from harness.step.task import Task

from .builders import sub
from .conftest import subtask
from .scripted import Scripted, load, repository


class Told:
    """What the live reporter was told of phases ending: (subtask, phase, ok), in order."""

    def __init__(self) -> None:
        self.phases: list[tuple[str, str, bool]] = []

    def started(self, subtask: str, agent: str, role: str, retry: bool) -> None:
        pass

    def ended(self, subtask: str, phase: str, ok: bool, outcome: str | None = None) -> None:
        self.phases.append((subtask, phase, ok))

    def returned(self, subtask: str) -> None:
        pass


def started(tmp_path: Path, subtasks: list[dict[str, Any]]) -> Task:
    """The demo's task on a plan of `subtasks`, task_started logged, as a run begins it."""
    task = load(repository(tmp_path, subtasks), Scripted({}))
    task.log.append("task_started", "ok", details={"subtasks": len(task.plan.subtasks)})
    return task


def job_of(task: Task, sid: str) -> Subtask:
    sub = task.plan.by_id[sid]
    account = orchestrator.Run(task, 1, ThreadPoolExecutor(1)).account
    return Subtask(task, sub, None, account)


def events(task: Task) -> list[str]:
    return [e["event"] for e in task.log.events]


# -- the retry rule -------------------------------------------------------------------------------


RETRYABLE = {"event": "subagent_failed", "details": {"kind": "retryable"}}
HARD = {"event": "subagent_failed", "details": {"kind": "hard"}}
PAUSE = {"event": "step_paused", "details": {}}


@pytest.mark.parametrize(
    ("failed", "may_retry", "fallbacks", "agents", "then"),
    [
        (RETRYABLE, True, 0, 1, phases.RETRY),
        (RETRYABLE, False, 0, 1, phases.FAIL),
        (RETRYABLE, False, 0, 2, phases.FALLBACK),
        (HARD, True, 0, 2, phases.FALLBACK),
        (HARD, True, 1, 2, phases.FAIL),
        (PAUSE, True, 0, 2, phases.PAUSED),
    ],
)
def test_a_failed_attempt_is_retried_falls_back_or_fails(
    failed: dict[str, Any], may_retry: bool, fallbacks: int, agents: int, then: str
) -> None:
    assert phases.after_failure(failed, may_retry, fallbacks, agents) == then


# -- gate ----------------------------------------------------------------------------------------


def new_file(path: str) -> dict[str, str]:
    patch = (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        "@@ -0,0 +1 @@\n+VALUE = 1\n"
    )
    return {"file": path, "patch": patch}


def gated(tmp_path: Path, diff: dict[str, str]) -> tuple[Task, Any, list[tuple[str, str, bool]]]:
    task = started(tmp_path, [subtask("T1", creates=["src/made_*.py"])])
    told = Told()
    task.live = told
    job = job_of(task, "T1")
    agent = registry.route(task.agents, job.sub.role, job.agent_id())
    assert agent is not None
    call = calling.build_call(job, task.model.attempt("T1"), None, agent)
    assert call is not None
    try:
        return task, gating.gate(job, call, {"diffs": [diff]}), told.phases
    finally:
        task.git.close()


def test_the_gate_lets_a_change_in_scope_through(tmp_path: Path) -> None:
    task, changes, told = gated(tmp_path, new_file("src/made_t1.py"))
    assert changes is not None and [c.path for c in changes] == ["src/made_t1.py"]
    assert told == [("T1", "gate", True)]
    assert events(task) == ["task_started"]


def test_the_gate_refuses_a_file_out_of_scope_and_fails_the_step(tmp_path: Path) -> None:
    task, changes, told = gated(tmp_path, new_file("docs/made.md"))
    assert changes is None
    assert told == [("T1", "gate", False)]
    failed = task.log.events[-1]
    assert failed["event"] == "step_failed" and failed["details"] == {"phase": "gate"}


# -- the answer: a lost edit ----------------------------------------------------------------------


def outcome(diffs: int) -> worker.Outcome:
    result = {"diffs": [new_file("src/made_t1.py")] * diffs, "artifacts": [], "notes": []}
    return worker.Outcome("ok", result=result)


WRITER = sub("T1")


@pytest.mark.parametrize(
    ("fields", "scope", "lost"),
    [
        ({}, "token:tok-1", True),
        ({}, "none", False),
        ({"role": "review"}, "token:tok-1", False),
        ({"no_change_ok": True}, "token:tok-1", False),
        ({"loop": plan_mod.Loop(3, "no_diff")}, "token:tok-1", False),
    ],
)
def test_an_ok_answer_without_a_change_is_a_lost_edit_where_the_call_writes(
    fields: dict[str, Any], scope: str, lost: bool
) -> None:
    judged = answering.lost_edit(replace(WRITER, **fields), outcome(0), scope)
    assert (judged.status, judged.kind) == (("error", "retryable") if lost else ("ok", None))
    assert answering.lost_edit(replace(WRITER, **fields), outcome(1), scope).status == "ok"


# -- a loop's round ----------------------------------------------------------------------------


NO_DIFF = plan_mod.Loop(rounds=3, until="no_diff")
ACCEPTANCE = plan_mod.Loop(rounds=3, until="acceptance")


@pytest.mark.parametrize(
    ("loop", "round_", "changed", "unmet", "stopped"),
    [
        (NO_DIFF, 1, False, [], "no_diff"),
        (NO_DIFF, 1, True, [], None),
        (NO_DIFF, 3, True, [], "max"),
        (ACCEPTANCE, 1, True, [], "acceptance"),
        (ACCEPTANCE, 1, True, ["coverage"], None),
        (ACCEPTANCE, 3, True, ["coverage"], "max"),
        (ACCEPTANCE, 2, False, [], "no_diff"),
        (ACCEPTANCE, 2, False, ["coverage"], rounds.UNMET),
    ],
)
def test_a_round_ends_its_loop_or_goes_on(
    loop: plan_mod.Loop, round_: int, changed: bool, unmet: list[str], stopped: str | None
) -> None:
    assert rounds.stop(loop, round_, changed, unmet) == stopped


# -- a verdict ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "line"),
    [
        (supervision.CONTINUE, ("step_approved", "ok", None)),
        (supervision.REORIENT, ("step_reoriented", "error", "reoriented by sup: off goal")),
        (supervision.PAUSE, ("step_paused", "error", "paused by sup: off goal")),
    ],
)
def test_a_verdict_logs_what_follows_from_it(
    action: str, line: tuple[str, str, str | None]
) -> None:
    said = supervision.Verdict(action, "off goal", "do the goal")
    assert supervising.verdict_event(said, "sup") == line


# -- the scheduler's next subtask under on_error ---------------------------------------------------


@pytest.mark.parametrize(
    ("on_error", "halted", "skipped", "next_"),
    [
        ("stop", "T1", [], None),
        ("continue", None, [], "T2"),
        ("skip_dependents", None, ["T2"], "T3"),
    ],
)
def test_after_a_failure_the_scheduler_picks_by_on_error(
    tmp_path: Path, on_error: str, halted: str | None, skipped: list[str], next_: str | None
) -> None:
    subs = [
        subtask("T1", on_error=on_error),
        subtask("T2", depends_on=["T1"]),
        subtask("T3"),
    ]
    task = started(tmp_path, subs)
    try:
        job_of(task, "T1").fail("scripted", "inputs")
        run = orchestrator.Run(task, 1, ThreadPoolExecutor(1))
        assert run.halted() == halted
        assert run.skip_dependents() == bool(skipped)
        assert [e["step"] for e in task.log.events if e["event"] == "step_skipped"] == skipped
        found = run.next_new()
        assert (found.id if found is not None else None) == next_
    finally:
        task.git.close()


def test_a_call_waits_for_its_dependencies_and_takes_plan_order(tmp_path: Path) -> None:
    subs = [subtask("T1"), subtask("T2", depends_on=["T1"]), subtask("T3")]
    task = started(tmp_path, subs)
    try:
        run = orchestrator.Run(task, 2, ThreadPoolExecutor(1))
        assert [s.id for s in run.order if run.waiting(s)] == ["T1", "T3"]
        assert run.base(task.plan.by_id["T2"]) == run.start  # no dependency landed yet
    finally:
        task.git.close()
