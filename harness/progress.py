"""progress.ndjson: the task's append-only, hash-chained event log."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import orjson

from . import files, schemas
from .clock import Clock
from .errors import Halted, InvalidInput
from .ledger import Ledger

GENESIS = "0" * 64


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


class Log:
    """The only reader and the only writer of one task's log."""

    def __init__(self, path: Path, task_id: str, clock: Clock) -> None:
        self.path = path
        self.task_id = task_id
        self.clock = clock
        self.events: list[dict[str, Any]] = []
        self.head = GENESIS
        self.uncontained = False  # [sandbox] mode = "off": every event says so
        self.ledger: Ledger | None = None  # set by follow(): each append is entered there
        self.size = 0
        self._sha = hashlib.sha256()
        self._before_last = self._sha.hexdigest()
        self._label = f"ai/tasks/{task_id}/progress.ndjson"
        self._read()

    @property
    def digest(self) -> str:
        """sha256 of the whole log as harness read and appended it."""
        return self._sha.hexdigest()

    def _read(self) -> None:
        data = files.read_regular(self.path, self._label)
        if not data:
            return
        if not data.endswith(b"\n"):
            raise InvalidInput(f"{self._label}: last line is incomplete")
        for number, line in enumerate(data.splitlines(), start=1):
            where = f"{self._label}:{number}"
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise InvalidInput(f"{where}: invalid JSON") from None
            schemas.validate("progress-event", event, where)
            if event["seq"] != len(self.events) or event["prev"] != self.head:
                raise InvalidInput(f"{where}: hash chain broken (seq {event['seq']})")
            if event["task_id"] != self.task_id or files.dumps(event) != line:
                raise InvalidInput(f"{where}: not a line harness wrote")
            self.events.append(event)
            self.head = line_hash(line)
        self.size = len(data)
        self._sha.update(data)
        self._before_last = hashlib.sha256(data[: -len(line) - 1]).hexdigest()

    def follow(self, ledger: Ledger, committed: str) -> None:
        """Enter every append in `ledger` from now on; the log must be what harness last wrote
        of it: the digest entered there, else `committed` (the recorded log's), or that and
        the one line a kill between an append and its entry leaves."""
        expected = ledger.noted(self.path) or committed
        if expected not in (self.digest, self._before_last):
            undo = (
                f"delete {ledger.path} to go on from this one"
                if ledger.noted(self.path)
                else "commit this one to go on from it"
            )
            raise InvalidInput(
                f"{self._label}: not the log harness last wrote: restore it, or {undo}"
            )
        if expected != self.digest:
            ledger.note({self.path: self.digest})
        self.ledger = ledger

    def data(self) -> bytes:
        """The log's bytes as harness read and appended them (each line was checked on load
        to be exactly how harness writes its event)."""
        return b"".join(files.dumps(event) + b"\n" for event in self.events)

    def now(self) -> str:
        """The clock read for the next line."""
        return self.clock.now(len(self.events))

    def append(
        self,
        event: str,
        status: str,
        *,
        step: str | None = None,
        details: dict[str, Any] | None = None,
        error: str | None = None,
        agent: str = "harness",
        ts: str | None = None,
    ) -> dict[str, Any]:
        """Validate, chain, write and fsync one event; return it.

        `ts` lets an event carry the instant of the thing it records (an envelope's ts),
        so that instant is read once and recorded once.
        """
        record = self.next_record(event, status, step, details, error, agent, ts)
        return self.write(record)

    def next_record(
        self,
        event: str,
        status: str,
        step: str | None,
        details: dict[str, Any] | None,
        error: str | None,
        agent: str,
        ts: str | None,
    ) -> dict[str, Any]:
        """The event as the next line would hold it, not yet written."""
        record: dict[str, Any] = {
            "seq": len(self.events),
            "prev": self.head,
            "ts": ts or self.now(),
            "task_id": self.task_id,
            "event": event,
            "status": status,
            "agent": agent,
        }
        if step is not None:
            record["step"] = step
        if self.uncontained:
            details = {**(details or {}), "contained": False}
        if details:
            record["details"] = details
        if error is not None:
            record["error"] = error
        schemas.validate("progress-event", record, self._label)
        return record

    def write(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append one chained record to the file (fsync'ed) and to the events read so far."""
        line = files.dumps(record)
        self._append(line + b"\n")
        self.events.append(record)
        self.head = line_hash(line)
        self.size += len(line) + 1
        self._before_last = self.digest
        self._sha.update(line + b"\n")
        fault(f"after:{record['event']}")
        if self.ledger is not None:  # after the append: see Log.follow for a kill in between
            self.ledger.note({self.path: self.digest})
        return record

    def _append(self, data: bytes) -> None:
        """Add to the file harness read and nothing else: not through a symlink, not to a
        FIFO, not to a log something else grew or cut meanwhile (whatever was changed, the
        record holds harness's own log: see Log.data)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(self.path, flags, 0o666)
        except OSError as exc:
            raise Halted(f"{self._label}: cannot append: {exc.strerror}") from None
        with os.fdopen(fd, "ab") as fh:
            found = os.fstat(fd)
            if not stat.S_ISREG(found.st_mode) or found.st_size != self.size:
                raise Halted(f"{self._label}: changed by something other than harness")
            fh.write(data)
            fh.flush()
            os.fsync(fd)
        if self.size == 0:
            files.fsync_dir(self.path.parent)


def fault(point: str) -> None:
    """Test hook: HARNESS_FAULT=<point> kills this process at that point, like kill -9."""
    if os.environ.get("HARNESS_FAULT") == point:
        os.kill(os.getpid(), 9)
