"""`harness plan validate`: a plan checked, with the run's pre-flight."""

from __future__ import annotations

import argparse
import sys

from harness.base import clock
from harness.base.printable import printable
from harness.cli import located
from harness.cli.output import print_json
from harness.step import preflight


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
