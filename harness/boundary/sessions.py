"""An agent CLI's own session store, kept per call for an agent that resumes (registry
`"resume": true`): a retry then continues the CLI's conversation instead of starting over.

Each call runs in a fresh private home. After a call of such an agent, what its CLI keeps of
the conversation there (installed.SESSIONS) is copied out to harness's state, under the
call's id; a retry's home is seeded from the call it retries. The store is the CLI's, written
inside the sandbox, so it is untrusted: copied without following a link, bounded in size,
entries and depth, and never read by harness but to hash it into the exchange. A store past
a bound is not kept: the retry starts afresh. Replay and audit never need it: the answers
are recorded.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from harness.base import folders
from harness.boundary import installed

IN, OUT = "session-in", "session-out"  # beside a call's home in its scratch folder
MAX_BYTES = 64 << 20  # a store larger than this is not kept: the retry starts afresh
# A CLI's store is a few folders of a few files per session (claude: projects/<dir>/<id>.jsonl);
# far past that, and short of what would take long to measure, copy and hash after a call.
MAX_ENTRIES = 10_000
MAX_DEPTH = 32


def folders_of(cli: str | None) -> tuple[str, ...]:
    """Where the CLI keeps its sessions, relative to its home."""
    return installed.SESSIONS.get(Path(cli).name, ()) if cli else ()


def seed(home: Path, scratch: Path) -> None:
    """Copy a kept store (scratch/IN) into a fresh home, if there is one."""
    source = scratch / IN
    if source.is_dir():
        folders.copy(source, home, MAX_DEPTH, MAX_ENTRIES, merge=True)


def collect(cli: str | None, home: Path, scratch: Path) -> None:
    """Copy the CLI's store out of the home it ran in, to scratch/OUT; nothing when it left
    none, or one past a bound."""
    target = scratch / OUT
    folders.remove(target)
    real_home = Path(os.path.realpath(home))
    wanted = [rel for rel in folders_of(cli) if _real_dir(real_home / rel)]
    if not wanted:
        return
    try:
        size = 0
        for rel in wanted:
            size += sum(item.size for item in _entries(real_home / rel))
        if size > MAX_BYTES:
            return
        for rel in wanted:
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            folders.copy(real_home / rel, target / rel, MAX_DEPTH, MAX_ENTRIES)
    except (OSError, folders.TreeError):
        # The CLI (or what it ran) left a store harness cannot or will not copy: the retry
        # starts afresh rather than harness stopping.
        folders.remove(target)


def prepare(scratch: Path, kept: Path | None) -> None:
    """Before a call in `scratch`: the store it resumes from (a kept one), or none."""
    for name in (IN, OUT):
        folders.remove(scratch / name)
    if kept is not None and kept.is_dir():
        folders.copy(kept, scratch / IN, MAX_DEPTH, MAX_ENTRIES)


def keep(scratch: Path, dest: Path) -> str | None:
    """Move the store a call left (scratch/OUT) to `dest`; its digest, or None without one."""
    found = scratch / OUT
    if not found.is_dir():
        return None
    folders.remove(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    found.rename(dest)
    return digest(dest)


def digest(folder: Path) -> str:
    """sha256 over every entry's path, kind and content (a link's target, not what it
    points to), in sorted order."""
    h = hashlib.sha256()
    for item in _entries(folder, read=True):
        rel = item.rel.encode()
        if item.kind == "link":
            h.update(b"l\0" + rel + b"\0" + item.target.encode() + b"\0")
        elif item.kind == "file":
            h.update(b"f\0" + rel + b"\0" + hashlib.sha256(item.data or b"").digest())
        elif item.kind == "dir":
            h.update(b"d\0" + rel + b"\0")
    return h.hexdigest()


def _entries(folder: Path, read: bool = False) -> list[folders.Item]:
    return list(folders.entries(folder, MAX_DEPTH, MAX_ENTRIES, read))


def _real_dir(path: Path) -> bool:
    """A folder reached through no link: a link anywhere on the way could lead the copy out
    of the home, into harness's files or the host's."""
    return path.is_dir() and Path(os.path.realpath(path)) == Path(os.path.abspath(path))
