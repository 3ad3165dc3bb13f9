"""One harness per task: a second `next` is busy (exit 3) or, with --wait, waits its turn."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import orjson
import pytest

from harness.record.progress import GENESIS, line_hash

from .conftest import CLOCK, Sample, calc_patch, new_file_patch, ok, subtask

SLOW_S = 3


def slow(answer: dict[str, object]) -> dict[str, object]:
    return answer | {"sleep_s": SLOW_S}


def assert_chain(s: Sample) -> None:
    prev = GENESIS
    lines = (s.root / "ai/tasks/demo/progress.ndjson").read_bytes().splitlines()
    for seq, line in enumerate(lines):
        ev = orjson.loads(line)
        assert ev["seq"] == seq and ev["prev"] == prev
        prev = line_hash(line)


@pytest.fixture
def first(sample: Sample) -> Iterator[subprocess.Popen[str]]:
    """A `next` that holds the task's lock while its worker sleeps; started with T1 pending.

    The worker is called after `subagent_invoked` is logged, under the lock taken before the
    task is read, so once that event is in the log the lock is held for ~SLOW_S seconds.
    """
    sample.write_plan([
        subtask("T1"),
        subtask("T2", write_scope="docs/**", creates=["docs/*.md"]),
    ])  # fmt: skip
    sample.write_script([
        slow(ok("T1", ("src/calc.py", calc_patch()))),
        ok("T2", ("docs/x.md", new_file_patch("docs/x.md", ["# x"]))),
    ])  # fmt: skip
    yield from holding(sample, "next")


def holding(sample: Sample, command: str) -> Iterator[subprocess.Popen[str]]:
    """`command demo` started and seen calling its slow T1 worker, so holding its locks."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", command, "demo", "--repo", str(sample.root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HARNESS_CLOCK": CLOCK},
    )  # fmt: skip
    log = sample.root / "ai/tasks/demo/progress.ndjson"
    deadline = time.monotonic() + 30
    while not (log.exists() and b'"subagent_invoked"' in log.read_bytes()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"the first `{command}` never called its worker"
        time.sleep(0.05)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def finished(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, errout = proc.communicate(timeout=60)
    return proc.returncode, out, errout


def test_second_next_is_busy_at_once_and_names_the_lock(
    sample: Sample, first: subprocess.Popen[str]
) -> None:
    res = sample.cli("next", "demo")
    assert res.returncode == 3, res.stderr
    assert "busy" in res.stderr and ".git/harness/locks/demo.lock" in res.stderr
    # Answered at once, not after a wait: the first still holds the lock, its slow call on.
    assert first.poll() is None

    code, out, errout = finished(first)
    assert code == 0, errout
    assert out.startswith("T1\tdone")
    names = sample.names()
    assert names == [
        "task_started", "subagent_invoked", "subagent_succeeded", "build_succeeded",
        "test_passed", "subagent_diffs_applied", "step_completed",
    ]  # fmt: skip
    assert_chain(sample)
    assert len(sample.git("log", "--format=%H", "-F", "--grep=Harness-Subtask: T1").split()) == 1


def test_second_next_with_wait_waits_then_does_the_next_subtask(
    sample: Sample, first: subprocess.Popen[str]
) -> None:
    res = sample.cli("next", "demo", "--wait")
    assert res.returncode == 0, res.stderr
    code, out, errout = finished(first)
    assert code == 0, errout
    # T1 was running when the second started: it did T2, so it waited for T1 to finish.
    assert out.startswith("T1\tdone") and res.stdout.startswith("T2\tdone")
    names = sample.names()
    assert names.count("step_completed") == 2 and names.count("subagent_invoked") == 2
    assert names.count("task_started") == 1
    assert_chain(sample)
    assert sample.status_outside_ai() == ""
    assert (sample.root / "docs/x.md").read_text() == "# x\n"


def test_status_works_while_the_task_is_locked(
    sample: Sample, first: subprocess.Popen[str]
) -> None:
    res = sample.cli("status", "demo", "--json")
    assert first.poll() is None
    assert res.returncode == 0, res.stderr
    rows = {r["id"]: r["status"] for r in orjson.loads(res.stdout)["subtasks"]}
    assert rows == {"T1": "running", "T2": "pending"}
    assert sample.cli("status", "demo").returncode == 0
    code, _, errout = finished(first)
    assert code == 0, errout


def test_runs_of_two_tasks_in_one_repository_take_turns_and_never_crash(sample: Sample) -> None:
    # They share the index and the branch: the second is busy at once, or waits its turn.
    sample.write_plan([
        subtask("T1"),
        subtask("T2", write_scope="docs/**", creates=["docs/*.md"]),
    ])  # fmt: skip
    sample.write_plan([subtask("U1", write_scope="docs/**", creates=["docs/*.md"])], "other")
    sample.write_script([
        slow(ok("T1", ("src/calc.py", calc_patch()))),
        ok("T2", ("docs/x.md", new_file_patch("docs/x.md", ["# x"]))),
        ok("U1", ("docs/u.md", new_file_patch("docs/u.md", ["# u"]))),
    ])  # fmt: skip
    running = holding(sample, "run")
    first = next(running)
    try:
        busy = sample.cli("run", "other")
        assert busy.returncode == 3, busy.stderr
        assert "the repository is busy" in busy.stderr
        assert first.poll() is None
        assert sample.events("other") == []

        waited = sample.cli("run", "other", "--wait")
        code, out, errout = finished(first)
    finally:
        running.close()
    assert code == 0, errout
    assert waited.returncode == 0, waited.stderr
    assert "task demo complete" in out and "task other complete" in waited.stdout
    assert sample.names()[-1] == "task_completed" == sample.names("other")[-1]
    assert_chain(sample)
    assert sample.git("status", "--porcelain") == ""
    assert (sample.root / "docs/x.md").read_text() == "# x\n"
    assert (sample.root / "docs/u.md").read_text() == "# u\n"
