"""Benches measure harness as an installed copy runs: from bytecode written once.

With PYTHONDONTWRITEBYTECODE set (some shells and containers set it), every module changed
since its .pyc was last written is compiled again by every process a bench starts: 40-60 ms
more for each `harness` command or worker, which the figures would count as harness's own.
"""

from __future__ import annotations

import compileall
import os
import sys
from pathlib import Path

import harness


def bytecode() -> None:
    """Write harness's bytecode now, and let the processes the bench starts use it."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    compileall.compile_dir(Path(harness.__file__).parent, quiet=1)
