"""The record commit after a command that moved a task, and what did not make it in."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from harness.base.printable import printable
from harness.step import recording

if TYPE_CHECKING:  # the commands that record have loaded the orchestrator already
    from harness.step.task import Task


def record(task: Task) -> None:
    for line in recording.record(task):
        print(f"harness: not recorded: {printable(line)}", file=sys.stderr)
