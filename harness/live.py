"""Live progress of `run` and `next`: a line as a worker call starts and as each phase ends.

Elapsed time is wall time from an injected clock. It is printed and never recorded: nothing
here reaches the log, an exchange or a commit, which stay reproducible bit for bit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

from . import files
from .printable import printable


class Live(Protocol):
    def started(self, subtask: str, agent: str, role: str, retry: bool) -> None:
        """A worker process is about to be started for `subtask` (its retry, if `retry`)."""

    def ended(self, subtask: str, phase: str, ok: bool) -> None:
        """A phase of `subtask`'s step ended (call, gate, apply, build, test, acceptance,
        commit), passed or failed."""

    def returned(self, subtask: str) -> None:
        """With several calls in flight, `subtask`'s worker process ended; its answer is
        taken in plan order (from a pool thread)."""


class Silent:
    """The default: a step tells nobody (replay, --quiet)."""

    def started(self, subtask: str, agent: str, role: str, retry: bool) -> None:
        pass

    def ended(self, subtask: str, phase: str, ok: bool) -> None:
        pass

    def returned(self, subtask: str) -> None:
        pass


class Lines:
    """Progress as lines on `out`, for people or, `as_json`, one JSON object per line."""

    def __init__(
        self, out: TextIO, as_json: bool, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.out, self.as_json, self.clock = out, as_json, clock
        # A subtask's phases run one after another: each one's time is since its last line.
        self.began = clock()
        self.marks: dict[str, float] = {}
        self.lock = threading.Lock()  # pool threads report too

    def since(self, subtask: str) -> float:
        now = self.clock()
        elapsed, self.marks[subtask] = now - self.marks.get(subtask, self.began), now
        return elapsed

    def started(self, subtask: str, agent: str, role: str, retry: bool) -> None:
        self.marks[subtask] = self.clock()
        doc = {"event": "call_started", "subtask": subtask, "agent": agent, "role": role}
        again = " (retry)" if retry else ""
        self.emit(doc | {"retry": retry}, f"{subtask}: {agent} working as {role}{again}")

    def returned(self, subtask: str) -> None:
        elapsed = self.clock() - self.marks.get(subtask, self.began)
        doc = {"event": "call_returned", "subtask": subtask, "elapsed_s": round(elapsed, 3)}
        self.emit(doc, f"{subtask}: answered after {elapsed:.1f}s; it lands in plan order")

    def ended(self, subtask: str, phase: str, ok: bool) -> None:
        elapsed = self.since(subtask)
        doc = {"event": "phase_ended", "subtask": subtask, "phase": phase, "ok": ok}
        verdict = "ok" if ok else "failed"
        self.emit(
            doc | {"elapsed_s": round(elapsed, 3)}, f"{subtask}: {phase} {verdict} {elapsed:.1f}s"
        )

    def emit(self, doc: dict[str, Any], text: str) -> None:
        line = files.dumps(doc).decode() if self.as_json else printable(text)
        # At once, not at exit: the point is to be seen while a call takes minutes.
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()
