"""How commands print more than a line of text: one JSON document, a short commit id, a
page to stdout or to a file."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.base import files


def print_json(doc: object) -> None:
    """One JSON document on stdout, keys sorted, so scripts and diffs see it the same."""
    sys.stdout.write(files.pretty(doc).decode())


def short(value: str | None) -> str:
    return value[:12] if value else "-"


def emit(data: bytes, output: str | None) -> None:
    """To stdout, or atomically to a file, so a failed run never leaves half a file."""
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    files.atomic_write(Path(output), data)
    print(f"wrote {output}")
