"""The injected clock: the only source of time for anything harness records."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Protocol

from harness.base.errors import InvalidInput

FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_STAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


class Clock(Protocol):
    def now(self, seq: int) -> str:
        """The time for something recorded as (or just before) log line `seq`."""
        ...


class SystemClock:
    def now(self, seq: int) -> str:
        return datetime.now(UTC).strftime(FORMAT)


class SteppingClock:
    """A fixed start plus one second per log line (tests, demo).

    Deriving time from the log position, not from a count of readings, means a run killed
    and finished by another process records the same instants as an uninterrupted one.
    """

    def __init__(self, start: str) -> None:
        self._start = parse(start)

    def now(self, seq: int) -> str:
        try:
            return (self._start + timedelta(seconds=seq)).strftime(FORMAT)
        except OverflowError:
            raise InvalidInput("HARNESS_CLOCK: the clock went past the year 9999") from None


def parse(ts: str) -> datetime:
    return datetime.strptime(ts[:19] + "Z", FORMAT).replace(tzinfo=UTC)


def readable(ts: str) -> bool:
    """Whether parse takes `ts`, a text the schemas' timestamp pattern matched: the pattern
    lets through a 13th month, 30 February or a 25th hour. By the minute, cached, as the
    lines of a log share theirs."""
    return ts[17:19] <= "59" and _minute(ts[:16])


@lru_cache(maxsize=256)
def _minute(prefix: str) -> bool:
    try:
        datetime.strptime(prefix, "%Y-%m-%dT%H:%M")
    except ValueError:
        return False
    return True


def from_env() -> Clock:
    """HARNESS_CLOCK=<ISO8601 Z> makes every reading deterministic (tests, demo)."""
    start = os.environ.get("HARNESS_CLOCK")
    if not start:
        return SystemClock()
    if not (_STAMP.fullmatch(start) and readable(start)):
        raise InvalidInput(f"HARNESS_CLOCK={start!r}: not an instant like 2026-01-01T00:00:00Z")
    return SteppingClock(start)
