"""`harness resume`, `approve` and `reject`: a person's word on a halted task."""

from __future__ import annotations

import argparse

from harness.base import clock
from harness.base.errors import InvalidInput
from harness.base.printable import printable
from harness.cli import located
from harness.cli.recorded import record
from harness.repository.locks import locked
from harness.step import supervising, supervision, units
from harness.step.task import Task


def resume(args: argparse.Namespace) -> int:
    layout, task_id = located.task(args)
    with locked(layout, task_id, args.wait):
        task = Task.load(layout, task_id, clock.from_env())
        step = units.resume(task, args.reason)
        record(task)
    # No step: the blocker was the task's end (failures that went on, a budget).
    print(f"task {task_id} resumed at {step or 'its end'}")
    return 0


def verdict(args: argparse.Namespace) -> int:
    """`approve` / `reject`: a person's verdict on a change awaiting approval."""
    layout, task_id = located.task(args)
    approve = args.command == "approve"
    reason = args.reason or "approved"
    if not reason.strip():
        raise InvalidInput("--reason: say why")
    with locked(layout, task_id, args.wait):
        task = Task.load(layout, task_id, clock.from_env())
        who = task.git.identity()
        if who is None:
            raise InvalidInput("git knows no user.name and user.email here: set them first")
        action = supervision.CONTINUE if approve else supervision.REORIENT
        verdict = supervision.Verdict(action, reason, reason)
        supervising.decide(task, args.subtask, verdict, who)
        record(task)
    then = "it is committed by the next `harness run`" if approve else "it runs again"
    print(f"{args.subtask} {'approved' if approve else 'rejected'} by {printable(who)}; {then}")
    return 0
