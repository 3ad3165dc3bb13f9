"""`harness agents import`: .claude/agents or .gemini/agents files into the registry."""

from __future__ import annotations

import argparse

from harness.base import clock
from harness.cli import located
from harness.importers import personas


def import_agents(args: argparse.Namespace) -> int:
    layout = located.repository(args)
    ids = personas.run(layout.root, args.source, clock.from_env().now(0))
    print(f"imported {len(ids)} agent(s) from {personas.SOURCES[args.source]}: {', '.join(ids)}")
    return 0
