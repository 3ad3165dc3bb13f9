"""Live progress of `run` and `next`: a line as a worker call starts and as each phase ends,
or, on a terminal, a board of the subtasks redrawn in place; and the step's notices (tell).

Elapsed time is wall time from an injected clock. It is printed and never recorded: nothing
here reaches the log, an exchange or a commit, which stay reproducible bit for bit.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from harness.base import files
from harness.base.printable import printable


class Live(Protocol):
    def started(self, subtask: str, agent: str, role: str, retry: bool) -> None:
        """A worker process is about to be started for `subtask` (its retry, if `retry`)."""

    def ended(self, subtask: str, phase: str, ok: bool, outcome: str | None = None) -> None:
        """A phase of `subtask`'s step ended (call, gate, apply, build, test, acceptance,
        commit), passed or failed; `outcome` says how in a word when that is neither (a
        supervisor's REORIENT: "reoriented")."""

    def returned(self, subtask: str) -> None:
        """With several calls in flight, `subtask`'s worker process ended; its answer is
        taken in plan order (from a pool thread)."""


class Silent:
    """The default: a step tells nobody (replay, --quiet)."""

    def started(self, subtask: str, agent: str, role: str, retry: bool) -> None:
        pass

    def ended(self, subtask: str, phase: str, ok: bool, outcome: str | None = None) -> None:
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

    def ended(self, subtask: str, phase: str, ok: bool, outcome: str | None = None) -> None:
        elapsed = self.since(subtask)
        doc = {"event": "phase_ended", "subtask": subtask, "phase": phase, "ok": ok}
        if outcome is not None:
            doc["outcome"] = outcome
        verdict = outcome or ("ok" if ok else "failed")
        self.emit(
            doc | {"elapsed_s": round(elapsed, 3)}, f"{subtask}: {phase} {verdict} {elapsed:.1f}s"
        )

    def emit(self, doc: dict[str, Any], text: str) -> None:
        line = files.dumps(doc).decode() if self.as_json else printable(text)
        # At once, not at exit: the point is to be seen while a call takes minutes.
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()


Say = Callable[[str, str | None], None]


@contextmanager
def shown(quiet: bool, as_json: bool) -> Iterator[tuple[Live, Say]]:
    """What `run` and `next` show as they go, and how they print a result line (naming the
    subtask it says is done, if any): nothing with `quiet`; with `as_json` JSON lines on
    stdout, where every line parses; a board where stderr is a terminal that can draw one;
    else lines on stderr."""
    if quiet:
        yield Silent(), _print
    elif as_json or not sys.stderr.isatty() or os.environ.get("TERM") == "dumb":
        yield Lines(sys.stdout if as_json else sys.stderr, as_json), _print
    else:
        with Board(sys.stderr, sys.stdout) as board, _Above(board):
            yield board, board.say


def _print(line: str, subtask: str | None) -> None:
    print(line, flush=True)


@dataclass
class _Row:
    agent: str
    state: str
    began: float
    stopped: float | None = None  # done or failed: its time stands still

    def elapsed(self, now: float) -> float:
        return (now if self.stopped is None else self.stopped) - self.began


class Board:
    """Progress on a terminal: a row per subtask (its agent, time since its call started and
    state), redrawn in place at each change and, `with` it, a few times a second so that
    times tick while calls run. Leaving the `with` (or `close`) leaves the last drawing."""

    EVERY_S = 0.3

    def __init__(
        self, out: TextIO, results: TextIO, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.out, self.results, self.clock = out, results, clock
        self.began = clock()
        self.rows: dict[str, _Row] = {}
        self.drawn = 0  # lines of the last drawing, which ends where the cursor is
        self.closed = False
        self.lock = threading.Lock()  # pool threads and the ticker draw too
        self.stop = threading.Event()
        self.ticker = threading.Thread(target=self.tick, name="harness-board", daemon=True)

    def __enter__(self) -> Board:
        self.ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def tick(self) -> None:
        while not self.stop.wait(self.EVERY_S):
            self.draw()

    def close(self) -> None:
        self.stop.set()
        if self.ticker.is_alive():
            self.ticker.join()
        with self.lock:
            self.paint()
            # Whatever comes next (a pool thread's last word, an error) goes below it.
            self.closed = True

    # -- Live ------------------------------------------------------------------------------

    def started(self, subtask: str, agent: str, role: str, retry: bool) -> None:
        again = " (retry)" if retry else ""
        with self.lock:
            # A retry keeps the row's place and times the new call.
            self.rows[subtask] = _Row(agent, f"working as {role}{again}", self.clock())
            self.paint()

    def returned(self, subtask: str) -> None:
        with self.lock:
            self.set(subtask, "answered, waiting its turn", stopped=False)
            self.paint()

    def ended(self, subtask: str, phase: str, ok: bool, outcome: str | None = None) -> None:
        with self.lock:
            verdict = outcome or ("ok" if ok else "failed")
            self.set(subtask, f"{phase} {verdict}", stopped=not ok)
            self.paint()

    # -- drawing ---------------------------------------------------------------------------

    def say(self, line: str, subtask: str | None) -> None:
        """Print `line` on the results' stream above the board (and `subtask` is done), so
        that on one terminal the two never cut into each other."""
        self.above(line, self.results, subtask)

    def above(self, line: str, out: TextIO, subtask: str | None = None) -> None:
        with self.lock:
            if not self.closed:
                self.out.write(self.erasing())
                self.out.flush()
                self.drawn = 0
            out.write(line + "\n")
            out.flush()
            if subtask is not None:
                self.set(subtask, "done", stopped=True)
            self.paint()

    def draw(self) -> None:
        with self.lock:
            self.paint()

    def set(self, subtask: str, state: str, stopped: bool) -> None:
        # Begun before this board was: a call taken up again after a kill.
        row = self.rows.setdefault(subtask, _Row("", state, self.began))
        row.state, row.stopped = state, self.clock() if stopped else None

    def erasing(self) -> str:
        # \r: a ^C the terminal echoed moved the cursor off the line's start.
        return f"\x1b[{self.drawn}A\r\x1b[J" if self.drawn else ""

    def paint(self) -> None:
        """Draw the rows over the last drawing; the caller holds the lock."""
        if self.closed:
            return
        rows = self.lines(*_size(self.out))
        self.out.write(self.erasing() + "".join(row + "\n" for row in rows))
        self.out.flush()
        self.drawn = len(rows)

    def lines(self, columns: int, height: int) -> list[str]:
        now = self.clock()
        rows = list(self.rows.items())
        more = []
        # A drawing taller than the screen cannot be redrawn in place: finished rows fold
        # into a count first, then the oldest.
        room = max(height - 1, 1)
        if len(rows) > room:
            order = sorted(range(len(rows)), key=lambda i: (rows[i][1].stopped is None, i))
            hidden = set(order[: len(rows) - room + 1])
            rows = [row for i, row in enumerate(rows) if i not in hidden]
            more = [f"... and {len(hidden)} more"]
        cells = [
            (printable(sid), printable(row.agent), _elapsed(row.elapsed(now)), printable(row.state))
            for sid, row in rows
        ]
        ids = max((len(c[0]) for c in cells), default=0)
        agents = max((len(c[1]) for c in cells), default=0)
        # Never the last column: some terminals wrap there at once, and the cursor would
        # move up a line short.
        drawing = [
            f"{sid:<{ids}}  {agent:<{agents}}  {took:>6}  {state}"
            for sid, agent, took, state in cells
        ]
        return [_cut(line, columns - 1) for line in drawing + more]


class _Above(io.TextIOBase):
    """stderr while a board is drawn: what else the step prints there (a notice) goes above
    the board, a line at a time, rather than under it, to be drawn over."""

    def __init__(self, board: Board) -> None:
        self.board, self.pending, self.saved = board, "", sys.stderr

    def __enter__(self) -> _Above:
        sys.stderr = self
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stderr = self.saved
        if self.pending:
            self.board.above(self.pending, self.board.out)

    def write(self, text: str) -> int:
        *whole, self.pending = (self.pending + text).split("\n")
        for line in whole:
            self.board.above(line, self.board.out)
        return len(text)


def _size(out: TextIO) -> tuple[int, int]:
    """Columns and lines of `out`'s terminal."""
    try:
        columns, lines = os.get_terminal_size(out.fileno())
    except (OSError, ValueError):  # no descriptor: a stream in memory
        columns = lines = 0
    if columns and lines:
        return columns, lines
    # A new pseudo-terminal says 0 x 0: $COLUMNS and $LINES, the process's terminal or 80 x 24.
    guess = shutil.get_terminal_size()
    return guess.columns, guess.lines


def _cut(text: str, columns: int) -> str:
    """`text` up to `columns` cells of a terminal: a wide character takes two, a combining
    one none."""
    used = 0
    for at, char in enumerate(text):
        if not unicodedata.combining(char):
            used += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
        if used > columns:
            return text[:at]
    return text


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s"


def tell(line: str) -> None:
    """A notice the step cannot return, since it goes on: printed at once, one line."""
    print("harness: " + printable(line), file=sys.stderr)
