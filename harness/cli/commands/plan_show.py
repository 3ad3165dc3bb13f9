"""`harness plan show`: a plan in run order."""

from __future__ import annotations

import argparse

from harness.base.printable import printable
from harness.cli import located
from harness.cli.output import print_json
from harness.spec import plan as plan_mod


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
