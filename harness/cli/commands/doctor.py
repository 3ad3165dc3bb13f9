"""`harness doctor`: whether the sandbox works on this machine, and each agent in it."""

from __future__ import annotations

import argparse
from typing import Any

from harness.base.errors import HarnessError
from harness.base.printable import printable
from harness.boundary import sandbox
from harness.cli import located
from harness.cli.output import print_json
from harness.step import preflight


def doctor(args: argparse.Namespace) -> int:
    """Whether untrusted commands can be contained on this machine, and why not; inside a
    repository with a registry, whether each agent starts in its sandbox, and why not."""
    found: dict[str, Any] = dict(sandbox.diagnose())
    rows = _agents(args) if found["sandbox"] == "works" else []
    if args.json:
        print_json(found | {"agents": rows})
    else:
        for name, value in found.items():
            print(f"{name}: {printable(value)}")
        for row in rows:
            why = str(row["error"]).removeprefix(f"agent {row['id']}: ")
            state = f"ok {row['version']}" if row["ok"] else why
            print(f"agent {row['id']}: {printable(state)}")
    return 0 if found["sandbox"] == "works" and all(r["ok"] for r in rows) else 1


def _agents(args: argparse.Namespace) -> list[dict[str, object]]:
    """Each registry agent asked for its version in its sandbox; none outside a repository
    or without a registry."""
    try:
        layout = located.repository(args)
    except HarnessError:
        return []
    if not layout.registry.is_file():
        return []
    return list(preflight.registry_check(layout))
