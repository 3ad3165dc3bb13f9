"""Reading and writing harness files: strict JSON in, atomic canonical writes out."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from contextlib import suppress
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


def wipe(path: Path) -> None:
    """Remove a scratch tree whatever untrusted code left in it: folders it made unwritable
    or unreadable are opened up first. Never follows a symlink out of the tree."""

    def reopen(func: Any, name: str, _exc: Any) -> None:
        parent = os.path.dirname(name)
        for folder in (parent, name):
            if os.path.isdir(folder) and not os.path.islink(folder):
                os.chmod(folder, 0o700)
        func(name)

    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, onerror=reopen)


def copy_tree(src: Path, dest: Path) -> None:
    """A copy of a scratch tree: folders, regular files and symlinks (as links); FIFOs,
    sockets and devices planted there are left out rather than opened."""

    def specials(folder: str, names: list[str]) -> set[str]:
        skipped = set()
        for name in names:
            mode = os.lstat(os.path.join(folder, name)).st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                skipped.add(name)
        return skipped

    _open_up(src)
    shutil.copytree(src, dest, symlinks=True, ignore=specials)


def _open_up(folder: Path) -> None:
    """Make a tree that untrusted code may have locked (chmod 000) readable again by its
    owner, without following symlinks."""
    with suppress(OSError):
        folder.chmod(folder.stat().st_mode | 0o700)
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    _open_up(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    os.chmod(entry.path, entry.stat(follow_symlinks=False).st_mode | 0o400)


def read_untrusted(path: Path, limit: int) -> bytes | None:
    """At most `limit` bytes of a file that untrusted code may have replaced: None unless it
    is a regular file reached without following a symlink at its last component."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit)
    finally:
        os.close(fd)
