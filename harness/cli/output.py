"""How commands print more than a line of text: one JSON document, a short commit id, a
page to stdout or to a file."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from harness.base import files
from harness.base.errors import InvalidInput


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
    path = Path(output)
    try:
        found = path.lstat()
    except FileNotFoundError:
        found = None
    except OSError as exc:
        raise InvalidInput(f"--output {output}: {exc.strerror}") from None
    # Renamed over, a device (as root, /dev/null) or a link would be replaced, not written.
    if found is not None and not stat.S_ISREG(found.st_mode):
        raise InvalidInput(f"--output {output}: not a regular file")
    try:
        files.atomic_write(path, data)
    except OSError as exc:
        raise InvalidInput(f"--output {output}: {exc.strerror or exc}") from None
    print(f"wrote {output}")
