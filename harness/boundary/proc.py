"""The one chokepoint for every subprocess harness starts: clean env, bounded output, group kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from harness.base.errors import HarnessError, InvalidInput
from harness.boundary import pidone, sandbox
from harness.boundary.pipes import Output

CAP = 64 << 20  # bytes of each output stream kept when the caller names no cap
GRACE_S = 1.0  # how long output may still arrive once the command is over
IDLE_GRACE_S = 5.0  # how long a command found stuck has to stop before it is killed


@dataclass(frozen=True)
class Result:
    code: int  # exit status; -signum when a signal ended the process
    # None, "soft" (SIGTERM sufficed), "idle" (silent too long; SIGTERM sufficed) or "hard"
    # (SIGKILL was needed)
    timed_out: str | None
    duration_s: float
    leaked: bool = False  # a descendant was still alive when the command itself ended
    survivors: tuple[str, ...] = ()  # their names, when a sandbox could tell
    truncated: tuple[str, ...] = ()  # "stdout", "stderr": streams that went past the cap
    over: str | None = None  # the sandbox's limit (spec/limits.py) it went over, and was ended at


def base_env(
    home: Path, allow: Iterable[str] = (), source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """PATH, HOME, TZ=UTC, LC_ALL=C, HARNESS_PYTHON (the Python running harness, so a
    command or launcher written once finds it on any machine) plus the allowlisted names
    present in `source`."""
    src = os.environ if source is None else source
    env = {
        "PATH": src.get("PATH", os.defpath),
        "HOME": str(home),
        "TZ": "UTC",
        "LC_ALL": "C",
        "HARNESS_PYTHON": sys.executable,
    }
    for name in allow:
        # GIT_DIR and friends would point a worker's git at the wrong repository, the fixed
        # keys must stay fixed for reproducibility, and a signing key's passphrase is no
        # worker's business (`attest --sign`), so none can be allowlisted.
        if name in src and name not in env and not name.startswith(("GIT_", "HARNESS_SIGNING_")):
            env[name] = src[name]
    return env


# Groups of commands running now: several run at once when a run has calls in flight.
_LIVE: set[int] = set()
_LIVE_LOCK = threading.Lock()
_STOPPED = threading.Event()  # set from stop_all until allow_all: nothing may start


def stopping() -> bool:
    """Whether harness is stopping (stop_all): no command may start."""
    return _STOPPED.is_set()


def pause(seconds: float) -> None:
    """Wait `seconds`, or less when harness is stopping (stop_all)."""
    if seconds > 0:
        _STOPPED.wait(seconds)


def stop_all() -> None:
    """Kill every command harness is running, and refuse to start any, until allow_all: a
    run leaving early (a halt, Ctrl-C) leaves no call behind, not even one a pool thread
    was about to start. Each one's own `run` then reaps it and returns."""
    _STOPPED.set()  # before the snapshot: a command registered after it sees the flag
    with _LIVE_LOCK:
        groups = sorted(_LIVE)
    for pgid in groups:
        _kill_group(pgid, signal.SIGKILL)


