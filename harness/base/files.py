"""Reading and writing harness files: strict JSON in, atomic canonical writes out."""

from __future__ import annotations

import errno
import math
import os
import stat
import tempfile
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from harness.base import folders, schemas
from harness.base.errors import InvalidInput


def dumps(obj: object) -> bytes:
    """One line of JSON with sorted keys: the only way harness serialises records."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def pretty(obj: object) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


def load_json(path: Path, schema: str, root: Path | None = None, raw: bytes | None = None) -> Any:
    """Parse and validate `path` (or `raw`, its bytes as already read); any problem is one
    InvalidInput line naming the file."""
    label = _label(path, root)
    if raw is None:
        raw = read_regular(path, label, root)
    if raw is None:
        raise InvalidInput(f"{label}: file not found")
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"{label}: invalid JSON: {exc}") from None
    schemas.validate(schema, parsed, label)
    return parsed


def load_toml(raw: bytes, label: str, finite: bool = True) -> dict[str, Any]:
    """A TOML document's table; any problem is one InvalidInput line naming `label`. With
    `finite`, nan and inf are no number: as a budget or a price they would pass a schema's
    minimum and turn a limit off."""
    try:
        doc = tomllib.loads(raw.decode("utf-8"), parse_float=_finite if finite else float)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError) as exc:
        raise InvalidInput(f"{label}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise InvalidInput(f"{label}: invalid TOML: nested too deep") from None
    check_settings(doc, label)
    return doc


def check_settings(doc: object, label: str) -> None:
    """Refuse, in one line naming `label`, what no setting a person writes can hold: an
    integer past 64 bits (TOML's are 64-bit, and so are JSON's as orjson writes them: a
    timeout in the config goes into every envelope; tomllib takes any), or a string or key
    holding a NUL (a setting is a command, a name, a path or a glob: exec and git take C
    strings)."""
    values: list[object] = [doc]
    while values:
        value = values.pop()
        if isinstance(value, dict):
            values.extend(value.keys())
            values.extend(value.values())
        elif isinstance(value, list):
            values.extend(value)
        elif type(value) is int and not -(2**63) <= value < 2**63:
            raise InvalidInput(f"{label}: {value} is past 64 bits")
        elif isinstance(value, str) and "\0" in value:
            raise InvalidInput(f"{label}: a string holds a NUL character: '{value}'")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def atomic_write(path: Path, data: bytes, root: Path | None = None) -> None:
    """Write through a temporary file and rename, so readers never see half a file; with
    `root`, only into plain folders below it (see check_folders).

    The file gets the mode a plain open() would give it (0666 less the umask), not
    mkstemp's 0600: a report or a plan is for others to read too.
    """
    if root is not None:
        check_folders(root, path)
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


MISSING = "missing"


def _open_regular(name: str | Path, dir_fd: int | None = None) -> int | str:
    """A descriptor on a regular file, or why there is none (MISSING, "a symlink", ...).

    The entry is looked at with lstat before anything is opened, so a FIFO or a device is
    never opened; one swapped in after that look is caught by O_NOFOLLOW, O_NONBLOCK (a
    FIFO's open does not wait for a writer) and fstat.
    """
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        if stat.S_ISREG(mode):
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
            if stat.S_ISREG(os.fstat(fd).st_mode):
                return fd
            os.close(fd)
    except OSError as exc:
        return _why(exc)
    return "a symlink" if stat.S_ISLNK(mode) else "not a regular file"


def _open_dir(name: str, dir_fd: int) -> int | str:
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ENOTDIR and _is_link(name, dir_fd):
            return "a symlink"  # O_DIRECTORY answers ENOTDIR before O_NOFOLLOW's ELOOP
        return _why(exc)


def _is_link(name: str, dir_fd: int) -> bool:
    with suppress(OSError):
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    return False


def _descend(root: Path, parts: Sequence[str]) -> int | tuple[str, str]:
    """A descriptor on the folder `parts` names below `root`, each folder on the way opened
    through its parent's descriptor with O_NOFOLLOW, so a committed symlink at any component
    (ai/exchanges -> /elsewhere) is never followed, however the tree is swapped meanwhile; or
    (the first component that is not a plain folder, why: MISSING when it is not there)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for depth, name in enumerate(parts):
        inner = _open_dir(name, fd)
        os.close(fd)
        if isinstance(inner, str):
            return "/".join(parts[: depth + 1]), inner
        fd = inner
    return fd


def _open_inside(root: Path, rel: str) -> int | str:
    """A descriptor on the regular file `rel` below `root`, or why there is none, naming the
    component that is not a plain folder."""
    parts = rel.split("/")
    if not rel or ".." in parts:
        return "outside the repository"
    folder = _descend(root, parts[:-1])
    if isinstance(folder, tuple):
        where, why = folder
        return why if why == MISSING else f"{where} is {why}"
    try:
        return _open_regular(parts[-1], folder)
    finally:
        os.close(folder)


def check_folders(root: Path, path: Path) -> None:
    """Refuse, in one line, to write `path` (below `root`) unless every folder on the way
    that exists is a plain folder: a committed symlink or file in a folder's place must not
    send harness's writes out of the repository. Missing folders are fine: harness makes
    them, and nothing but harness writes there meanwhile."""
    try:
        parts = path.relative_to(root).parts[:-1]
    except ValueError:
        raise InvalidInput(f"{path}: outside the repository") from None
    folder = _descend(root, parts)
    if isinstance(folder, int):
        os.close(folder)
    elif folder[1] != MISSING:
        where, why = folder
        raise InvalidInput(
            f"{where}: {why}: harness writes only into plain folders of the repository"
        )


def _why(exc: OSError) -> str:
    known = {errno.ENOENT: MISSING, errno.ELOOP: "a symlink", errno.ENOTDIR: "not a folder"}
    return known.get(exc.errno or 0, f"cannot be read: {exc.strerror}")


def _read(fd: int, limit: int = -1) -> bytes:
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit)


