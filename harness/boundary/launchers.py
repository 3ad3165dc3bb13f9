"""The launchers harness writes for its shims (`ai/agents/bin/<cli>-cli`), and what harness
reads back from one: the CLI it drives, and whether it keeps the repository off Python's path.

A launcher runs in the worker's copy of the repository. `python -m` alone puts that folder
first on sys.path, so a `harness/` package the repository holds (committed by a pull request,
written by an earlier call, or simply the project's own) would run in the shim's place and
forge its answer. `-I` keeps the folder, the user's site-packages and every PYTHON* variable
out: the shim is harness's own, whatever the copy holds."""

from __future__ import annotations

import os
import re
from pathlib import Path

from harness.base import files
from harness.base.errors import InvalidInput

SHIMS = ("claude", "codex", "gemini", "opencode", "copilot")
_SHIM = re.compile(rb"harness\.workers\.(" + "|".join(SHIMS).encode() + rb")\b")
# A line that runs a harness worker module, and what stands before its `-m`.
_RUNS = re.compile(rb"^(?P<before>[^#\n]*?)\s-m\s+harness\.workers\.\w+", re.M)
_ISOLATED = re.compile(rb"\s-[A-Za-z]*[IP][A-Za-z]*(?=\s)")
HEAD = 4096  # what of a launcher is read: harness's are a few lines


def launcher(module: str) -> str:
    """The text of a launcher script: runs `module` with the Python that runs harness,
    isolated from the folder it runs in."""
    return (
        "#!/bin/sh\n"
        "# Launcher: harness sets HARNESS_PYTHON to its own interpreter.\n"
        f'exec "${{HARNESS_PYTHON:-python3}}" -I -m harness.workers.{module} "$@"\n'
    )


def _head(executable: Path) -> bytes | None:
    # Resolved: a launcher may be linked in from elsewhere, and is run through the link.
    try:
        fh = files.open_regular(Path(os.path.realpath(executable)), str(executable))
    except InvalidInput:
        return None
    if fh is None:
        return None
    with fh:
        return fh.read(HEAD)


def shim_of(executable: Path) -> str | None:
    """The CLI a launcher drives, read from the launcher harness writes; None for a program
    that is no harness shim, or no file harness can read (the version probe says why)."""
    head = _head(executable)
    found = _SHIM.search(head) if head is not None else None
    return found.group(1).decode() if found else None


def exposed(executable: Path) -> bool:
    """Whether the program runs a harness worker module with `python -m` but neither `-I`
    nor `-P`: a launcher written before harness isolated them, whose shim the worker's copy
    can replace."""
    head = _head(executable)
    if head is None:
        return False
    return any(not _ISOLATED.search(b" " + m["before"] + b" ") for m in _RUNS.finditer(head))
