"""`harness replay`: a task re-run from its record, to its first divergence if any."""

from __future__ import annotations

import argparse

from harness.cli import located
from harness.readers import replay as replaying


def replay(args: argparse.Namespace) -> int:
    layout, task_id = located.task(args)
    done = replaying.replay(layout, task_id, args.verify, trusted=args.trust_config)
    checks = "checks re-run in the sandbox" if done.verified else "checks from the record"
    if done.loosened:
        checks = f"checks re-run as the record's config says: {', '.join(done.loosened)}"
    print(
        f"replay {task_id}: {done.events} events and {len(done.commits)} commits reproduced "
        f"from base {done.base[:12]} ({checks})"
    )
    for commit in done.commits:
        print(f"  {commit}")
    return 0
