"""The injected clock: the only source of time for anything harness records."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Protocol

FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class Clock(Protocol):
    def now(self) -> str: ...


class SystemClock:
    def now(self) -> str:
        return datetime.now(UTC).strftime(FORMAT)


class SteppingClock:
    """Starts at a fixed instant and advances one second per reading (tests, demo)."""

    def __init__(self, start: str) -> None:
        self._next = parse(start)

    def now(self) -> str:
        value = self._next
        self._next += timedelta(seconds=1)
        return value.strftime(FORMAT)


def parse(ts: str) -> datetime:
    return datetime.strptime(ts[:19] + "Z", FORMAT).replace(tzinfo=UTC)


def from_env() -> Clock:
    """HARNESS_CLOCK=<ISO8601 Z> makes every reading deterministic (tests, demo)."""
    start = os.environ.get("HARNESS_CLOCK")
    return SteppingClock(start) if start else SystemClock()
