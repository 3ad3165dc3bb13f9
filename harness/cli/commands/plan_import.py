"""`harness plan import`: plan.json written from an Agentfile or a Glee workflow."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.base import clock
from harness.base.errors import InvalidInput
from harness.cli import located
from harness.importers import importing
from harness.repository.locks import locked


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
