"""Whole folders, which untrusted code may have filled: removed, copied and listed by
descriptor, one folder open at a time, without recursion.

A worker's home, a check's copy and an agent CLI's session store are written by untrusted
code, and what it leaves can be anything: a chain of folders 1,500 deep (Python 3.11's
shutil.rmtree, copytree and Path.rglob recurse, and raised RecursionError), paths past
PATH_MAX (every step here is one name below an open folder), folders it made unreadable,
links, FIFOs. Each descent opens a folder through its parent's descriptor with O_NOFOLLOW and
checks it is the one it listed; the way back up is `..`, checked against the folder it left
from, so no symlink is followed and a folder moved meanwhile stops the walk rather than
leading it out. Copies and listings are bounded in depth and entries (TreeError names the
bound); removal is not: it is cleanup, and what it leaves would stop the next run."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path

from harness.base.errors import Halted

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_UP = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# What a copy of a check's tree may hold: far past any project's (a deep node_modules is
# tens of folders), and short of what makes a copy take longer than the checks.
COPY_DEPTH = 512
COPY_ENTRIES = 2_000_000


class TreeError(Halted):
    """A tree past a bound, or one that changed under the walk: the failure of the call or
    the check whose tree it is. Its message names a path inside the tree, never the host's."""


@dataclass(frozen=True)
class Item:
    """One entry below the top: its path (POSIX, from the top), kind (dir, file, link or
    other), size, a link's target, and a file's bytes when asked for."""

    rel: str
    kind: str
    size: int = 0
    target: str = ""
    data: bytes | None = None


def _short(rel: str) -> str:
    """A path for a message: a chain of a thousand folders named by its ends."""
    parts = rel.split("/")
    return (
        rel
        if len(parts) <= 6
        else "/".join([*parts[:3], f"...{len(parts) - 5} more...", *parts[-2:]])
    )


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "link" if stat.S_ISLNK(mode) else "other"


