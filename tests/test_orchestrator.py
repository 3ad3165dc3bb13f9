"""The step in-process, with a scripted worker: fast checks of the orchestrator's decisions
(the same steps run end to end through the CLI in test_step.py)."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.base.errors import Halted
from harness.boundary import proc
from harness.record import protocol
from harness.repository.layout import Layout

from .conftest import subtask
from .scripted import DIFF, Scripted, repository, run


def plan(*ids: str) -> list[dict[str, object]]:
    return [subtask(sid, creates=["src/made_*.py"]) for sid in ids]


def test_a_retryable_failure_is_retried_once_then_the_step_completes(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("T1"))
    worker = Scripted({"T1": ["retryable", DIFF]})
    assert run(root, worker) == ["T1"]
    worker.assert_used()
    log = Layout(root).log("demo").read_text()
    assert log.count('"event":"subagent_retried"') == 1


def test_a_hard_failure_blocks_and_a_resume_calls_afresh(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("T1", "T2"))
    worker = Scripted({"T1": ["hard", DIFF], "T2": [DIFF]})
    assert run(root, worker, resumes=1) == ["T1", "T2"]
    assert worker.calls == ["T1", "T1", "T2"]


def test_the_fake_fails_on_a_call_it_does_not_expect(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("T1"))
    with pytest.raises(AssertionError, match="unexpected call for T1"):
        run(root, Scripted({}))


def test_the_fake_fails_on_an_answer_left_unused(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("T1"))
    worker = Scripted({"T1": [DIFF, DIFF]})
    run(root, worker)
    with pytest.raises(AssertionError, match="answers never asked for"):
        worker.assert_used()


# -- Run: several calls in flight, results in plan order ---------------------------------------


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
    ).stdout


def events(root: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in Layout(root).log("demo").read_bytes().splitlines()]


def model(root: Path, subtasks: list[dict[str, Any]]) -> protocol.Model:
    """The log read as audit reads it: no line out of order."""
    found = protocol.Model({s["id"]: tuple(s.get("depends_on", ())) for s in subtasks})
    for i, event in enumerate(events(root)):
        assert found.feed(i, event) == [], (i, event)
    return found


def test_a_failure_under_continue_leaves_its_dependent_done_and_blocks_the_task(
    tmp_path: Path,
) -> None:
    subtasks = [
        subtask("T1", creates=["src/made_*.py"], on_error="continue"),
        subtask("T2", creates=["src/made_*.py"], depends_on=["T1"]),
        subtask("T3", creates=["src/made_*.py"]),
    ]
    root = repository(tmp_path, subtasks)
    worker = Scripted({"T1": ["hard"], "T2": [DIFF], "T3": [DIFF]})
    with pytest.raises(Halted, match="task demo is not complete: T1 failed: scripted hard"):
        run(root, worker, resumes=0, slots=2)
    worker.assert_used()
    read = model(root, subtasks)
    assert {s: read.status(s) for s in ("T1", "T2", "T3")} == {
        "T1": "failed",
        "T2": "done",
        "T3": "done",
    }
    names = [(e["event"], e.get("step")) for e in events(root)]
    assert names[-1] == ("blocker_encountered", None)
    assert ("task_completed", None) not in names
    # T1 and T3 were in flight at once; T2 waited for T1's end.
    assert names[1:3] == [("subagent_invoked", "T1"), ("subagent_invoked", "T3")]
    failed = names.index(("step_failed", "T1"))
    assert names.index(("subagent_invoked", "T2")) > failed
    assert read.blocker is not None and read.blocker["error"] == "T1 failed: scripted hard"


def test_a_retried_first_subtask_lands_before_the_second_with_two_slots(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("T1", "T2"))
    start = git(root, "rev-parse", "HEAD").strip()
    worker = Scripted({"T1": ["retryable", DIFF], "T2": [DIFF]})
    assert run(root, worker, slots=2) == ["T1", "T2"]
    worker.assert_used()
    names = [(e["event"], e.get("step")) for e in events(root)]
    assert names == [
        ("task_started", None),
        ("subagent_invoked", "T1"),
        ("subagent_invoked", "T2"),
        ("subagent_failed", "T1"),
        ("subagent_retried", "T1"),
        ("subagent_invoked", "T1"),
        ("subagent_succeeded", "T1"),
        ("subagent_diffs_applied", "T1"),
        ("step_completed", "T1"),
        ("subagent_succeeded", "T2"),
        ("subagent_diffs_applied", "T2"),
        ("step_completed", "T2"),
        ("task_completed", None),
    ]
    log = events(root)
    bases = {e["details"]["base"] for e in log if e["event"] == "subagent_invoked"}
    assert bases == {start}  # each call on the head the run began on, the retry's too
    read = model(root, plan("T1", "T2"))
    t1, t2 = read.done["T1"].commit, read.done["T2"].commit
    assert git(root, "rev-parse", f"{t1}^", f"{t2}^").split() == [start, t1]
    # Each file is named for its subtask and its own call: T1's second, T2's first.
    assert git(root, "diff", "--name-only", start, t2).split() == [
        "src/made_t1_2.py",
        "src/made_t2_1.py",
    ]


def test_the_fake_failing_in_a_pool_thread_fails_the_run(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("T1", "T2"))
    threads: list[str] = []

    class Watched(Scripted):
        def call(self, *args: Any) -> proc.Result:
            with self.lock:
                threads.append(threading.current_thread().name)
            return super().call(*args)

    worker = Watched({"T1": [DIFF]}, delays={"T1": 0.2})
    # T2's call fails in its thread long before T1's answer; it reaches the caller when T2's
    # result is taken, after T1's, and nothing of T2 is logged as an outcome.
    with pytest.raises(AssertionError, match="unexpected call for T2"):
        run(root, worker, slots=2)
    assert len(threads) == 2 and all(t.startswith("harness-call") for t in threads), threads
    names = [(e["event"], e.get("step")) for e in events(root)]
    assert names[-1] == ("step_completed", "T1")
    assert ("subagent_invoked", "T2") in names
    assert not [n for n in names if n[1] == "T2" and n[0] != "subagent_invoked"]
