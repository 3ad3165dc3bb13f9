"""`harness registry check`: each agent's launcher and version."""

from __future__ import annotations

import argparse

from harness.base.printable import printable
from harness.cli import located
from harness.cli.output import print_json
from harness.step import preflight


def check(args: argparse.Namespace) -> int:
    rows = []
    for row in preflight.registry_check(located.repository(args)):
        rows.append(row)
        if args.json:
            continue
        if row["ok"]:
            print(f"{row['id']}\tok\t{printable(str(row['version']))}\t{row['wanted']}")
        else:
            print(f"{row['id']}\tFAIL\t{printable(str(row['error']))}")
    failed = not all(row["ok"] for row in rows)
    if args.json:
        print_json({"agents": rows, "ok": not failed})
    return 1 if failed else 0
