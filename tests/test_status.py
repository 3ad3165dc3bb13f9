"""`harness status`'s document, read without the task's lock (the text: test_cli.py)."""

from __future__ import annotations

from harness import status
from harness.clock import SteppingClock
from harness.layout import Layout

from .conftest import CLOCK, Sample, err, subtask


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
