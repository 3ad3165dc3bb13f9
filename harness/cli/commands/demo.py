"""`harness demo`: a sample task run offline with the scripted worker."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.cli.main import main
from harness.importers import demo as sample


def demo(args: argparse.Namespace) -> int:
    if args.dir and args.repo and Path(args.dir).resolve() != Path(args.repo).resolve():
        raise InvalidInput(f"--dir {args.dir} and --repo {args.repo}: give one folder")
    where = args.dir or args.repo  # --repo, as every command takes it: the repository to make
    return sample.run(Path(where) if where else None, main)
