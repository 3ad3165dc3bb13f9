"""An agent CLI's own session store, kept per call for an agent that resumes (registry
`"resume": true`): a retry then continues the CLI's conversation instead of starting over.

Each call runs in a fresh private home. After a call of such an agent, what its CLI keeps of
the conversation there (installed.SESSIONS) is copied out to harness's state, under the
call's id; a retry's home is seeded from the call it retries. The store is the CLI's, written
inside the sandbox, so it is untrusted: copied without following a link, bounded in size,
and never read by harness but to hash it into the exchange. Replay and audit never need it:
the answers are recorded.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

from harness.boundary import installed

IN, OUT = "session-in", "session-out"  # beside a call's home in its scratch folder
MAX_BYTES = 64 << 20  # a store larger than this is not kept: the retry starts afresh


def folders(cli: str | None) -> tuple[str, ...]:
    """Where the CLI keeps its sessions, relative to its home."""
    return installed.SESSIONS.get(Path(cli).name, ()) if cli else ()


def seed(home: Path, scratch: Path) -> None:
    """Copy a kept store (scratch/IN) into a fresh home, if there is one."""
    source = scratch / IN
    if source.is_dir():
        shutil.copytree(source, home, symlinks=True, dirs_exist_ok=True)


def collect(cli: str | None, home: Path, scratch: Path) -> None:
    """Copy the CLI's store out of the home it ran in, to scratch/OUT; nothing when it left
    none, or too much."""
    target = scratch / OUT
    shutil.rmtree(target, ignore_errors=True)
    real_home = Path(os.path.realpath(home))
    wanted = [rel for rel in folders(cli) if _real_dir(real_home / rel)]
    home = real_home
    if not wanted or sum(_size(home / rel) for rel in wanted) > MAX_BYTES:
        return
    try:
        for rel in wanted:
            shutil.copytree(home / rel, target / rel, symlinks=True)
    except (OSError, shutil.Error):
        # The CLI (or what it ran) made a file harness cannot copy: the retry starts afresh
        # rather than harness stopping.
        shutil.rmtree(target, ignore_errors=True)


def prepare(scratch: Path, kept: Path | None) -> None:
    """Before a call in `scratch`: the store it resumes from (a kept one), or none."""
    for name in (IN, OUT):
        shutil.rmtree(scratch / name, ignore_errors=True)
    if kept is not None and kept.is_dir():
        shutil.copytree(kept, scratch / IN, symlinks=True)


def keep(scratch: Path, dest: Path) -> str | None:
    """Move the store a call left (scratch/OUT) to `dest`; its digest, or None without one."""
    found = scratch / OUT
    if not found.is_dir():
        return None
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    found.rename(dest)
    return digest(dest)


def digest(folder: Path) -> str:
    """sha256 over every entry's path, kind and content (a link's target, not what it
    points to), in sorted order."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        rel = path.relative_to(folder).as_posix().encode()
        if stat.S_ISLNK(info.st_mode):
            h.update(b"l\0" + rel + b"\0" + os.readlink(path).encode() + b"\0")
        elif stat.S_ISREG(info.st_mode):
            h.update(b"f\0" + rel + b"\0" + hashlib.sha256(path.read_bytes()).digest())
        elif stat.S_ISDIR(info.st_mode):
            h.update(b"d\0" + rel + b"\0")
    return h.hexdigest()


def _real_dir(path: Path) -> bool:
    """A folder reached through no link: a link anywhere on the way could lead the copy out
    of the home, into harness's files or the host's."""
    return path.is_dir() and Path(os.path.realpath(path)) == Path(os.path.abspath(path))


def _size(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        info = path.lstat()
        if stat.S_ISREG(info.st_mode):
            total += info.st_size
    return total
