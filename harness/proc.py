"""The one chokepoint for every subprocess harness starts: clean env, files for I/O, group kill."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from harness import sandbox
from harness.errors import HarnessError


@dataclass(frozen=True)
class Result:
    code: int  # exit status; -signum when a signal ended the process
    timed_out: str | None  # None, "soft" (SIGTERM sufficed) or "hard" (SIGKILL was needed)
    duration_s: float
    leaked: bool = False  # a descendant was still alive when the command itself ended
    survivors: tuple[str, ...] = ()  # their names, when a sandbox could tell


def base_env(
    home: Path, allow: Iterable[str] = (), source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """PATH, HOME, TZ=UTC, LC_ALL=C plus the allowlisted names present in `source`."""
    src = os.environ if source is None else source
    env = {"PATH": src.get("PATH", os.defpath), "HOME": str(home), "TZ": "UTC", "LC_ALL": "C"}
    for name in allow:
        # GIT_DIR and friends would point a worker's git at the wrong repository, and the
        # fixed keys must stay fixed for reproducibility, so neither can be allowlisted.
        if name in src and name not in env and not name.startswith("GIT_"):
            env[name] = src[name]
    return env


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
) -> Result:
    """Run `argv` (no shell) in a new session; no descendant in its group outlives the call.

    With a `box` the command runs inside that sandbox, and nothing it started outlives it:
    whatever is alive in its PID namespace when it ends is reported as a leak and killed.
    """
    if not argv:
        raise HarnessError("cannot execute an empty command")
    stages = sorted(
        (at, sig, name)
        for at, sig, name in ((soft_s, signal.SIGTERM, "soft"), (hard_s, signal.SIGKILL, "hard"))
        if at is not None
    )
    with ExitStack() as stack:
        # Files rather than pipes: a descendant holding a pipe open can't hang us, and a
        # worker can never block waiting for input that will not come.
        fin: IO[bytes] | int = (
            stack.enter_context(stdin.open("rb")) if stdin is not None else subprocess.DEVNULL
        )
        fout: IO[bytes] | int = (
            stack.enter_context(stdout.open("wb")) if stdout is not None else subprocess.DEVNULL
        )
        ferr: IO[bytes] | int = subprocess.DEVNULL
        if stderr is not None:
            # Two truncating handles on one file would overwrite each other's bytes.
            same = stdout is not None and stderr.resolve() == stdout.resolve()
            ferr = fout if same else stack.enter_context(stderr.open("wb"))
        boxed = _Boxed(stack, box, argv, cwd) if box is not None else None
        start = time.monotonic()
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
            if boxed:
                boxed.started()
        timed_out: str | None = None
        leaked = False
        try:
            while True:
                if not stages:
                    proc.wait()
                    break
                at, sig, stage = stages.pop(0)
                try:
                    proc.wait(timeout=max(0.0, start + at - time.monotonic()))
                    break
                except subprocess.TimeoutExpired:
                    if proc.poll() is not None:
                        break  # ended on its own at the deadline: not a timeout
                    if boxed and sig == signal.SIGTERM:
                        boxed.terminate()
                    else:
                        _kill_group(proc.pid, sig)
                    timed_out = stage
                    if stage == "hard":
                        stages.clear()
            if boxed is None:
                leaked = timed_out is None and _group_alive(proc.pid)
        finally:
            # The group id outlives its leader while any member lives, so this reaches
            # descendants even after the direct child was reaped; a group id is not reused
            # while any member exists. Runs on interrupts too.
            _kill_group(proc.pid, signal.SIGKILL)
            if proc.returncode is None:
                proc.wait()
        duration = time.monotonic() - start
        if boxed:
            report = sandbox.read_report(boxed.report.fileno())
            if report is not None:
                leaked = bool(report.leaked) and timed_out is None
                return Result(report.code, timed_out, duration, leaked, report.leaked)
        return Result(proc.returncode, timed_out, duration, leaked)


class _Boxed:
    """The sandbox side of one run(): its command line, the files init and bwrap report to."""

    def __init__(self, stack: ExitStack, box: sandbox.Box, argv: Sequence[str], cwd: Path) -> None:
        self.box = box
        self.report = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 -- the stack closes it
        self.info, self._info_w = os.pipe()
        stack.callback(os.close, self.info)
        os.set_blocking(self.info, False)
        self.argv = sandbox.command(box, argv, cwd, self.report.fileno(), self._info_w)
        self.fds = (self.report.fileno(), self._info_w)
        self._pid: int | None = None

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The command's environment with host paths of the box as seen inside it."""
        return {k: str(self.box.inside(Path(v))) if k == "HOME" else v for k, v in env.items()}

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
    )
