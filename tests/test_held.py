"""harness.boundary.held: a sandbox started ahead of its command runs that command as a
sandbox started for it would (same stdin, output, exit code, leaks, timeouts), or is
dropped with nothing started; one that can no longer be used gives way to a fresh one."""

from __future__ import annotations

import hashlib
import os
import signal
import time

import pytest

from harness.base.errors import HarnessError
from harness.boundary import proc, sandbox
from harness.boundary.held import Held

pytestmark = pytest.mark.e2e  # bwrap


def ran(
    box: sandbox.Box, command: str, held: Held | None, stdin: bytes | None = b"", **limits: float
) -> tuple[proc.Result, bytes, bytes]:
    """The command run in `box` (in `held`, if given) on `stdin` (None: a file not there)."""
    folder = box.work.parent
    (folder / "stdin").unlink(missing_ok=True)
    if stdin is not None:
        (folder / "stdin").write_bytes(stdin)
    res = proc.run(
        ["/bin/sh", "-c", command],
        cwd=box.work,
        env=proc.base_env(box.home),
        stdin=folder / "stdin",
        stdout=folder / "out",
        stderr=folder / "err",
        box=box,
        held=held,
        **limits,  # type: ignore[arg-type]
    )
    return res, (folder / "out").read_bytes(), (folder / "err").read_bytes()


def held(box: sandbox.Box, command: str) -> Held:
    return Held(box, ["/bin/sh", "-c", command], box.work, proc.base_env(box.home))


def used(ready: Held) -> bool:
    """Whether the command ran in `ready`: its bwrap exited as init did, where a sandbox
    dropped (or given up for a fresh one) was killed."""
    return ready._proc is not None and (ready._proc.returncode or 0) >= 0


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()[0] != b"Z"
    except FileNotFoundError:
        return False


COMMANDS = [
    "cat; echo err >&2; exit 3",
    "[ -f /dev/stdin ] && ! [ -p /dev/stdin ] && echo a-file; wc -c",  # stdin is a file
    "setsid sleep 60 & echo started",  # a leak, reported and killed
    "pwd; echo $HOME; id -u",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_held_sandbox_runs_its_command_as_a_fresh_one_does(
    box: sandbox.Box, command: str
) -> None:
    data = b"line one\nline two\n"
    fresh = ran(box, command, None, data)
    ready = held(box, command)
    ahead = ran(box, command, ready, data)
    assert used(ready)
    # A leak's name is the daemon's at the moment init looked: `setsid` or the `sleep` it
    # became, whichever sandbox ran it.
    assert (ahead[0].code, ahead[0].leaked, bool(ahead[0].survivors), ahead[1:]) == (
        fresh[0].code,
        fresh[0].leaked,
        bool(fresh[0].survivors),
        fresh[1:],
    )
    assert ahead[0].code in (0, 3)


def test_a_large_stdin_reaches_the_command_whole(box: sandbox.Box) -> None:
    data = os.urandom(3 << 20)  # far past a pipe's buffer
    ready = held(box, "sha256sum")
    res, out, _ = ran(box, "sha256sum", ready, data)
    assert (
        used(ready)
        and res.code == 0
        and out.split()[0].decode() == hashlib.sha256(data).hexdigest()
    )


def test_its_timeouts_run_from_the_start_of_the_command_not_of_the_sandbox(
    box: sandbox.Box,
) -> None:
    ready = held(box, "sleep 0.5; echo done")
    time.sleep(1.5)  # longer than the hard timeout below: the sandbox is not what is timed
    res, out, _ = ran(box, "sleep 0.5; echo done", ready, hard_s=1.2)
    assert used(ready) and res.timed_out is None and out == b"done\n"
    res, _, _ = ran(box, "sleep 5", held(box, "sleep 5"), soft_s=0.3, hard_s=3)
    assert res.timed_out == "soft"


def test_dropped_it_starts_nothing_and_leaves_no_process(box: sandbox.Box) -> None:
    ready = held(box, "touch $HOME/ran")
    pid = ready._proc.pid if ready._proc is not None else 0
    time.sleep(0.3)  # init is up and waiting
    assert alive(pid)
    ready.drop()
    assert not alive(pid) and not (box.home / "ran").exists()


def test_one_whose_sandbox_died_gives_way_to_a_fresh_one(box: sandbox.Box) -> None:
    ready = held(box, "cat")
    assert ready._proc is not None
    os.killpg(ready._proc.pid, signal.SIGKILL)
    ready._proc.wait()
    res, out, _ = ran(box, "cat", ready, b"through a fresh sandbox")
    assert res.code == 0 and out == b"through a fresh sandbox" and not used(ready)


def test_one_output_file_for_both_streams_is_run_afresh(box: sandbox.Box) -> None:
    ready = held(box, "echo out; echo err >&2")
    pid = ready._proc.pid if ready._proc is not None else 0
    folder = box.work.parent
    res = proc.run(
        ["/bin/sh", "-c", "echo out; echo err >&2"],
        cwd=box.work,
        env=proc.base_env(box.home),
        stdout=folder / "both",
        stderr=folder / "both",
        box=box,
        held=ready,
    )
    assert res.code == 0 and (folder / "both").read_text() == "out\nerr\n"
    assert not alive(pid)  # the held one was dropped, not left waiting


def test_stopping_harness_ends_held_sandboxes_and_starts_none(box: sandbox.Box) -> None:
    ready = held(box, "echo hi")
    pid = ready._proc.pid if ready._proc is not None else 0
    proc.stop_all()
    try:
        ready._proc.wait(timeout=5) if ready._proc is not None else None
        assert not alive(pid)
        with pytest.raises(HarnessError, match="harness is stopping"):
            ran(box, "echo hi", ready)
        with pytest.raises(HarnessError, match="harness is stopping"):
            held(box, "echo hi")
    finally:
        proc.allow_all()


def test_a_stdin_that_cannot_be_read_fails_as_it_would_fresh_and_ends_the_sandbox(
    box: sandbox.Box,
) -> None:
    ready = held(box, "cat")
    pid = ready._proc.pid if ready._proc is not None else 0
    for given in (None, ready):
        with pytest.raises(FileNotFoundError):
            ran(box, "cat", given, None)
    assert not alive(pid)
