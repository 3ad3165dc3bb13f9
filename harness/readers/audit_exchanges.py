"""The audit of a task's exchange folders: each judged as exchanges.load would judge it and
held against the call the log made.

Where the working tree is proved equal to the last harness commit, the folders are read
from git: one `git cat-file --batch` for every file, at git's speed, instead of a Python
open() per file. The folders the working tree changed are read from disk.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Sequence, Set
from contextlib import ExitStack, suppress
from typing import IO, Any

import orjson

from harness.base import files, schemas
from harness.readers.findings import Findings
from harness.record import exchanges
from harness.record.ledger import digest
from harness.record.protocol import short
from harness.record.tables import Calls, compact, expand
from harness.repository import repo
from harness.repository.layout import Layout

_REGULAR = (b"100644", b"100755")
_HEADER = "%(objecttype) %(objectsize) %(rest)"


class ExchangeAudit:
    def __init__(self, layout: Layout, task_id: str, git: repo.Repo, found: Findings) -> None:
        self.root = layout.root
        self.folder = layout.exchanges(task_id)
        self.rel = self.folder.relative_to(layout.root).as_posix()
        self.git, self.add = git, found.add
        # call id (compact, as protocol keeps it) -> (seq, outcome the log says)
        self.calls = Calls()

    def blobs(self, stack: ExitStack, anchor: str) -> repo.Spool:
        """Every exchange file at `anchor` but the verify/ evidence (which no hash covers), as
        `<type> <size> <mode> <path>` then its content, from one `git cat-file --batch`."""
        prefix = f"{self.rel}/"
        listing = self.git.tree_entries(stack, anchor, [prefix]).result()
        requests = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 -- the stack closes it
        for entry in repo.split(listing):
            info, _, path = entry.partition(b"\t")
            mode, _, obj = info.split(b" ", 2)
            inner = path[len(prefix) :].split(b"/")
            if b"\n" in path:
                self.add("exchange", None, f"{path!r} is no path harness writes")
            elif len(inner) < 3 or inner[1] != exchanges.VERIFY.encode():
                requests.write(b"%s %s %s\n" % (obj, mode, path))
        requests.seek(0)
        return self.git.contents(stack, requests, _HEADER)

    def check(self, calls: Calls, blobs: IO[bytes] | None, dirty: Set[str]) -> None:
        """Every folder against `calls`, the calls the log made, each taken out as its folder
        is met: those left have none. `blobs` is what `blobs()` read at the last harness
        commit, but for the `dirty` folders, which the working tree changed and are read from
        disk; with no harness commit to read (None), every folder is read from disk."""
        self.calls = calls
        if blobs is None:
            dirty = set(os.listdir(self.folder)) if self.folder.is_dir() else set()
        else:
            self.in_git(blobs, dirty)
        self.on_disk(dirty)
        for call, (seq, _) in sorted(calls.items(), key=lambda kv: kv[1][0]):
            self.add("exchange", seq, f"exchange {short(expand(call))} is missing")

    def in_git(self, blobs: IO[bytes], dirty: Set[str]) -> None:
        """Each folder git holds, but those the working tree changed, as exchanges.load
        would judge it; git lists a folder's files together, so one folder at a time."""
        prefix = len(self.rel) + 1
        current, meta, hashes, untext = "", None, dict[str, str](), list[str]()
        for header in blobs:
            fields = header.rstrip(b"\n").split(b" ", 3)
            if len(fields) != 4:  # "<object> missing": no content follows
                self.add(
                    "exchange", None, f"git lacks object {short(fields[0].decode())} of an exchange"
                )
                continue
            _, size, mode, path = fields
            data = blobs.read(int(size))
            blobs.read(1)  # the newline after the content
            name, _, inner = path.decode("utf-8", "surrogateescape")[prefix:].partition("/")
            if name != current:
                if current and current not in dirty:
                    self.exchange(current, meta, hashes, untext)
                current, meta, hashes, untext = name, None, {}, []
            if name in dirty:
                continue
            if not inner:
                self.add("exchange", None, f"{self.rel}/{name} is not an exchange folder")
                current = ""
            elif mode not in _REGULAR:
                hashes[inner] = f"not a regular file (mode {mode.decode()})"
            elif inner == exchanges.META:
                meta = data
            elif inner.partition("/")[0] != exchanges.VERIFY:
                hashes[inner] = digest(data)
                if not _text(inner, data):
                    untext.append(inner)
        if current and current not in dirty:
            self.exchange(current, meta, hashes, untext)

    def on_disk(self, names: Set[str]) -> None:
        """The named folders as the working tree has them, read from the repository's root
        down without following a symlink at any component."""
        for name in sorted(names):
            rel = f"{self.rel}/{name}"
            contents: dict[str, bytes | str] = {}
            for path, data in files.walk(self.root, rel):
                if len(path) < len(rel):
                    why = data if isinstance(data, str) else "a file"
                    self.add("exchange", None, f"{path} is {why}, not a plain folder: not read")
                    return
                contents[path[len(rel) + 1 :]] = data  # the folder itself: ""
            if not contents:
                with suppress(OSError):
                    if stat.S_ISDIR((self.folder / name).lstat().st_mode):
                        self.exchange(name, None, {}, ())  # an exchange without its meta.json
                continue
            if "" in contents:  # a file, a symlink, a FIFO where a folder should be
                self.add("exchange", None, f"{self.rel}/{name} is not an exchange folder")
                continue
            meta = contents.get(exchanges.META)
            covered = {
                inner: digest(data) if isinstance(data, bytes) else data
                for inner, data in contents.items()
                if inner != exchanges.META and inner.partition("/")[0] != exchanges.VERIFY
            }
            untext = [i for i, d in contents.items() if isinstance(d, bytes) and not _text(i, d)]
            self.exchange(name, meta if isinstance(meta, bytes) else None, covered, untext)

    def exchange(
        self, name: str, meta: bytes | None, hashes: dict[str, str], untext: Sequence[str]
    ) -> None:
        """One exchange folder against the call the log made; `untext`, its artifacts that
        are not UTF-8 text, which harness never writes (the answer gave them as JSON text)."""
        entry = self.calls.pop(compact(name), None)
        if entry is None:
            self.add(
                "exchange", None, f"exchange folder {short(name)} is named by no subagent_invoked"
            )
            return
        seq, said = entry
        for inner in sorted(untext):
            self.add("exchange", seq, f"exchange {short(name)}: {inner} is not UTF-8 text")
        recorded = recorded_outcome(name, meta, hashes)
        if isinstance(recorded, str):
            self.add("exchange", seq, f"exchange {short(name)}: {recorded}")
            return
        status, kind = recorded.get("status"), recorded.get("kind")
        if said == "ok" and status != "ok":
            self.add(
                "exchange",
                seq,
                f"exchange {short(name)} failed ({kind}), but the log says it succeeded",
            )
        elif said not in ("", "ok") and (status, kind) != ("error", said):
            outcome = "succeeded" if status == "ok" else f"failed ({kind})"
            self.add(
                "exchange",
                seq,
                f"exchange {short(name)} {outcome}, but the log says it failed ({said})",
            )


def _text(inner: str, data: bytes) -> bool:
    """Whether a file of an exchange is what harness writes there: an artifact is text."""
    if not inner.startswith("artifacts/"):
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def recorded_outcome(name: str, meta: bytes | None, hashes: dict[str, str]) -> dict[str, Any] | str:
    """The outcome meta.json records, or what is wrong with the folder (as exchanges.load
    judges it: meta.json schema-valid, naming the folder, hashing every file but itself and
    verify/)."""
    if meta is None:
        return "meta.json is missing"
    try:
        doc = orjson.loads(meta)
    except orjson.JSONDecodeError:
        return "meta.json is not JSON"
    if not schemas.fast_check("exchange-meta")(doc):
        return f"meta.json: {schemas.problem('exchange-meta', doc)}"
    if doc["call_id"] != name:
        return f"meta.json names call {short(doc['call_id'])}"
    listed: dict[str, str] = doc.get("files", {})
    if listed != hashes:
        wrong = sorted(p for p in listed.keys() | hashes.keys() if listed.get(p) != hashes.get(p))
        return f"files do not match meta.json: {', '.join(wrong[:5])}"
    outcome: dict[str, Any] = doc["outcome"]
    return outcome
