"""`harness plan draft` and `accept`: the planning agent's draft, then promoted to plan.json."""

from __future__ import annotations

import argparse
import sys

from harness.base import clock
from harness.cli import located
from harness.repository.locks import locked
from harness.step import drafting


def draft(args: argparse.Namespace) -> int:
    layout, task_id = located.task(args)
    with locked(layout, task_id, wait=False):
        path = drafting.draft(layout, task_id, args.goal, clock.from_env())
    print(
        f"draft written to {path.relative_to(layout.root)}; review it, then `harness plan accept`"
    )
    return 0


def accept(args: argparse.Namespace) -> int:
    layout, task_id = located.task(args)
    with locked(layout, task_id, wait=False):
        data = drafting.accept(layout, task_id)
    sys.stdout.write(data.decode())
    print(f"accepted as {layout.plan(task_id).relative_to(layout.root)}")
    return 0
