"""The version probes' cache: what an agent's `--version` printed, kept across commands.

Each entry is keyed by a digest of everything the output could depend on: harness's own
version (a launcher runs harness's code), the agent's executable and the CLI programs it
drives (resolved path, device, inode, size, mtime and ctime: a binary touched or replaced is
probed again), whether it ran boxed, and the environment it was given but its throw-away
HOME. Only digests and outputs are stored, never the environment's values (they may be keys).
The file lives in harness's state under the git directory, which nothing records and no
sandbox shows; what it holds is still read as untrusted: anything malformed is ignored
whole, and a cached output is judged against the agent's range like a fresh one.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from contextlib import suppress
from pathlib import Path

import orjson

from harness import __version__
from harness.base import files

NAME = "probes.json"
LIMIT = 1 << 20  # a cache bigger than this is not ours
KEEP = 64  # entries kept, the newest; older agent binaries are probed again if they return


def key(exe: Path, programs: Iterable[Path], env: Mapping[str, str], boxed: bool) -> str | None:
    """The digest naming one probe, or None when a file it depends on cannot be stat'ed
    (then the probe runs and says why)."""
    found = [_identity(path) for path in (exe, *programs)]
    if None in found:
        return None
    material = {
        "boxed": boxed,
        "env": sorted((name, value) for name, value in env.items() if name != "HOME"),
        "files": found,
        "harness": __version__,
    }
    return hashlib.sha256(files.dumps(material)).hexdigest()


def _identity(path: Path) -> list[object] | None:
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return None
    return [real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def load(path: Path) -> dict[str, str]:
    """The cache's entries, oldest first; empty when it is absent or not exactly ours."""
    raw = files.read_untrusted(path, LIMIT)
    if raw is None:
        return {}
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    entries = doc.get("probes") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not all(_is_entry(e) for e in entries):
        return {}
    return dict(entries)


def _is_entry(entry: object) -> bool:
    """[digest, output]: a list, as the file's keys are sorted and its order is its age."""
    return (
        isinstance(entry, list)
        and len(entry) == 2
        and isinstance(entry[0], str)
        and _is_digest(entry[0])
        and isinstance(entry[1], str)
    )


def _is_digest(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def store(path: Path, entries: dict[str, str], digest: str, output: str) -> None:
    """Add one probe's output, keeping the newest KEEP; written whole and atomically, so a
    command reading it at the same time sees the old cache or the new one. A state folder
    that cannot be written (a read-only checkout, say) leaves the cache as it was: a
    command that needs no other state must not fail for want of a cache."""
    kept = {k: v for k, v in entries.items() if k != digest}
    kept[digest] = output
    newest = [[k, v] for k, v in list(kept.items())[-KEEP:]]
    with suppress(OSError):
        files.atomic_write(path, files.dumps({"probes": newest}))
