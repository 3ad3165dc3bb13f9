"""A command's output pipes, copied into their files while it runs: the first `cap` bytes of
each stream kept, the rest read and dropped."""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO

POLL_S = 0.05  # the longest the end of a command goes unnoticed
CHUNK = 64 << 10  # read at a time: all of the output harness ever holds in memory


@dataclass
class _Sink:
    names: tuple[str, ...]  # the streams that write to it: two when they share a file
    file: IO[bytes] | None  # None until a pipe made ahead of its command is given one
    kept: int = 0
    cut: bool = False


class Output:
    """The command's output pipes, copied into their files: the first `cap` bytes of each
    kept, the rest read and dropped so the command never blocks on a full pipe. One thread,
    one small buffer, however much the command prints."""

    def __init__(self, stack: ExitStack, cap: int) -> None:
        self._stack = stack
        self._cap = cap
        self.last = time.monotonic()  # when the command last printed anything
        self._selector = selectors.DefaultSelector()
        stack.callback(self._selector.close)
        self._sinks: list[_Sink] = []
        self._ends: list[int] = []  # the command's ends, ours to close once it has them
        stack.callback(self.started)

    def pipe(self, path: Path | None, names: tuple[str, ...]) -> int:
        """A pipe into `path` (truncated), or into the file `into` names later; returns the
        end to give the command."""
        sink = _Sink(names, None if path is None else self._stack.enter_context(path.open("wb")))
        read, write = os.pipe()
        self._stack.callback(os.close, read)
        self._ends.append(write)
        os.set_blocking(read, False)
        self._selector.register(read, selectors.EVENT_READ, sink)
        self._sinks.append(sink)
        return write

    def into(self, paths: list[Path], cap: int) -> None:
        """The files (truncated) of pipes made without one, in the order they were made, and
        the cap: for a command started ahead of its call, which prints nothing before it."""
        for sink, path in zip(self._sinks, paths, strict=True):
            sink.file = self._stack.enter_context(path.open("wb"))
        self._cap = cap
        self.last = time.monotonic()

    def started(self) -> None:
        """Our copies of the command's ends closed, so its exit brings end of file."""
        while self._ends:
            os.close(self._ends.pop())

    @property
    def cut(self) -> tuple[str, ...]:
        """The streams that went past the cap."""
        return tuple(name for sink in self._sinks if sink.cut for name in sink.names)

    def copy_until_exit(self, proc: subprocess.Popen[bytes], timeout: float | None) -> bool:
        """Copy output until `proc` ends (True) or `timeout` seconds pass (False).

        Its end wakes the wait at once through a pidfd, where Linux gives one: looked for
        every POLL_S instead, each command's end went unnoticed for up to that long, and a
        run starts hundreds of commands."""
        end = None if timeout is None else time.monotonic() + timeout
        ended = _pidfd(proc.pid)
        if ended is not None:
            self._selector.register(ended, selectors.EVENT_READ, None)
        try:
            wait = 0.0005  # short commands end fast: look often at first, as Popen.wait does
            while proc.poll() is None:
                # At least every POLL_S: a signal the kernel gave another thread is acted on
                # only when the main thread's wait returns.
                left = POLL_S if end is None else min(end - time.monotonic(), POLL_S)
                if left <= 0:
                    return False
                if ended is None:
                    left = min(left, wait)
                    wait = min(wait * 2, POLL_S)
                self._copy(left)
            return True
        finally:
            if ended is not None:
                self._selector.unregister(ended)
                os.close(ended)

    def drain(self, grace_s: float) -> None:
        """Copy what is left until every pipe is closed or `grace_s` has passed."""
        end = time.monotonic() + grace_s
        while self._selector.get_map() and (left := end - time.monotonic()) > 0:
            self._copy(left)

    def _copy(self, timeout: float) -> None:
        for key, _ in self._selector.select(timeout):
            sink: _Sink | None = key.data
            if sink is None:  # the command's pidfd: it ended
                continue
            try:
                chunk = os.read(key.fd, CHUNK)
            except BlockingIOError:
                continue
            if not chunk:
                self._selector.unregister(key.fd)
                continue
            self.last = time.monotonic()
            room = self._cap - sink.kept
            if room > 0 and sink.file is not None:
                sink.file.write(chunk[:room])
                sink.kept += min(room, len(chunk))
            sink.cut = sink.cut or len(chunk) > room


def _pidfd(pid: int) -> int | None:
    """A file descriptor that becomes readable when the process `pid` (a child not yet
    waited for) ends, or None where the kernel has no pidfd_open (before Linux 5.3)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
