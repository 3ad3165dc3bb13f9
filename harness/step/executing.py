"""What an executor (executors.py) is handed and hands back, apart from any one executor:
a worker call as data, the loss of the machine running one, and a change's checks run with
a git of their own (what any executor falls back on to run them here)."""

from __future__ import annotations

from collections.abc import Collection
from concurrent.futures import ALL_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.boundary.contain import Containment
from harness.boundary.registry import Agent
from harness.checks import sequence
from harness.repository import repo


@dataclass(frozen=True)
class Call:
    """One worker call as data: the agent, the base it sees, the envelope staged in
    `staging` (its answer is written there), the call's scratch folder and timeouts."""

    agent: Agent
    base: str
    staging: Path
    timeouts: dict[str, float]
    scratch: Path
    wait_s: float = 0.0  # a retry-after to wait first


class Lost(Exception):
    """The machine running a call or check went away before it answered (a cluster's node
    died): for a call, a retryable failure, recorded with `reason`, which names no host; a
    check simply runs again."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def checked(
    root: Path, contain: Containment, work: sequence.Work, scratch: Path, cache: Path
) -> sequence.Verdict:
    """A change's checks with a git of their own."""
    git = repo.Repo(root)
    try:
        return sequence.run(work, git, contain.box, scratch, cache)
    finally:
        git.close()


WAKE_S = 0.1  # the longest a Ctrl-C waits while the scheduler waits for a call or a check


def waited(futures: Collection[Future[Any]], return_when: str = ALL_COMPLETED) -> None:
    """Wait as concurrent.futures.wait does, in slices of WAKE_S. Python acts on a signal
    in the main thread only, and a wait blocked there is woken by one only when the kernel
    gave it to that thread, which it need not: a Ctrl-C taken by a call's thread was acted
    on only once the call ended."""
    while True:
        done, pending = wait(futures, timeout=WAKE_S, return_when=return_when)
        if not pending or (done and return_when != ALL_COMPLETED):
            return
