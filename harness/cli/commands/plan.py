"""`harness plan validate|show|draft|accept|import`: a task's plan."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.base import clock
from harness.base.errors import InvalidInput
from harness.base.printable import printable
from harness.cli import located
from harness.cli.output import print_json
from harness.importers import importing
from harness.repository.locks import locked
from harness.spec import plan as plan_mod
from harness.step import drafting, preflight


def validate(args: argparse.Namespace) -> int:
    layout, task_id = located.task(args)
    doc, code = preflight.validate(layout, task_id, clock.from_env().now(0))
    if args.json:
        print_json(doc)
    else:
        where = layout.plan(task_id).relative_to(layout.root)
        for line in doc["problems"]:
            print(f"{where}: {printable(line)}", file=sys.stderr)
        if doc["valid"]:
            order = doc["order"]
            print(f"plan {task_id} is valid: {len(order)} subtasks, order {' -> '.join(order)}")
    return code


def show(args: argparse.Namespace) -> int:
    layout, task_id = located.task(args)
    plan = plan_mod.load(layout.plan(task_id), layout.root, task_id)
    ordered = plan_mod.order(plan)
    if args.json:
        rows = [
            {
                "id": s.id,
                "role": s.role,
                "goal": s.goal,
                "depends_on": list(s.depends_on),
                "agents": list(s.agents),
                "on_error": s.on_error,
                "budgets": dict(s.limits),
                "plan": s.plan,
            }
            for s in ordered
        ]
        doc = {"task_id": task_id, "subtasks": rows, "max_parallel": plan.max_parallel}
        print_json(doc | {"budgets": dict(plan.limits)})
        return 0
    for sub in ordered:
        deps = f" after {', '.join(sub.depends_on)}" if sub.depends_on else ""
        print(f"{sub.id}\t{sub.role}\t{printable(sub.goal)}{deps}")
    return 0


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


def import_plan(args: argparse.Namespace) -> int:
    layout, task_id = located.task(args)
    given = dict(_pair(item) for item in args.input)
    scope = args.write_scope or "none"
    created = clock.from_env().now(0)
    with locked(layout, task_id, wait=False):
        found = importing.convert(
            layout, Path(args.file), task_id, created, given, args.role, scope
        )
        written = importing.write(layout, found, args.force)
    for path in written:
        print(f"wrote {layout.rel(path)}")
    return 0


def _pair(item: str) -> tuple[str, str]:
    """--input K=V."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise InvalidInput(f"--input {item!r}: give it as NAME=VALUE")
    return key, value