def allow_all() -> None:
    """Commands may start again: the threads of the run that stopped have all ended."""
    _STOPPED.clear()


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):  # the whole group is already gone
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """A live (non-zombie) process is in the group; zombies only await their reaper."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    proc_fs = Path("/proc")
    if not proc_fs.is_dir():
        return True
    for stat in proc_fs.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended while we looked
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


class Ready(Protocol):
    """A sandbox started ahead of its command (held.Held)."""

    def go(
        self,
        stack: ExitStack,
        stdin: Path | None,
        stdout: Path | None,
        stderr: Path | None,
        cap: int,
    ) -> tuple[subprocess.Popen[bytes], Output, Boxed] | None:
        """The command started in it, owned by `stack` from then on; None when it cannot
        be (the sandbox is then ended)."""


def run(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: Path | None = None,
    stdout: Path | None = None,
    stderr: Path | None = None,
    soft_s: float | None = None,
    hard_s: float | None = None,
    box: sandbox.Box | None = None,
    cap: int = CAP,
    idle_s: float | None = None,
    held: Ready | None = None,
) -> Result:
    """Run `argv` (no shell) in a new session; no descendant in its group outlives the call.

    `stdout` and `stderr` get the first `cap` bytes of each stream; the rest is read and
    dropped, and the result names the streams that were cut. With `idle_s`, a command that
    prints nothing on either for that long is stuck: stopped as at the soft timeout, and
    `timed_out` says "idle".

    With a `box` the command runs inside that sandbox, and nothing it started outlives it:
    whatever is alive in its PID namespace when it ends is reported as a leak and killed;
    one that goes over a limit of the box is ended, and `over` names the limit.
    `held`, that sandbox started ahead for this command (held.Held), is used when it still
    can be; the command is started afresh when not.
    """
    if not argv:
        raise HarnessError("cannot execute an empty command")
    # exec takes C strings: Popen would raise ValueError on the way (a registry's args).
    if any("\0" in part for part in (*argv, *env.keys(), *env.values())):
        raise InvalidInput(f"cannot execute {argv[0]!r}: an argument or variable holds a NUL")
    stages = sorted(
        (at, sig, name)
        for at, sig, name in ((soft_s, signal.SIGTERM, "soft"), (hard_s, signal.SIGKILL, "hard"))
        if at is not None
    )
    with ExitStack() as stack:
        went = None if held is None else held.go(stack, stdin, stdout, stderr, cap)
        if went is None:
            out, fin, fout, ferr = _streams(stack, cap, stdin, stdout, stderr)
            boxed = Boxed(stack, box, argv, cwd) if box is not None else None
            if _STOPPED.is_set():
                raise HarnessError(f"not starting {argv[0]!r}: harness is stopping")
            start = time.monotonic()
            proc = spawn(argv, cwd, env, boxed, out, (fin, fout, ferr))
        else:
            proc, out, boxed = went
            start = time.monotonic()
        leaked = False
        try:
            timed_out = _wait(proc, out, boxed, stages, idle_s, start)
            if boxed is None:
                leaked = timed_out is None and _group_alive(proc.pid)
        finally:
            end(proc)
        duration = time.monotonic() - start
        # Everything in the group or the sandbox is dead now, so the pipes close at once,
        # unless an uncontained daemon that left the group holds one: it gets a grace.
        out.drain(GRACE_S)
        if boxed:
            report = pidone.read_report(boxed.report.fileno())
            if report is not None:
                leaked = bool(report.leaked) and timed_out is None
                found = (report.leaked, out.cut, report.over)
                return Result(report.code, timed_out, duration, leaked, *found)
        return Result(proc.returncode, timed_out, duration, leaked, truncated=out.cut)


def _streams(
    stack: ExitStack, cap: int, stdin: Path | None, stdout: Path | None, stderr: Path | None
) -> tuple[Output, IO[bytes] | int, int, int]:
    """The command's stdin, and the pipes its stdout and stderr write to."""
    # A file, not a pipe: a worker can never block waiting for input that will not come.
    fin: IO[bytes] | int = (
        stack.enter_context(stdin.open("rb")) if stdin is not None else subprocess.DEVNULL
    )
    # Pipes harness copies from, so what a command prints is bounded while it is written.
    out = Output(stack, cap)
    same = stdout is not None and stderr is not None and stderr.resolve() == stdout.resolve()
    fout = subprocess.DEVNULL
    if stdout is not None:
        fout = out.pipe(stdout, ("stdout", "stderr") if same else ("stdout",))
    ferr = subprocess.DEVNULL
    if stderr is not None:
        # One pipe for one file: two writers would overwrite each other's bytes, and
        # the command's order of writes is kept.
        ferr = fout if same else out.pipe(stderr, ("stderr",))
    return out, fin, fout, ferr


def spawn(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    boxed: Boxed | None,
    out: Output,
    fds: tuple[IO[bytes] | int, int, int],
) -> subprocess.Popen[bytes]:
    """The command started in a new session, its group known to stop_all."""
    fin, fout, ferr = fds
    try:
        proc = subprocess.Popen(
            boxed.argv if boxed else list(argv),
            cwd=Path("/") if boxed else cwd,
            env=boxed.env(env) if boxed else dict(env),
            stdin=fin,
            stdout=fout,
            stderr=ferr,
            start_new_session=True,
            pass_fds=boxed.fds if boxed else (),
        )
    except OSError as exc:
        raise HarnessError(f"cannot execute {argv[0]!r} in {cwd}: {exc.strerror}") from None
    finally:
        out.started()
        if boxed:
            boxed.started()
    with _LIVE_LOCK:
        _LIVE.add(proc.pid)
        if _STOPPED.is_set():  # stop_all ran between the check above and here
            _kill_group(proc.pid, signal.SIGKILL)
    return proc


