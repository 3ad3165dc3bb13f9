"""The record commit after a command that moved a task, and what did not make it in."""

from __future__ import annotations

import sys

from harness.base.printable import printable
from harness.step import orchestrator, recording


def record(task: orchestrator.Task) -> None:
    for line in recording.record(task):
        print(f"harness: not recorded: {printable(line)}", file=sys.stderr)
