"""A sandbox started ahead of the one command it is for (proc.run's `held`), so that its
namespaces and init are up while harness does other work: a run starts each call's sandbox
as the call before it in the slot ends, while that call's answer is taken and landed."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path

from harness.base.errors import HarnessError
from harness.boundary import proc, sandbox
from harness.boundary.pipes import Output


def _feed(fd: int, data: bytes) -> None:
    """Write `data` to the pipe `fd` and close it; a reader gone (the sandbox was killed)
    ends the writing."""
    try:
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(data)
    except OSError:
        pass


class Held:
    """bwrap has made the sandbox's namespaces, and its init waits for "go" and the
    command's stdin on its own before it starts the command (pidone.INIT). A fresh sandbox
    still serves one command only; this one is only started sooner. Used by proc.run or
    dropped, never both."""

    def __init__(
        self, box: sandbox.Box, argv: Sequence[str], cwd: Path, env: Mapping[str, str]
    ) -> None:
        self.key = Held.key_for(box, argv, cwd, env)
        self._stack = ExitStack()
        self._proc: subprocess.Popen[bytes] | None = None
        told, go = os.pipe()
        self._go: int | None = go
        try:
            self._boxed = proc.Boxed(self._stack, box, argv, cwd, held=True)
            self._out = Output(self._stack, proc.CAP)
            pipes = (self._out.pipe(None, ("stdout",)), self._out.pipe(None, ("stderr",)))
            if proc.stopping():
                raise HarnessError(f"not starting {argv[0]!r}: harness is stopping")
            self._proc = proc.spawn(argv, cwd, env, self._boxed, self._out, (told, *pipes))
        except BaseException:
            self.drop()
            raise
        finally:
            os.close(told)

    @staticmethod
    def key_for(
        box: sandbox.Box, argv: Sequence[str], cwd: Path, env: Mapping[str, str]
    ) -> tuple[object, ...]:
        """What a command must share with a held sandbox to be started in it."""
        return box, tuple(argv), cwd, tuple(sorted(env.items()))

    def go(
        self,
        stack: ExitStack,
        stdin: Path | None,
        stdout: Path | None,
        stderr: Path | None,
        cap: int,
    ) -> tuple[subprocess.Popen[bytes], Output, proc.Boxed] | None:
        """Start the command on `stdin`, its output going to `stdout` and `stderr`; None
        (the sandbox dropped) when it cannot: it ended, or the streams are not two files."""
        go, started = self._go, self._proc
        if go is None or started is None or stdin is None or stdout is None or stderr is None:
            self.drop()
            return None
        if stdout.resolve() == stderr.resolve() or started.poll() is not None:
            self.drop()
            return None
        try:
            data = b"go\n" + stdin.read_bytes()
            self._out.into([stdout, stderr], cap)
        except BaseException:
            self.drop()
            raise
        self._go = None
        stack.enter_context(self._stack)  # from here on, run() owns the sandbox
        # From a thread: a large stdin fills the pipe until init reads it, and run() must be
        # waiting meanwhile, its timeouts running.
        threading.Thread(target=_feed, args=(go, data), daemon=True).start()
        return started, self._out, self._boxed

    def drop(self) -> None:
        """End the sandbox unused: its init never started anything in it."""
        if self._go is not None:
            os.close(self._go)
            self._go = None
        try:
            if self._proc is not None:
                proc.end(self._proc)
        finally:
            self._stack.close()
