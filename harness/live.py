"""Live progress of `run` and `next`: a line as a worker call starts and as each phase ends.

Elapsed time is wall time from an injected clock. It is printed and never recorded: nothing
here reaches the log, an exchange or a commit, which stay reproducible bit for bit.
"""

from __future__ import annotations

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


class Silent:
    """The default: a step tells nobody (replay, --quiet)."""

    def started(self, subtask: str, agent: str, role: str, retry: bool) -> None:
        pass

    def ended(self, subtask: str, phase: str, ok: bool) -> None:
        pass


class Lines:
    """Progress as lines on `out`, for people or, `as_json`, one JSON object per line."""

    def __init__(
        self, out: TextIO, as_json: bool, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.out, self.as_json, self.clock = out, as_json, clock
        self.mark = clock()  # phases run one after another: each one's time is since the last line

    def started(self, subtask: str, agent: str, role: str, retry: bool) -> None:
        self.mark = self.clock()
        doc = {"event": "call_started", "subtask": subtask, "agent": agent, "role": role}
        again = " (retry)" if retry else ""
        self.emit(doc | {"retry": retry}, f"{subtask}: {agent} working as {role}{again}")

    def ended(self, subtask: str, phase: str, ok: bool) -> None:
        now = self.clock()
        elapsed, self.mark = now - self.mark, now
        doc = {"event": "phase_ended", "subtask": subtask, "phase": phase, "ok": ok}
        verdict = "ok" if ok else "failed"
        self.emit(
            doc | {"elapsed_s": round(elapsed, 3)}, f"{subtask}: {phase} {verdict} {elapsed:.1f}s"
        )

    def emit(self, doc: dict[str, Any], text: str) -> None:
        line = files.dumps(doc).decode() if self.as_json else printable(text)
        # At once, not at exit: the point is to be seen while a call takes minutes.
        self.out.write(line + "\n")
        self.out.flush()
