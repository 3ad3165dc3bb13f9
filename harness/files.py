"""Reading and writing harness files: strict JSON in, atomic canonical writes out."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

from . import schemas
from .errors import InvalidInput


def dumps(obj: object) -> bytes:
    """One line of JSON with sorted keys: the only way harness serialises records."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def pretty(obj: object) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


def load_json(path: Path, schema: str, root: Path | None = None) -> Any:
    """Parse and validate `path`; any problem is one InvalidInput line naming the file."""
    label = _label(path, root)
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise InvalidInput(f"{label}: file not found") from None
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"{label}: invalid JSON: {exc}") from None
    schemas.validate(schema, data, label)
    return data


def atomic_write(path: Path, data: bytes) -> None:
    """Write through a temporary file and rename, so readers never see half a file.

    The file gets the mode a plain open() would give it (0666 less the umask), not
    mkstemp's 0600: a report or a plan is for others to read too.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _umask() -> int:
    # The only way to read the umask is to set it; put it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _label(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            pass
    return str(path)


def fsync_file(path: Path) -> None:
    with path.open("rb") as fh:
        os.fsync(fh.fileno())
