"""`harness log`: the task's log, one line per event, or its events as JSON lines."""

from __future__ import annotations

import argparse
import sys

from harness.base import clock, files
from harness.base.errors import InvalidInput
from harness.cli import located
from harness.readers import logview
from harness.record.progress import Log


def log(args: argparse.Namespace) -> int:
    layout, task_id = located.task(args)
    if not layout.task_dir(task_id).is_dir():
        raise InvalidInput(f"ai/tasks/{task_id}: no such task")
    events = Log(layout.log(task_id), task_id, clock.from_env()).events
    if args.json:
        for ev in events:
            if logview.selected(ev, args.event, args.subtask):
                sys.stdout.buffer.write(files.dumps(ev) + b"\n")
        return 0
    color = sys.stdout.isatty()
    for row in logview.rows(events):
        if logview.selected(row.event, args.event, args.subtask):
            print(logview.render(row, color))
    return 0
