"""progress.ndjson: the task's append-only, hash-chained event log."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from harness.base import clock, files, schemas
from harness.base.clock import Clock
from harness.base.errors import Halted, InvalidInput
from harness.record import event_schema, protocol
from harness.record.ledger import Ledger

GENESIS = "0" * 64
# How a strict read words the first problem it meets, by kind.
_STRICT = {
    "line": "not a line harness wrote: ",
    "chain": "hash chain broken: ",
    "order": "out of order: ",
    "plan": "",
}


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


class Log:
    """The only reader and the only writer of one task's log."""

    def __init__(self, path: Path, task_id: str, clock: Clock) -> None:
        self.path = path
        self.task_id = task_id
        self.clock = clock
        self.events: list[dict[str, Any]] = []
        # What the log says so far, fed every line; the events are kept anyway, so is every
        # attempt (status and report show them).
        self.model = protocol.Model(history=True)
        self.head = GENESIS
        self.uncontained = False  # [sandbox] mode = "off": every event says so
        self.ledger: Ledger | None = None  # set by follow(): each append is entered there
        self.size = 0
        self._sha = hashlib.sha256()
        self._before_last = self._sha.hexdigest()
        self._label = f"ai/tasks/{task_id}/progress.ndjson"
        self.root = path.parents[3]  # <root>/ai/tasks/<task>/progress.ndjson
        self._read()

    @property
    def digest(self) -> str:
        """sha256 of the whole log as harness read and appended it."""
        return self._sha.hexdigest()

    def _read(self) -> None:
        found = files.open_regular(self.path, self._label, self.root)
        if found is None:
            return
        with found as fh:
            for line in read(files.lines(fh), self.task_id, self.model, self._label):
                assert line.event is not None, "a strict read yields only sound lines"
                self.events.append(line.event)
                self.head = line.digest
                self.size += len(line.raw) + 1
                self._before_last = self.digest
                self._sha.update(line.raw + b"\n")

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
        problems = self.model.feed(record["seq"], record)
        if problems:  # the protocol, not the step's code, has the last word on what is logged
            raise Halted(f"{self._label}: {record['event']} refused: {problems[0].text}")
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
        files.check_folders(self.root, self.path)
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


@dataclass(slots=True)
class Line:
    """One line of a log as read: its bytes, its hash, its event if it is one, and every
    problem with it (of kind line, chain, order or plan)."""

    index: int  # 0-based position in the file, the line's seq in a sound log
    raw: bytes  # without its newline
    digest: str
    event: dict[str, Any] | None  # None when the line is not JSON or not a progress event
    problems: list[protocol.Finding] = field(default_factory=list)

    def add(self, kind: str, reason: str | Callable[[], str]) -> None:
        self.problems.append(protocol.Finding(kind, reason))


def read(
    lines: Iterable[bytes],
    task_id: str,
    model: protocol.Model | None = None,
    strict: str | None = None,
) -> Iterator[Line]:
    """The one reader of a task's log: each line checked as harness writes it (JSON, schema,
    canonical bytes, seq, hash chain, task) and, given a model, fed to it in order.

    Lenient (strict None): every line comes with its problems and reading goes on, a broken
    line counting as the next seq so one gap is one problem. Strict: the first problem is
    InvalidInput naming `strict` (the log's label) and the line number. One line at a time:
    nothing is kept but what the model keeps."""
    loads, dumps, sort, readable = orjson.loads, orjson.dumps, orjson.OPT_SORT_KEYS, clock.readable
    valid = event_schema.checker()
    prev, expected = GENESIS, 0
    for index, chunk in enumerate(lines):
        raw = chunk[:-1] if chunk.endswith(b"\n") else chunk
        line = Line(index, raw, line_hash(raw), None)
        if raw is chunk:
            line.add("line", "the last line has no newline: an interrupted write")
        try:
            event = loads(raw)
        except orjson.JSONDecodeError:
            line.add("line", "not JSON")
        else:
            if not valid(event):
                line.add("line", partial(_schema_problem, event))
            elif type(event["seq"]) is not int or not readable(event["ts"]):  # inline: every line
                line.add("line", _unwritten(event))
            else:
                line.event = event
                _check(line, event, task_id, prev, expected, dumps(event, option=sort))
                if model is not None:
                    line.problems += model.feed(index, event)
                expected = event["seq"]  # resynchronised, so that one gap is one problem
        prev, expected = line.digest, expected + 1
        if strict is not None and line.problems:
            first = line.problems[0]
            raise InvalidInput(f"{strict}:{index + 1}: {_STRICT[first.kind]}{first.text}")
        yield line


def _unwritten(event: dict[str, Any]) -> str:
    """What the schema takes and harness never writes, which a reader would trip on: a seq
    that is a float (the schema's integer takes 1.0), or a ts that is no instant."""
    if type(event["seq"]) is not int:
        return f"seq {event['seq']!r} is not an integer as harness writes it"
    return f"ts {event['ts']} is no instant"


def _check(
    line: Line, event: dict[str, Any], task_id: str, prev: str, seq: int, canon: bytes
) -> None:
    if canon != line.raw:
        line.add("line", "not canonical: harness writes sorted keys, no spaces")
    if event["seq"] != seq:
        line.add("chain", f"seq is {event['seq']}, expected {seq}")
    if event["prev"] != prev:
        what = f"line {line.index - 1}" if line.index else "the genesis hash"
        line.add("chain", f"prev does not match the hash of {what}")
    if event["task_id"] != task_id:
        line.add("line", f"task_id is {event['task_id']!r}, not {task_id!r}")


def _schema_problem(event: object) -> str:
    return f"not a progress event: {schemas.problem('progress-event', event)}"


def fault(point: str) -> None:
    """Test hook: HARNESS_FAULT=<point> kills this process at that point, like kill -9."""
    if os.environ.get("HARNESS_FAULT") == point:
        os.kill(os.getpid(), 9)
