"""step/executors.py: the Local executor's threads end with the run, however it is left."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from harness.base.clock import SteppingClock
from harness.boundary import proc
from harness.importers import demo
from harness.repository.layout import Layout
from harness.step import orchestrator
from harness.step.task import Task

from .conftest import subtask
from .scripted import CLOCK, DIFF, Scripted, repository, run


def _calls_alive() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("harness-call")]


@pytest.mark.parametrize("interrupted", [True, False])
def test_a_ctrl_c_while_a_call_thread_starts_leaves_no_thread_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interrupted: bool
) -> None:
    """Ctrl-C lands in ThreadPoolExecutor.submit while it waits for its new thread to start:
    the thread runs, but its pool never counted it, so shutdown alone does not wait for it.
    The run must: that thread's call would start after the run let processes start again,
    and hold the interpreter's exit until it ended. The twin, not interrupted, completes."""
    root = repository(tmp_path, [subtask("T1", creates=["src/made_*.py"])])
    start = threading.Thread.start

    def started_then_interrupted(self: threading.Thread) -> None:
        start(self)
        if interrupted and self.name.startswith("harness-call"):
            raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", started_then_interrupted)
    worker = Scripted({"T1": [DIFF]}, delays={"T1": 0.5}, again=True)
    if interrupted:
        with pytest.raises(KeyboardInterrupt):
            run(root, worker)
    else:
        assert run(root, worker) == ["T1"]
    assert _calls_alive() == []


def test_a_ctrl_c_the_kernel_gives_a_call_thread_still_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python acts on a signal in the main thread only; a SIGINT delivered to a call's thread
    must still stop the run while the call goes on, not once it ends. The call here waits
    for a release that comes 2 s later: the run must have begun stopping before it."""
    root = repository(tmp_path, [subtask("T1", creates=["src/made_*.py"])])
    released = threading.Event()
    stopping: list[bool] = []
    stop_all = proc.stop_all

    def noted() -> None:
        stopping.append(released.is_set())
        stop_all()

    monkeypatch.setattr(proc, "stop_all", noted)

    class Interrupted(Scripted):
        def call(self, *args: Any) -> proc.Result:
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            released.wait(30)
            return super().call(*args)

    timer = threading.Timer(2, released.set)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run(root, Interrupted({"T1": [DIFF]}, again=True))
    finally:
        released.set()
        timer.cancel()
    assert stopping[:1] == [False]


def _children() -> set[int]:
    """This process's children, running or ended but not reaped."""
    tasks = Path("/proc/self/task").iterdir()
    return {int(pid) for task in tasks for pid in (task / "children").read_text().split()}


@pytest.mark.e2e
@pytest.mark.parametrize("slots", [1, 2])
def test_a_run_in_sandboxes_leaves_none_held_behind(tmp_path: Path, slots: int) -> None:
    """Each call's end starts the next call's sandbox in its slot: the run uses them and
    ends the last ones, which no call was left for."""
    root = tmp_path / "repo"
    root.mkdir()
    demo.build(root)
    before = _children()
    task = Task.load(Layout(root), "demo", SteppingClock(CLOCK))
    try:
        steps = orchestrator.steps(task, once=False, slots=slots)
        done = [s.subtask for s in steps if s is not None]
    finally:
        task.git.close()
    assert sorted(done) == ["T1", "T2", "T3"]
    assert _children() - before == set()