def _ident(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


@dataclass
class _Frame:
    rel: str
    name: str
    ident: tuple[int, int]
    info: os.stat_result
    pending: list[str] = field(default_factory=list)  # names still to visit, last first


class Walk:
    """A descent below an open folder (`fd`, which the walk owns and closes), in sorted
    order. `events` yields (event, rel, name, info): "file" for anything but a folder, with
    `self.fd` the folder holding it; "enter" before a folder's entries, `self.fd` being that
    folder; "leave" after them, `self.fd` its parent again; "deep" for a folder past
    `max_depth` and "unopened" for one that cannot be opened, neither entered. With
    `open_up`, a folder untrusted code locked (chmod 000) is opened up for its owner first,
    and one that still cannot be opened is an OSError."""

    def __init__(
        self,
        fd: int,
        max_depth: int | None = None,
        max_entries: int | None = None,
        open_up: bool = False,
    ) -> None:
        self.fd = fd
        self.max_depth, self.max_entries, self.open_up = max_depth, max_entries, open_up

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Walk:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def events(self) -> Iterator[tuple[str, str, str, os.stat_result]]:
        top = os.fstat(self.fd)
        stack = [_Frame("", "", _ident(top), top, sorted(os.listdir(self.fd), reverse=True))]
        seen = 0
        while stack:
            frame = stack[-1]
            if not frame.pending:
                stack.pop()
                if stack:
                    self._move(os.open("..", _UP, dir_fd=self.fd), stack[-1].ident)
                    yield "leave", frame.rel, frame.name, frame.info
                continue
            name = frame.pending.pop()
            seen += 1
            if self.max_entries is not None and seen > self.max_entries:
                raise TreeError(f"more than {self.max_entries} entries")
            rel = f"{frame.rel}/{name}" if frame.rel else name
            try:
                info = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(info.st_mode):
                yield "file", rel, name, info
            elif self.max_depth is not None and len(stack) > self.max_depth:
                yield "deep", rel, name, info
            else:
                try:
                    names = self._down(name, rel, info)
                except OSError:
                    if self.open_up:
                        raise
                    yield "unopened", rel, name, info
                    continue
                stack.append(_Frame(rel, name, _ident(info), info, sorted(names, reverse=True)))
                yield "enter", rel, name, info

    def _down(self, name: str, rel: str, info: os.stat_result) -> list[str]:
        """Into the folder `name`, returning what it holds; where it was on an OSError."""
        if self.open_up and info.st_mode & 0o700 != 0o700:
            os.chmod(name, stat.S_IMODE(info.st_mode) | 0o700, dir_fd=self.fd)
        fd = os.open(name, _DIR, dir_fd=self.fd)
        try:
            names = os.listdir(fd)
        except OSError:
            os.close(fd)
            raise
        self._move(fd, _ident(info), rel)
        return names

    def _move(self, fd: int, expected: tuple[int, int], rel: str = "..") -> None:
        os.close(self.fd)
        self.fd = fd
        if _ident(os.fstat(fd)) != expected:
            raise TreeError(f"{_short(rel)}: the tree changed while it was walked")


def remove(path: Path) -> None:
    """Remove `path`, a folder whatever untrusted code left in it (folders it locked are
    opened up first) or any other entry; nothing when it is absent. Never follows a link."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        path.unlink()
        return
    if info.st_mode & 0o700 != 0o700:
        path.chmod(stat.S_IMODE(info.st_mode) | 0o700)
    with Walk(os.open(path, _DIR), open_up=True) as walk:
        for event, _, name, _ in walk.events():
            if event == "file":
                os.unlink(name, dir_fd=walk.fd)
            elif event == "leave":
                os.rmdir(name, dir_fd=walk.fd)
    path.rmdir()


def copy(
    src: Path,
    dest: Path,
    max_depth: int = COPY_DEPTH,
    max_entries: int = COPY_ENTRIES,
    merge: bool = False,
) -> None:
    """Copy the folder `src` to `dest`: folders, regular files (mode and times kept) and links
    (as links); FIFOs, sockets and devices are left out rather than opened. With `merge`,
    into `dest` as it is, each file of `src` replacing its namesake. Past a bound, TreeError:
    `dest` then holds part of the copy, for the caller to remove."""
    dest.mkdir(exist_ok=merge)
    target = os.open(dest, _DIR)
    made: list[tuple[int, int]] = [_ident(os.fstat(target))]
    try:
        with Walk(os.open(src, _DIR), max_depth, max_entries, open_up=True) as walk:
            for event, rel, name, info in walk.events():
                if event == "deep":
                    raise TreeError(f"{_short(rel)}: deeper than {max_depth} folders")
                if event == "enter":
                    with suppress(FileExistsError) if merge else nullcontext():
                        os.mkdir(name, 0o700, dir_fd=target)
                    fd = os.open(name, _DIR, dir_fd=target)
                    os.close(target)
                    target = fd
                    made.append(_ident(os.fstat(fd)))
                elif event == "leave":
                    fd = os.open("..", _UP, dir_fd=target)
                    os.close(target)
                    target = fd
                    made.pop()
                    if _ident(os.fstat(fd)) != made[-1]:
                        raise TreeError(f"{_short(rel)}: the copy changed while it was made")
                    os.chmod(name, stat.S_IMODE(info.st_mode), dir_fd=target)
                    os.utime(name, ns=(info.st_atime_ns, info.st_mtime_ns), dir_fd=target)
                else:
                    _copy_entry(walk.fd, target, name, info, merge)
    finally:
        os.close(target)


def _copy_entry(source: int, target: int, name: str, info: os.stat_result, merge: bool) -> None:
    kind = _kind(info.st_mode)
    if kind == "other":
        return
    if merge:
        with suppress(FileNotFoundError):
            os.unlink(name, dir_fd=target)
    if kind == "link":
        os.symlink(os.readlink(name, dir_fd=source), name, dir_fd=target)
        return
    if not info.st_mode & 0o400:  # locked by untrusted code: opened up for its owner
        os.chmod(name, stat.S_IMODE(info.st_mode) | 0o400, dir_fd=source)
    fd = os.open(name, _FILE, dir_fd=source)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since it was looked at
            return
        out = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=target
        )
        try:
            while os.sendfile(out, fd, None, 1 << 24):
                pass
            os.fchmod(out, stat.S_IMODE(info.st_mode))
            os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(out)
    finally:
        os.close(fd)


def entries(top: Path, max_depth: int, max_entries: int, read: bool = False) -> Iterator[Item]:
    """Every entry below the folder `top`, sorted, each folder before what it holds; a file's
    bytes with `read`. Past a bound, TreeError. `top` itself may not be a link."""
    with Walk(os.open(top, _DIR), max_depth, max_entries) as walk:
        for event, rel, name, info in walk.events():
            if event == "deep":
                raise TreeError(f"{_short(rel)}: deeper than {max_depth} folders")
            if event == "unopened":
                raise TreeError(f"{_short(rel)}: a folder that cannot be opened")
            kind = _kind(info.st_mode)
            if event == "enter":
                yield Item(rel, "dir")
            elif kind == "link":
                yield Item(rel, kind, target=os.readlink(name, dir_fd=walk.fd))
            elif kind == "file":
                yield Item(rel, kind, info.st_size, data=_read(walk.fd, name) if read else None)
            elif event == "file":
                yield Item(rel, kind)


def _read(folder: int, name: str) -> bytes:
    fd = os.open(name, _FILE, dir_fd=folder)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since it was looked at
            return b""
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
