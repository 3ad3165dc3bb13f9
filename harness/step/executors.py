"""Where a run's worker calls and checks run: the seam between the scheduler, which decides
what runs and takes every result in plan order, and the machines that run them.

Local, the default, runs them in threads of this process. `--executor ray` runs them as Ray
tasks on a cluster (rayexec.py, `pip install harness[ray]`). Either way harness stays the
only writer: an executor hands back bytes and verdicts; the step gates, commits and logs.
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from harness.boundary import proc
from harness.boundary.contain import Ahead, Containment
from harness.checks import sequence
from harness.repository import repo
from harness.step.executing import Call, checked
from harness.step.task import Task, Worker

# Call is the seam's word; it lives in executing.py (with Lost, what an executor raises),
# which rayexec.py imports too: it cannot import this module, which imports it.
__all__ = ["Call", "Executor", "Local", "answer", "make"]

_POOLS = itertools.count()  # each Local's threads named apart: a nested run has its own
START_S = 5.0  # the longest a thread being started when Ctrl-C came takes to start


class Executor(Protocol):
    def call(self, call: Call) -> Future[proc.Result]:
        """Run the call; its answer is in call.staging once the future is done (Lost when
        the machine running it went away)."""

    def check(self, work: sequence.Work, scratch: Path) -> Future[sequence.Verdict]:
        """Run a change's checks in `scratch`, harness's own folder for them alone."""

    def close(self) -> None:
        """Wait for what still runs (the caller stopped its processes first)."""


class Local:
    """Threads of this process: `slots` for calls and twice that for checks, so a landing's
    checks never wait for a call's thread, nor for runs ahead that turned out stale."""

    def __init__(self, task: Task, slots: int) -> None:
        self.answering: Worker = task.answering
        self.ahead: Ahead | None = None
        if isinstance(self.answering, Containment):
            # Each call's end starts the next one's sandbox in its slot (contain.Ahead).
            self.ahead = Ahead()
            self.answering = replace(self.answering, ahead=self.ahead)
        self.git = task.git
        self.contain: Containment = task.contain
        self.root, self.cache = task.layout.root, task.layout.state / "coverage"
        n = next(_POOLS)
        self.names = (f"harness-call-{n}_", f"harness-check-{n}_")  # as the pools number them
        self.calls = ThreadPoolExecutor(slots, thread_name_prefix=self.names[0][:-1])
        self.checks = ThreadPoolExecutor(2 * slots, thread_name_prefix=self.names[1][:-1])

    def call(self, call: Call) -> Future[proc.Result]:
        return self.calls.submit(answer, self.answering, self.git, call)

    def check(self, work: sequence.Work, scratch: Path) -> Future[sequence.Verdict]:
        return self.checks.submit(checked, self.root, self.contain, work, scratch, self.cache)

    def close(self) -> None:
        self.calls.shutdown(wait=True)
        self.checks.shutdown(wait=True)
        if self.ahead is not None:
            self.ahead.drop()
        # A Ctrl-C inside submit() can leave a thread started but not yet counted by its
        # pool, which shutdown does not wait for: it would start its call once the run had
        # let processes start again, and hold the interpreter's exit until the call ended.
        for thread in threading.enumerate():
            if thread.name.startswith(self.names) and thread is not threading.current_thread():
                _join(thread)


def _join(thread: threading.Thread) -> None:
    """Wait for the thread to end, also one that was being started when Ctrl-C came: its
    start may still be under way (join refuses a thread not yet started), or may never
    happen, when Ctrl-C came before the thread was made (it then runs nothing)."""
    deadline = time.monotonic() + START_S
    while True:
        try:
            thread.join()
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.001)


def answer(answering: Worker, git: repo.Repo, call: Call) -> proc.Result:
    """A call, after its retry-after, on the task's git: each command is a process of its
    own and object reads take turns, so calls in threads share it."""
    proc.pause(call.wait_s)
    return answering.call(call.agent, git, call.base, call.staging, call.timeouts, call.scratch)


def make(task: Task, slots: int, name: str = "local") -> Executor:
    """The executor `name` for a run with `slots`."""
    if name == "ray":
        from harness.step import rayexec  # only with harness[ray]: Ray is not a dependency

        return rayexec.Ray(task, slots)
    return Local(task, slots)
