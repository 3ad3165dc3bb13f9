"""`harness status`'s document, read without the task's lock (the text: test_cli.py)."""

from __future__ import annotations

from harness import status
from harness.clock import SteppingClock
from harness.layout import Layout

from .conftest import CLOCK, Sample, calc_patch, err, ok, subtask


def test_a_blocked_subtask_is_the_task_s_blocker(sample: Sample) -> None:
    sample.write_plan([subtask("T1"), subtask("T2", depends_on=["T1"])])
    sample.write_script([err("T1", "hard", "cannot do it")])
    assert sample.cli("run", "demo").returncode == 1
    doc = status.status(Layout(sample.root), "demo", SteppingClock(CLOCK))
    assert doc["blocked"] == {"step": "T1", "error": "cannot do it"}
    assert [(r["id"], r["status"], r["reason"]) for r in doc["subtasks"]] == [
        ("T1", "blocked", "cannot do it"),
        ("T2", "pending", None),
    ]
    assert (doc["complete"], doc["cost_usd"], doc["uncontained_events"]) == (False, 0, 0)


def test_status_exits_1_while_the_task_is_halted_and_0_once_it_goes_on(sample: Sample) -> None:
    sample.write_plan([subtask("T1"), subtask("T2", depends_on=["T1"], on_error="continue")])
    sample.write_script([err("T1", "hard", "cannot do it")])
    assert sample.cli("run", "demo").returncode == 1
    for args in ((), ("--json",)):
        res = sample.cli("status", "demo", *args)
        assert res.returncode == 1, res.stderr
    assert "blocked at T1: cannot do it" in sample.cli("status", "demo").stdout
    # A failure that let the task go on halts it too, at its end.
    sample.write_plan(
        [subtask("T1", on_error="continue"), subtask("T2", depends_on=["T1"], inputs=[])]
    )
    sample.write_script(
        [err("T1", "hard", "cannot do it"), ok("T2", ("src/calc.py", calc_patch()))]
    )
    assert sample.cli("resume", "demo", "--reason", "let it go on").returncode == 0
    assert sample.cli("run", "demo").returncode == 1
    res = sample.cli("status", "demo")
    assert res.returncode == 1 and "T1 failed: cannot do it" in res.stdout
    # Its twin: a task that runs to completion.
    sample.write_plan([subtask("T1")], task="other")
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("status", "other").returncode == 0  # nothing run yet: pending
    assert sample.cli("run", "other").returncode == 0
    assert sample.cli("status", "other").returncode == 0
