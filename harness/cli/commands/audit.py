"""`harness audit`: a task's log, exchanges, commits and tokens checked (with --key, the log
head signatures of its record commits too); exit 1 on findings."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.base import files
from harness.cli import extras, located
from harness.readers import audit as auditing


def audit(args: argparse.Namespace) -> int:
    layout, task_id = located.task(args)
    key = None
    if args.key is not None:
        try:
            # The `sign` extra's libraries: an audit without --key neither needs nor pays.
            from harness.base import signing
        except ModuleNotFoundError as exc:
            raise extras.missing(exc, "sign", "audit --key") from None
        key = signing.load_public(layout.root, Path(args.key))
    found = auditing.audit(layout, task_id, key)
    if args.json:
        sys.stdout.buffer.write(files.dumps(found.doc()) + b"\n")
        return 0 if found.ok else 1
    for finding in found.findings:
        print(f"{'-' if finding.seq is None else f'seq {finding.seq}'}: {finding.reason}")
    n = len(found.findings)
    verdict = "clean" if found.ok else f"{n} finding{'s' if n > 1 else ''}"
    print(f"audit {task_id}: {found.events} events, {verdict}")
    return 0 if found.ok else 1
