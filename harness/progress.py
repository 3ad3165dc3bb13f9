"""progress.ndjson: the task's append-only, hash-chained event log."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson

from . import files, schemas
from .clock import Clock
from .errors import InvalidInput

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
        self._label = f"ai/tasks/{task_id}/progress.ndjson"
        self._read()

    def _read(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
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
        created = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as fh:
            fh.write(line + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        if created:
            files.fsync_dir(self.path.parent)
        self.events.append(record)
        self.head = line_hash(line)
        fault(f"after:{record['event']}")
        return record


def fault(point: str) -> None:
    """Test hook: HARNESS_FAULT=<point> kills this process at that point, like kill -9."""
    if os.environ.get("HARNESS_FAULT") == point:
        os.kill(os.getpid(), 9)