# The most harness reads whole of one file it did not write itself: a plan, a config, an
# exchange's file. Far above anything harness writes; far below what would exhaust memory.
READ_LIMIT = 64 << 20
# How deep below the folder it is asked for a record is walked: exchanges are a few folders.
WALK_DEPTH = 32


def open_regular(path: Path, label: str, root: Path | None = None) -> BinaryIO | None:
    """A harness file opened for reading, or None when there is none; anything else there (a
    symlink, a FIFO, a folder) is refused with one line naming `label`, never followed or
    opened. With `root`, `path` must lie below it with no symlink at any component."""
    if root is None:
        found = _open_regular(path)
    else:
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            rel = ""
        found = _open_inside(root, rel)
    if found == MISSING:
        return None
    if isinstance(found, str):
        raise InvalidInput(f"{label}: {found}")
    return os.fdopen(found, "rb")


def read_regular(
    path: Path, label: str, root: Path | None = None, limit: int = READ_LIMIT
) -> bytes | None:
    """A harness file's bytes, or None when there is none (see open_regular); one larger
    than `limit` is refused rather than read."""
    found = open_regular(path, label, root)
    if found is None:
        return None
    with found as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InvalidInput(f"{label}: larger than {limit} bytes")
    return data


# The longest line harness reads of a log; harness writes none near it.
LINE_LIMIT = 4 << 20


def lines(fh: BinaryIO, limit: int = LINE_LIMIT) -> Iterator[bytes]:
    """The file's lines as iterating it gives them, but none longer than `limit`: a longer
    one is cut there (so it reads as a broken line) and the rest of it skipped, never held."""
    while line := fh.readline(limit + 1):
        if len(line) > limit:
            end = line
            while not end.endswith(b"\n") and (end := fh.readline(limit)):
                pass  # the rest of the line, read a piece at a time and dropped
            line = line[:limit]
        yield line


def read_inside(root: Path, rel: str, limit: int, label: str) -> bytes | None:
    """The bytes of `rel` below `root` (see open_regular with a root), at most `limit`."""
    return read_regular(root / rel, label, root, limit)


def read_untrusted(path: Path, limit: int, root: Path | None = None) -> bytes | None:
    """At most `limit` bytes of a file that untrusted code may have replaced: None unless it
    is a regular file reached without following a symlink at its last component; with
    `root`, at any component, and below `root` (a path the config names in a copy)."""
    if root is None:
        found = _open_regular(path)
    else:
        try:
            found = _open_inside(root, path.relative_to(root).as_posix())
        except ValueError:  # an absolute path the copy's folder does not lead to
            return None
    return None if isinstance(found, str) else _read(found, limit)


def remove_inside(root: Path, rel: str) -> None:
    """Remove the file `rel` below `root` if it is one, following no symlink on the way and
    leaving a folder be: a copy's files, which untrusted code may have replaced."""
    parts = rel.split("/")
    if not rel or ".." in parts:
        return
    folder = _descend(root, parts[:-1])
    if isinstance(folder, tuple):
        return
    try:
        with suppress(OSError):
            os.unlink(parts[-1], dir_fd=folder)
    finally:
        os.close(folder)


def walk(root: Path, rel: str) -> Iterator[tuple[str, bytes | str]]:
    """Every file at or under `rel` (a POSIX path below `root`), sorted: (path, its bytes) for
    a regular file, (path, why not) for anything else, which is not entered or opened; a
    folder more than WALK_DEPTH below `rel` is one such entry.

    Each folder, from `root` down, is opened through its parent's descriptor with O_NOFOLLOW,
    so no symlink is followed however the tree is swapped meanwhile; below `rel`, without
    recursion (folders.Walk), so no record, however deep, stops its reader.
    """
    parts = rel.split("/")
    folder = _descend(root, parts[:-1])
    if isinstance(folder, tuple):
        if folder[1] != MISSING:
            yield folder
        return
    try:
        yield from _walk(folder, parts[-1], rel)
    finally:
        os.close(folder)


def _walk(parent: int, name: str, rel: str) -> Iterator[tuple[str, bytes | str]]:
    found: int | str
    try:
        is_dir = stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError as exc:
        is_dir, found = False, _why(exc)
    else:
        found = _open_dir(name, parent) if is_dir else _open_regular(name, parent)
    if found == MISSING:
        return
    if isinstance(found, str):
        yield rel, found
    elif not is_dir:
        yield rel, _limited(found)
    else:
        with folders.Walk(found, WALK_DEPTH) as below:
            for event, sub, child, _ in below.events():
                path = f"{rel}/{sub}"
                if event == "deep":
                    yield path, f"deeper than {WALK_DEPTH} folders"
                elif event == "unopened":
                    yield path, "a folder that cannot be opened"
                elif event == "file":
                    opened = _open_regular(child, below.fd)
                    if opened != MISSING:
                        yield path, opened if isinstance(opened, str) else _limited(opened)


def _limited(fd: int) -> bytes | str:
    data = _read(fd, READ_LIMIT + 1)
    return data if len(data) <= READ_LIMIT else f"larger than {READ_LIMIT} bytes"