def _wait(
    proc: subprocess.Popen[bytes],
    out: Output,
    boxed: Boxed | None,
    stages: list[tuple[float, signal.Signals, str]],
    idle_s: float | None,
    start: float,
) -> str | None:
    """Copy the output until the command ends; the timeout that stopped it, if one did."""
    timed_out: str | None = None
    while True:
        idle_at = None if idle_s is None or timed_out else out.last + idle_s
        if not stages and idle_at is None:
            out.copy_until_exit(proc, None)
            break
        next_at = min([start + stages[0][0]] if stages else [], default=None)
        wake = min(t for t in (next_at, idle_at) if t is not None)
        if out.copy_until_exit(proc, wake - time.monotonic()):
            break  # an end exactly at the deadline is not a timeout
        if idle_s is not None and not timed_out and time.monotonic() >= out.last + idle_s:
            # Silent for idle_s: stuck. Asked to stop as at the soft timeout, then
            # killed after a grace unless the hard timeout comes first.
            if boxed:
                boxed.terminate()
            else:
                _kill_group(proc.pid, signal.SIGTERM)
            timed_out = "idle"
            hard = time.monotonic() - start + IDLE_GRACE_S
            hard = min([hard, *(at for at, _, name in stages if name == "hard")])
            stages[:] = [(hard, signal.SIGKILL, "hard")]
            continue
        if next_at is None or time.monotonic() < next_at:
            continue  # output came just in time: not idle after all
        _, sig, stage = stages.pop(0)
        if boxed and sig == signal.SIGTERM:
            boxed.terminate()
        else:
            _kill_group(proc.pid, sig)
        if timed_out != "idle":  # a stuck command stays stuck, however it ended
            timed_out = stage
        if stage == "hard":
            stages.clear()
    return timed_out


def end(proc: subprocess.Popen[bytes]) -> None:
    """Kill the command's group and reap it."""
    # The group id outlives its leader while any member lives, so this reaches
    # descendants even after the direct child was reaped; a group id is not reused
    # while any member exists. Runs on interrupts too.
    _kill_group(proc.pid, signal.SIGKILL)
    with _LIVE_LOCK:  # before the reaping: a reaped leader's id may be reused
        _LIVE.discard(proc.pid)
    if proc.returncode is None:
        proc.wait()


class Boxed:
    """The sandbox side of one run(): its command line, the files init and bwrap report to."""

    def __init__(
        self,
        stack: ExitStack,
        box: sandbox.Box,
        argv: Sequence[str],
        cwd: Path,
        held: bool = False,
    ) -> None:
        self.box = box
        self.report = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 -- the stack closes it
        self.info, self._info_w = os.pipe()
        stack.callback(os.close, self.info)
        os.set_blocking(self.info, False)
        report = self.report.fileno()
        self.argv = sandbox.command(box, argv, cwd, report, self._info_w, held)
        self.fds = (self.report.fileno(), self._info_w)
        self._pid: int | None = None

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The command's environment with host paths of the box as seen inside it, and the
        box's own programs first on PATH."""
        inside = {k: str(self.box.inside(Path(v))) if k == "HOME" else v for k, v in env.items()}
        if self.box.programs:
            inside["PATH"] = os.pathsep.join([str(sandbox.BIN), inside.get("PATH", os.defpath)])
        return inside

    def started(self) -> None:
        os.close(self._info_w)

    def terminate(self) -> None:
        """SIGTERM to the sandbox's init, which passes it to the command's group; bwrap
        itself would answer SIGTERM by killing everything at once."""
        if self._pid is None:
            with suppress(BlockingIOError):
                self._pid = sandbox.child_pid(os.read(self.info, 4096))
        if self._pid is not None:
            with suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGTERM)


def mark_cut(path: Path, cap: int) -> None:
    """End a recorded output file with a line saying harness cut it, so no reader takes
    the cut for where the command stopped."""
    with path.open("ab") as fh:
        fh.write(f"\n[harness: output cut at {cap} bytes]\n".encode())


def capture(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float = 60.0,
    box: sandbox.Box | None = None,
) -> tuple[int, str, str]:
    """Run a short command through run(); return (code, stdout, stderr) as replaced-utf-8 text."""
    with tempfile.TemporaryDirectory(prefix="harness-capture-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        res = run(argv, cwd=cwd, env=env, stdout=out, stderr=err, hard_s=timeout_s, box=box)
        return (
            res.code,
            out.read_bytes().decode("utf-8", errors="replace"),
            err.read_bytes().decode("utf-8", errors="replace"),
        )


def shell(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: Path | None = None,
    stdout: Path | None = None,
    stderr: Path | None = None,
    soft_s: float | None = None,
    hard_s: float | None = None,
    box: sandbox.Box | None = None,
    cap: int = CAP,
) -> Result:
    """Run `command` with /bin/sh -c through run()."""
    return run(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=env,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        soft_s=soft_s,
        hard_s=hard_s,
        box=box,
        cap=cap,
    )
