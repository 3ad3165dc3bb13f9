"""The record as a replay reads it: the recorded log, a log that writes only the record's
next line (ReplayLog), check results read off it, and how a replay diverges from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.base import clock
from harness.base.errors import Halted, InvalidInput
from harness.checks.acceptance import Judge
from harness.gate.diffgate import Change
from harness.record.progress import Log
from harness.repository.layout import Layout

Event = dict[str, Any]

# What must agree between a recorded line and the replayed one; the rest (times, messages,
# command lines, measurements) may differ between machines and is taken from the record.
COMPARED = ("event", "step", "status")
COMPARED_DETAILS = ("call_id", "commit", "check", "kind", "token")


class Diverged(Halted):
    """The replay did something other than the record: where, what was expected, what not."""

    def __init__(self, index: int, expected: str, found: str) -> None:
        super().__init__(f"diverged at event {index}: expected {expected}; found {found}")
        self.index, self.expected, self.found = index, expected, found


class RecordEnds(Exception):
    """The orchestrator went on past the last recorded line: the recorded run stopped there."""


class CommandEnds(Exception):
    """The orchestrator went on past the last line the recorded command wrote: the next
    lines were written by another command, with the inputs of its own record commit."""


def describe(event: Event | None) -> str:
    """One line naming what is compared of an event."""
    if event is None:
        return "the end of the record"
    parts = [str(event.get(k, "-")) for k in COMPARED]
    details = event.get("details") or {}
    parts += [f"{k}={str(details[k])[:12]}" for k in COMPARED_DETAILS if k in details]
    return " ".join(parts)


def _key(event: Event) -> tuple[object, ...]:
    details = event.get("details") or {}
    return (*(event.get(k) for k in COMPARED), *(details.get(k) for k in COMPARED_DETAILS))


class RecordedClock:
    """The recorded ts of line `seq`, so envelopes and commit dates come out the same."""

    def __init__(self, recorded: list[Event]) -> None:
        self.recorded = recorded

    def now(self, seq: int) -> str:
        return str(self.recorded[min(seq, len(self.recorded) - 1)]["ts"])


class ReplayLog(Log):
    """A log that accepts only the record's next line, and writes the record's own bytes."""

    def __init__(self, path: Path, task_id: str, recorded: list[Event]) -> None:
        super().__init__(path, task_id, RecordedClock(recorded))
        self.recorded = recorded
        self.limit: int | None = None  # lines the command being replayed wrote, in all

    @property
    def expected(self) -> Event | None:
        seq = len(self.events)
        return self.recorded[seq] if seq < len(self.recorded) else None

    def write(self, record: dict[str, Any]) -> dict[str, Any]:
        """Hold the event the orchestrator built to the recorded one, then write that."""
        expected = self.expected
        if expected is None:
            raise RecordEnds
        if self.limit is not None and len(self.events) >= self.limit:
            raise CommandEnds
        if _key(record) != _key(expected):
            raise Diverged(len(self.events), describe(expected), describe(record))
        return super().write(expected)

    def copy_expected(self) -> None:
        """Write the record's next line as it is (a person's `harness resume`)."""
        expected = self.expected
        assert expected is not None
        super().write(expected)


class RecordedChecks:
    """Check results read off the record in the order a step asks for them."""

    def __init__(self, log: ReplayLog, step: str) -> None:
        self.log, self.step = log, step

    def _copy(self, names: tuple[str, ...], failed: str) -> bool:
        """Replay the recorded check events of this step at the head of the record."""
        ok = True
        while True:
            expected = self.log.expected
            if expected is None or expected.get("step") != self.step:
                return ok
            if expected["event"] not in names:
                return ok
            self.log.copy_expected()
            ok = ok and expected["event"] != failed

    def build(self, wt: Path, changes: list[Change]) -> bool:
        return self._copy(("build_succeeded", "build_failed"), "build_failed")

    def test(self, wt: Path, command: str) -> bool:
        return self._copy(("test_passed", "test_failed"), "test_failed")

    def accept(self, judge: Judge, lenient: bool = False) -> bool:
        return self._copy(("phase_completed", "acceptance_failed"), "acceptance_failed")


def recorded_log(layout: Layout, task_id: str) -> tuple[list[Event], str]:
    """The recorded log, read and chain-checked (a broken chain is refused here), and the
    hash of its last line."""
    path = layout.log(task_id)
    if not layout.plan(task_id).exists():
        raise InvalidInput(f"ai/tasks/{task_id}/plan.json: file not found")
    if not path.exists():
        raise InvalidInput(f"ai/tasks/{task_id}/progress.ndjson: nothing recorded to replay")
    log = Log(path, task_id, clock.SystemClock())  # read only: no clock is read
    if not log.events:
        raise InvalidInput(f"ai/tasks/{task_id}/progress.ndjson: nothing recorded to replay")
    return log.events, log.head
