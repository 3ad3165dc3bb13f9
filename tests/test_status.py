"""`harness status`'s document, read without the task's lock (the text: test_cli.py)."""

from __future__ import annotations

from harness.base.clock import SteppingClock
from harness.readers import status
from harness.repository.layout import Layout

from .conftest import CLOCK, Sample, calc_patch, err, new_file_patch, ok, subtask


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
    sample.write_plan([subtask("T1", on_error="continue"), subtask("T2", depends_on=["T1"])])
    sample.write_script(
        [err("T1", "hard", "cannot do it"), ok("T2", ("src/calc.py", calc_patch()))]
    )
    assert sample.cli("resume", "demo", "--reason", "let it go on").returncode == 0
    assert sample.cli("run", "demo").returncode == 1
    res = sample.cli("status", "demo")
    assert res.returncode == 1 and "T1 failed: cannot do it" in res.stdout
    assert "blocked at the task's end: T1 failed: cannot do it" in res.stdout
    page = sample.cli("report", "demo").stdout
    assert "Blocked at the task&#x27;s end: T1 failed: cannot do it" in page
    res = sample.cli("resume", "demo", "--reason", "T1 again")
    assert res.stdout == "task demo resumed at its end\n"
    # Its twin: a task that runs to completion.
    sample.write_plan([subtask("T1", creates=["src/other.py"])], task="other")
    sample.write_script([ok("T1", ("src/other.py", new_file_patch("src/other.py", ["O = 1"])))])
    assert sample.cli("status", "other").returncode == 0  # nothing run yet: pending
    assert sample.cli("run", "other").returncode == 0
    assert sample.cli("status", "other").returncode == 0


def test_a_refusal_names_what_is_at_fault_once_escaped(sample: Sample) -> None:
    """Messages as a person reads them: a name's backslash is doubled once (printable), a
    rename names the end outside the scope, a batch refusal names no entry."""
    odd = new_file_patch("src/a\\b.py", ["A = 1"])
    sample.write_plan([subtask("T1", creates=["src/**"])])
    sample.write_script([ok("T1", ("src/a\\b.py", odd))])
    assert sample.cli("run", "demo").returncode == 1
    shown = sample.cli("status", "demo").stdout
    assert "\tT1 blocked: diff 0 (src/a\\\\b.py): backslash in path\n" in shown
    # A rename into the scope from outside it: the entry names src/a.py, the refusal lib/a.py.
    (sample.root / "lib").mkdir()
    (sample.root / "lib/a.py").write_text("A = 1\n")
    sample.commit_all("a file outside src/")
    moved = (
        "diff --git a/lib/a.py b/src/a.py\nsimilarity index 100%\n"
        "rename from lib/a.py\nrename to src/a.py\n"
    )
    sample.write_plan([subtask("T1", inputs=["lib/a.py"], creates=["src/**"])])
    sample.write_script([ok("T1", ("src/a.py", moved))])
    assert sample.cli("resume", "demo", "--reason", "a plain name").returncode == 0
    assert sample.cli("run", "demo").returncode == 1
    shown = sample.cli("status", "demo").stdout
    assert "\tT1 blocked: diff 0 (src/a.py): outside write token: lib/a.py\n" in shown
    # Too many files for [limits]: the whole answer, no entry named.
    sample.set_config((sample.root / "ai/harness.toml").read_text() + "\n[limits]\nmax_files = 1\n")
    both = (("src/calc.py", calc_patch()), ("src/more.py", calc_patch()))
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", *both)])
    res = sample.cli("resume", "demo", "--reason", "smaller answers")
    assert res.stdout == "task demo resumed at T1\n"
    assert sample.cli("run", "demo").returncode == 1
    shown = sample.cli("status", "demo").stdout
    assert "\tT1 blocked: too many files (2 > 1)\n" in shown and "None" not in shown
