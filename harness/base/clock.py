"""The injected clock: the only source of time for anything harness records."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Protocol

FORMAT = "%Y-%m-%dT%H:%M:%SZ"


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
        return (self._start + timedelta(seconds=seq)).strftime(FORMAT)


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
    return SteppingClock(start) if start else SystemClock()
