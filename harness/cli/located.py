"""What a command works on: the repository, found from --repo or the working directory, and
the task its arguments name."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.base import ids
from harness.base.errors import InvalidInput
from harness.repository import repo
from harness.repository.layout import Layout


def repository(args: argparse.Namespace) -> Layout:
    start = Path(args.repo) if args.repo else Path.cwd()
    return Layout(repo.find_root(start.resolve()))


def task(args: argparse.Namespace) -> tuple[Layout, str]:
    """The repository, found first, and the task id the command names."""
    layout = repository(args)
    if not is_task_id(args.task_id):
        raise InvalidInput(f"task id {args.task_id!r}: use letters, digits, '.', '_' and '-'")
    return layout, args.task_id


def is_task_id(value: str) -> bool:
    """Whether `value` can name a task: its folder under ai/tasks, never an option."""
    return ids.whole(ids.ID, value)
