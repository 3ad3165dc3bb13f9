"""What an executor (executors.py) is handed and hands back, apart from any one executor:
a worker call as data, the loss of the machine running one, and a change's checks run with
a git of their own (what any executor falls back on to run them here)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.boundary.contain import Containment
from harness.boundary.registry import Agent
from harness.checks import sequence
from harness.repository import repo


@dataclass(frozen=True)
class Call:
    """One worker call as data: the agent, the base it sees, the envelope staged in
    `staging` (its answer is written there), the call's scratch folder and timeouts."""

    agent: Agent
    root: Path
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
