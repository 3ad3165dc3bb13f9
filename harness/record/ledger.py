"""The ledger: what harness wrote, or read and validated, under ai/ for a task's next record.

An entry is a repository path and the sha256 of the bytes harness put there, or None for a
path harness removed. The files a person writes and harness only reads (plan.json,
ai/harness.toml, the registry, the token store) are entered as harness last read them, from
the very bytes it parsed and validated. The record commit takes a path only with the bytes
its entry names and only what HEAD has for everything else (see recordset), so nothing
written there by anyone else is ever committed under harness's name.

The entries are lines appended to a journal in harness's state folder, out of every
sandbox's reach; the last line for a path wins. Crash safety fixes the order:

- a file is entered before it is written or renamed in, so a kill in between leaves an entry
  whose bytes are not there: the record refuses the path and the resumed step writes it;
- progress.ndjson is entered after each append, so a kill in between leaves the log one line
  ahead of its entry: `Log.follow` accepts exactly that line, which the hash chain vouches
  for, and enters it again.

Once a record commit holds the entries, the journal is cleared: HEAD is then what harness
last wrote, and the next command starts from it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import orjson

from harness.base import files, folders
from harness.base.errors import InvalidInput
from harness.repository.layout import Layout

Entries = dict[str, str | None]

EMPTY = hashlib.sha256(b"").hexdigest()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def enter(entries: Entries, path: str, sha: str | None) -> None:
    """One journal line applied: a removal also ends every entry below the path."""
    if sha is None:
        for known in [p for p in entries if p.startswith(path + "/")]:
            del entries[known]
    entries[path] = sha


def parse(data: bytes, label: str) -> tuple[Entries, int]:
    """The entries a journal holds, and the length of its whole lines: a last line without
    its newline is a kill mid-append, whose file was not written yet, and counts for nothing."""
    entries: Entries = {}
    whole = data.rfind(b"\n") + 1
    for number, line in enumerate(data[:whole].splitlines(), start=1):
        try:
            doc = orjson.loads(line)
            path, sha = doc["path"], doc["sha256"]
        except (orjson.JSONDecodeError, TypeError, KeyError):
            raise InvalidInput(f"{label}:{number}: not a line harness wrote") from None
        if not isinstance(path, str) or not (sha is None or isinstance(sha, str)):
            raise InvalidInput(f"{label}:{number}: not a line harness wrote")
        enter(entries, path, sha)
    return entries, whole


class Ledger:
    """One task's ledger: its entries in memory, each change appended to the journal first."""

    def __init__(self, layout: Layout, task_id: str) -> None:
        self.layout = layout
        self.path = layout.ledger(task_id)
        data = files.read_regular(self.path, str(self.path)) or b""
        self.entries, whole = parse(data, str(self.path))
        if whole < len(data):
            os.truncate(self.path, whole)  # so the next line does not join the torn one

    def noted(self, path: Path) -> str | None:
        return self.entries.get(self.layout.rel(path))

    def note(self, found: Mapping[Path, str | None]) -> None:
        """Enter each path's sha256 (None: harness removed it), durably, in this order."""
        lines = b""
        for path in found:
            files.check_folders(self.layout.root, path)  # before anything is written there
        for path, sha in found.items():
            rel = self.layout.rel(path)
            enter(self.entries, rel, sha)
            lines += files.dumps({"path": rel, "sha256": sha}) + b"\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
        with os.fdopen(os.open(self.path, flags, 0o600), "ab") as fh:
            fh.write(lines)
            fh.flush()
            os.fsync(fh.fileno())

    def read(self, path: Path) -> bytes | None:
        """A file harness reads and the record carries: its bytes, read once as a regular
        file and entered, for the caller to parse; None when there is none."""
        data = files.read_regular(path, self.layout.rel(path), self.layout.root)
        if data is not None and self.noted(path) != digest(data):
            self.note({path: digest(data)})
        return data

    def write(self, path: Path, data: bytes) -> None:
        self.note({path: digest(data)})
        files.atomic_write(path, data)

    def holds(self, path: Path, data: bytes) -> bool:
        """Whether harness's last write to `path` was `data`."""
        return self.noted(path) == digest(data)

    def remove(self, path: Path) -> None:
        """Remove a file or folder harness made; the record drops what HEAD has there."""
        self.note({path: None})
        folders.remove(path)

    def clear(self) -> None:
        """Forget every entry, once a record commit holds them all."""
        self.path.unlink(missing_ok=True)
        self.entries = {}
