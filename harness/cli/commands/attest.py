"""`harness attest`: an in-toto SLSA provenance statement for a task's commit."""

from __future__ import annotations

import argparse

from harness.base import files
from harness.cli import located
from harness.cli.output import emit
from harness.readers import attest as provenance


def attest(args: argparse.Namespace) -> int:
    emit(files.pretty(provenance.statement(*located.task(args))), args.output)
    return 0
