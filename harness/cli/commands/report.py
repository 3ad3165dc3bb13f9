"""`harness report`: one self-contained HTML page of a task's record and audit."""

from __future__ import annotations

import argparse

from harness.cli import located
from harness.cli.output import emit
from harness.readers import report as page


def report(args: argparse.Namespace) -> int:
    emit(page.render(*located.task(args)), args.output)
    return 0
