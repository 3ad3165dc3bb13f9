"""What a record commit carries: what harness wrote or read under ai/, and nothing planted.

Every file under the record paths is walked without following a symlink, and opened only
if it is a regular file (a FIFO or a device never is). A file the ledger names is taken
with the bytes read, if they hash to its entry; a file it does not name must be what HEAD
already holds. Anything else is refused with one line and left out: the commit keeps what
HEAD has at that path (the last version recorded there), or nothing. The log is held in
memory, as harness read, checked and appended it, so the record always holds that log.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from harness.base import files
from harness.record.ledger import digest
from harness.repository.layout import Layout

# The sha256 of each path's content in HEAD, None where HEAD has no file there.
Committed = Callable[[list[str]], Mapping[str, str | None]]


@dataclass(frozen=True)
class Record:
    taken: dict[str, bytes]  # repository path -> the checked bytes to commit there
    dropped: list[str]  # harness removed these: what HEAD has at or under them goes
    refused: list[str]  # "path: why", one per path whose file is not committed


def collect(
    layout: Layout,
    task_id: str,
    entries: Mapping[str, str | None],
    held: Mapping[str, bytes],
    committed: Committed,
) -> Record:
    """The record of `task_id` from the ledger's `entries` and the files harness `held` in
    memory (the log), against what HEAD holds."""
    taken: dict[str, bytes] = {}
    refused: dict[str, str] = {}
    strangers: dict[str, str] = {}  # a regular file the ledger does not name: its sha256
    dropped = sorted(path for path, sha in entries.items() if sha is None)
    seen = set()
    for top in layout.record_paths(task_id):
        for path, found in files.walk(layout.root, top):
            seen.add(path)
            if isinstance(found, str):
                refused[path] = found
            elif path in held:
                if found != held[path]:
                    refused[path] = "changed after harness wrote it"
            elif entries.get(path) is not None:
                if digest(found) == entries[path]:
                    taken[path] = found
                else:
                    refused[path] = "changed after harness wrote or read it"
            elif _within(path, dropped):
                refused[path] = "not written by harness"
            else:
                strangers[path] = digest(found)
    for path in [*held, *(p for p, sha in entries.items() if sha is not None)]:
        if path not in seen and not _within(path, refused):
            refused[path] = "missing"
    recorded = committed(sorted(strangers))
    for path, sha in strangers.items():
        if recorded.get(path) != sha:
            refused[path] = "not written or read by harness"
    lines = [f"{path}: {why}" for path, why in sorted(refused.items())]
    return Record(taken | dict(held), dropped, lines)


def _within(path: str, tops: Collection[str]) -> bool:
    return any(path == top or path.startswith(top + "/") for top in tops)
