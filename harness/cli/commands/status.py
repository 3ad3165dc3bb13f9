"""`harness status`: per subtask its status, commit and call, then cost, budgets, blocker."""

from __future__ import annotations

import argparse

from harness.base import clock
from harness.base.printable import printable
from harness.cli import located
from harness.cli.output import print_json, short
from harness.readers import status as task_status

# `status`'s exit code when the task stands halted, as `run` would leave it.
HALTED = frozenset({"blocked", "failed", "skipped", "awaiting approval"})


def status(args: argparse.Namespace) -> int:
    doc = task_status.status(*located.task(args), clock.from_env())
    halted = doc["blocked"] is not None or any(r["status"] in HALTED for r in doc["subtasks"])
    code = 1 if halted else 0
    if args.json:
        print_json(doc)
        return code
    for row in doc["subtasks"]:
        print(
            f"{row['id']}\t{row['role']}\t{row['status']}\t{short(row['commit'])}"
            f"\t{short(row['call_id'])}"
        )
        if row["reason"] is not None:
            print(f"\t{row['id']} {row['status']}: {printable(row['reason'])}")
        for text in row["unverified"]:
            print(f"\t{row['id']} unverified: {printable(text)}")
    if doc["cost_usd"]:
        unknown = doc["cost_unknown_calls"]
        partial = f" (partial: {unknown} call(s) reported no cost)" if unknown else ""
        print(f"cost: ${doc['cost_usd']:.4f}{partial}")
    for name, use in doc["budgets"].items():
        used = "" if use["used"] is None else f"{use['used']:g} of "
        print(f"budget {name}: {used}{use['limit']:g}")
    if doc["uncontained_events"]:
        print(f"NOT CONTAINED: {doc['uncontained_events']} event(s) ran with the sandbox off")
    block = doc["blocked"]
    if block is not None:
        where = block.get("step") or "the task's end"  # no step: failures that went on, a budget
        print(f"blocked at {where}: {printable(str(block.get('error')))}")
    return code
