"""Behaviour of the subprocess chokepoint: env, I/O files, output caps, timeouts, group kill."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.base.errors import HarnessError, InvalidInput
from harness.boundary import pipes, proc, sandbox
from harness.boundary.proc import Result, base_env, capture, mark_cut, run, shell


def _env(tmp_path: Path) -> dict[str, str]:
    return base_env(tmp_path)


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """True once `pid` is dead; a zombie counts, since init may be slow (or absent) to reap."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        # The comm field may hold spaces or parens, so the state is found after the last ')'.
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return True
        time.sleep(0.05)
    return False


def _alive(pid: int) -> bool:
    return not _gone(pid, within_s=0.0)


def test_base_env_is_exactly_the_fixed_keys_plus_allowlist(tmp_path: Path) -> None:
    source = {
        "PATH": "/bin:/usr/bin",
        "HOME": "/root",
        "TZ": "Europe/Paris",
        "LANG": "fr_FR.UTF-8",
        "API_TOKEN": "t0k",
        "GIT_DIR": "/elsewhere/.git",
        "OTHER": "x",
    }
    env = base_env(tmp_path, allow=["API_TOKEN", "MISSING", "GIT_DIR", "TZ"], source=source)
    assert env == {
        "PATH": "/bin:/usr/bin",
        "HOME": str(tmp_path),
        "TZ": "UTC",
        "LC_ALL": "C",
        "HARNESS_PYTHON": sys.executable,
        "API_TOKEN": "t0k",
    }


def test_base_env_defaults_to_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_ALLOWED", "yes")
    monkeypatch.setenv("HARNESS_CANARY_SECRET", "s3cr3t-canary")
    env = base_env(tmp_path, allow=["HARNESS_ALLOWED"])
    assert env["HARNESS_ALLOWED"] == "yes"
    assert env["PATH"] == os.environ["PATH"]
    assert "HARNESS_CANARY_SECRET" not in env


def test_child_sees_only_base_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_CANARY_SECRET", "s3cr3t-canary")
    monkeypatch.setenv("HARNESS_ALLOWED", "visible")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "not-a-repo"))
    monkeypatch.setenv("GIT_WORK_TREE", str(tmp_path))
    out = tmp_path / "env.txt"
    env = base_env(tmp_path / "home", allow=["HARNESS_ALLOWED", "GIT_DIR"])
    res = run(["env"], cwd=tmp_path, env=env, stdout=out, hard_s=10)
    assert res == Result(0, None, res.duration_s)
    text = out.read_text()
    assert "s3cr3t-canary" not in text
    seen = dict(line.split("=", 1) for line in text.splitlines())
    assert seen == {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "TZ": "UTC",
        "LC_ALL": "C",
        "HARNESS_PYTHON": sys.executable,
        "HARNESS_ALLOWED": "visible",
    }


def test_stdin_file_arrives_exactly_then_eof(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 64 + b"no trailing newline"
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    src.write_bytes(payload)
    # `cat` only exits once it reads EOF, so a clean exit well before hard_s proves EOF came.
    res = run(["cat"], cwd=tmp_path, env=_env(tmp_path), stdin=src, stdout=out, hard_s=10)
    assert (res.code, res.timed_out) == (0, None)
    assert out.read_bytes() == payload


def test_no_stdin_means_dev_null(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = run(["cat"], cwd=tmp_path, env=_env(tmp_path), stdout=out, hard_s=10)
    assert (res.code, res.timed_out) == (0, None)
    assert out.read_bytes() == b""


def test_stdout_and_stderr_go_to_their_files(tmp_path: Path) -> None:
    out, err = tmp_path / "out", tmp_path / "err"
    out.write_text("stale content that must be truncated away\n")
    res = shell(
        "echo to-out; echo to-err >&2; exit 3",
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=out,
        stderr=err,
    )
    assert res.code == 3
    assert out.read_text() == "to-out\n"
    assert err.read_text() == "to-err\n"


def test_same_file_for_stdout_and_stderr_keeps_both(tmp_path: Path) -> None:
    log = tmp_path / "log"
    res = shell(
        "echo one; echo two >&2; echo three",
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=log,
        stderr=log,
    )
    assert res.code == 0
    assert log.read_text() == "one\ntwo\nthree\n"


def test_cwd_is_used(tmp_path: Path) -> None:
    code, out, _ = capture(["pwd"], cwd=tmp_path, env=_env(tmp_path))
    assert (code, out) == (0, f"{tmp_path}\n")


def test_nonzero_exit_is_reported_not_raised(tmp_path: Path) -> None:
    res = run(["sh", "-c", "exit 7"], cwd=tmp_path, env=_env(tmp_path))
    assert (res.code, res.timed_out) == (7, None)


def test_the_end_of_a_command_wakes_the_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command's end wakes harness's wait through its pidfd: a silent command is waited
    for in one wake or two, not looked for again and again (each look was a chance to
    notice the end up to POLL_S late)."""
    wakes: list[float] = []
    copy = pipes.Output._copy

    def counted(self: pipes.Output, timeout: float) -> None:
        wakes.append(timeout)
        copy(self, timeout)

    monkeypatch.setattr(pipes.Output, "_copy", counted)
    monkeypatch.setattr(pipes, "POLL_S", 10.0)
    res = run(["sleep", "0.3"], cwd=tmp_path, env=_env(tmp_path))
    assert res.code == 0
    assert 1 <= len(wakes) <= 3, wakes


def test_signal_death_gives_negative_code(tmp_path: Path) -> None:
    res = shell("kill -USR1 $$", cwd=tmp_path, env=_env(tmp_path), hard_s=10)
    assert (res.code, res.timed_out) == (-signal.SIGUSR1, None)


def test_soft_timeout_ends_with_sigterm(tmp_path: Path) -> None:
    res = run(["sleep", "30"], cwd=tmp_path, env=_env(tmp_path), soft_s=0.3, hard_s=20)
    assert res.timed_out == "soft"
    assert res.code == -signal.SIGTERM


def test_hard_timeout_when_sigterm_is_ignored(tmp_path: Path) -> None:
    res = shell('trap "" TERM; sleep 30', cwd=tmp_path, env=_env(tmp_path), soft_s=0.3, hard_s=0.8)
    assert res.timed_out == "hard"
    assert res.code == -signal.SIGKILL


def test_a_command_silent_for_idle_s_is_stopped_as_stuck(tmp_path: Path) -> None:
    """It printed, then nothing: stopped long before its soft timeout."""
    argv = ["/bin/sh", "-c", "echo started; sleep 30"]
    res = run(argv, cwd=tmp_path, env=_env(tmp_path), soft_s=20, hard_s=25, idle_s=0.5,
              stdout=tmp_path / "out")  # fmt: skip
    assert res.timed_out == "idle" and res.code == -signal.SIGTERM
    assert (tmp_path / "out").read_text() == "started\n"


def test_a_command_that_keeps_printing_is_never_idle(tmp_path: Path) -> None:
    """The twin: silent for less than idle_s at a time, however long it runs."""
    script = "for i in 1 2 3 4 5 6 7 8; do echo $i; sleep 0.2; done"
    argv = ["/bin/sh", "-c", script]
    res = run(argv, cwd=tmp_path, env=_env(tmp_path), idle_s=1.0, stdout=tmp_path / "out")
    assert res.timed_out is None and res.code == 0
    assert (tmp_path / "out").read_text().split() == [str(i) for i in range(1, 9)]


def test_a_stuck_command_that_ignores_sigterm_is_killed_after_a_grace(tmp_path: Path) -> None:
    argv = ["/bin/sh", "-c", 'trap "" TERM; sleep 30']
    res = run(argv, cwd=tmp_path, env=_env(tmp_path), idle_s=0.3, hard_s=2)
    assert res.timed_out == "idle" and res.code == -signal.SIGKILL


def test_hard_only_skips_sigterm(tmp_path: Path) -> None:
    # A TERM handler would write the marker; with only hard_s it must never run.
    marker = tmp_path / "termed"
    res = shell(
        f'trap "touch {marker}; exit 0" TERM; sleep 30 & wait',
        cwd=tmp_path,
        env=_env(tmp_path),
        hard_s=0.5,
    )
    assert (res.code, res.timed_out) == (-signal.SIGKILL, "hard")
    assert not marker.exists()


def test_sigterm_handled_cleanly_still_counts_as_soft(tmp_path: Path) -> None:
    res = shell(
        'trap "exit 0" TERM; sleep 30 & wait',
        cwd=tmp_path,
        env=_env(tmp_path),
        soft_s=0.3,
        hard_s=20,
    )
    assert (res.code, res.timed_out) == (0, "soft")


def test_grandchild_killed_on_hard_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    res = shell(
        f'trap "" TERM; sleep 60 & echo $! > {pidfile}; wait',
        cwd=tmp_path,
        env=_env(tmp_path),
        hard_s=0.5,
    )
    assert res.timed_out == "hard"
    assert _gone(int(pidfile.read_text()))


def test_grandchild_killed_after_child_exits_normally(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    res = shell(f"sleep 60 & echo $! > {pidfile}", cwd=tmp_path, env=_env(tmp_path), hard_s=20)
    assert (res.code, res.timed_out) == (0, None)
    assert _gone(int(pidfile.read_text()))


def test_grandchild_holding_stdout_cannot_hang_the_call(tmp_path: Path) -> None:
    # With pipes this would block until the sleeper closed its copy of stdout.
    pidfile, out = tmp_path / "pid", tmp_path / "out"
    res = shell(
        f"echo hi; sleep 60 & echo $! > {pidfile}",
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=out,
        hard_s=20,
    )
    # Waiting on the sleeper's copy of stdout would have run into the hard timeout.
    assert (res.code, res.timed_out) == (0, None)
    assert out.read_text() == "hi\n"
    assert _gone(int(pidfile.read_text()))


def test_setsid_grandchild_is_outside_the_group(tmp_path: Path) -> None:
    # Documents the limit of group kill: a descendant that starts its own session escapes.
    pidfile = tmp_path / "pid"
    res = shell(f"setsid sleep 30 & echo $! > {pidfile}", cwd=tmp_path, env=_env(tmp_path))
    assert res.code == 0
    pid = int(pidfile.read_text())
    try:
        assert _alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


def test_missing_program_raises_naming_it(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="no-such-program-xyz") as info:
        run(["no-such-program-xyz", "--flag"], cwd=tmp_path, env=_env(tmp_path))
    assert "\n" not in str(info.value)
    assert info.value.exit_code == 4


def test_non_executable_program_raises_naming_it(tmp_path: Path) -> None:
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    with pytest.raises(HarnessError, match="not-executable"):
        run([str(script)], cwd=tmp_path, env=_env(tmp_path))


def test_missing_cwd_raises(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="true"):
        run(["true"], cwd=tmp_path / "absent", env=_env(tmp_path))


def test_empty_argv_raises(tmp_path: Path) -> None:
    with pytest.raises(HarnessError):
        run([], cwd=tmp_path, env=_env(tmp_path))


@pytest.mark.parametrize("where", ["argument", "name", "value"])
def test_a_nul_in_a_command_is_bad_input_and_starts_nothing(tmp_path: Path, where: str) -> None:
    """exec takes C strings: Popen raised ValueError, which crashed a run (exit 4)."""
    argv, env = ["sh", "-c", "touch started"], _env(tmp_path)
    if where == "argument":
        argv.append("a\0b")
    else:
        env |= {"A\0": "1"} if where == "name" else {"A": "\0"}
    with pytest.raises(InvalidInput, match=r"^cannot execute 'sh': an argument or variable holds"):
        run(argv, cwd=tmp_path, env=env)
    assert not (tmp_path / "started").exists()
    run(argv[:3], cwd=tmp_path, env=_env(tmp_path))  # the twin
    assert (tmp_path / "started").exists()


def test_capture_decodes_output(tmp_path: Path) -> None:
    code, out, err = capture(
        ["sh", "-c", r"printf 'h\303\251 \377\n'; echo oops >&2; exit 2"],
        cwd=tmp_path,
        env=_env(tmp_path),
    )
    assert code == 2
    assert out == "h\u00e9 \ufffd\n"
    assert err == "oops\n"


def test_capture_timeout_kills(tmp_path: Path) -> None:
    code, _, _ = capture(["sleep", "30"], cwd=tmp_path, env=_env(tmp_path), timeout_s=0.3)
    assert code == -signal.SIGKILL


def test_a_descendant_alive_after_the_command_ends_is_a_leak(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    leaky = run(["sh", "-c", "sleep 30 & exit 0"], cwd=tmp_path, env=env)
    assert leaky.code == 0 and leaky.leaked
    tidy = run(["sh", "-c", "sleep 0.1 & wait"], cwd=tmp_path, env=env)
    assert tidy.code == 0 and not tidy.leaked


# -- bounded output -----------------------------------------------------------------------

CAP = 1001  # not a multiple of any line length below, so the cut lands mid-line


def _lines(text: bytes, size: int) -> bytes:
    """What `yes <text> | head -c <size>` prints."""
    return (text + b"\n") * (size // (len(text) + 1)) + (text + b"\n")[: size % (len(text) + 1)]


def test_a_flood_on_both_streams_is_cut_at_the_cap_and_drained(tmp_path: Path) -> None:
    # Far beyond a pipe's buffer: the command only ends if harness keeps reading.
    out, err = tmp_path / "out", tmp_path / "err"
    res = shell(
        "yes out | head -c 20000000; yes err | head -c 20000000 >&2",
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=out,
        stderr=err,
        hard_s=60,
        cap=CAP,
    )
    assert (res.code, res.timed_out, res.truncated) == (0, None, ("stdout", "stderr"))
    assert out.read_bytes() == _lines(b"out", CAP)
    assert err.read_bytes() == _lines(b"err", CAP)


@pytest.mark.parametrize("size", [0, CAP - 1, CAP, CAP + 1])
def test_output_up_to_the_cap_is_kept_whole(tmp_path: Path, size: int) -> None:
    out, err = tmp_path / "out", tmp_path / "err"
    res = shell(
        f"yes x | head -c {size}; echo e >&2",
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=out,
        stderr=err,
        cap=CAP,
    )
    assert res.truncated == (("stdout",) if size > CAP else ())
    assert out.read_bytes() == _lines(b"x", min(size, CAP))
    assert err.read_bytes() == b"e\n"


def test_a_shared_file_has_one_cap_and_keeps_the_order_of_writes(tmp_path: Path) -> None:
    log = tmp_path / "log"
    res = shell(
        "yes a | head -c 600; yes b | head -c 600 >&2; echo c",
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=log,
        stderr=log,
        cap=CAP,
    )
    assert res.truncated == ("stdout", "stderr")
    assert log.read_bytes() == _lines(b"a", 600) + _lines(b"b", CAP - 600)


def test_a_timeout_still_fires_while_the_command_floods(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = run(["yes"], cwd=tmp_path, env=_env(tmp_path), stdout=out, soft_s=0.3, hard_s=20, cap=CAP)
    assert (res.code, res.timed_out, res.truncated) == (-signal.SIGTERM, "soft", ("stdout",))
    assert out.read_bytes() == _lines(b"y", CAP)


@pytest.mark.parametrize("daemon", ["sleep 60", "yes"], ids=["idle", "writing"])
def test_a_daemon_outside_the_group_holding_stdout_cannot_hang_the_call(
    tmp_path: Path, daemon: str
) -> None:
    pidfile, out = tmp_path / "pid", tmp_path / "out"
    res = shell(
        f"yes x | head -c 5000; setsid {daemon} & echo $! > {pidfile}",
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=out,
        cap=CAP,
    )
    pid = int(pidfile.read_text())
    try:
        # Still alive, so the call did not wait for it to close its copy of the pipe.
        assert _alive(pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert (res.code, res.truncated) == (0, ("stdout",))
    assert out.read_bytes() == _lines(b"x", CAP)


@pytest.mark.parametrize("tail", ["", "; setsid yes & exit 0"], ids=["command", "daemon"])
def test_a_flood_in_the_sandbox_is_cut_at_the_cap(box: sandbox.Box, tail: str) -> None:
    out, err = box.work.parent / "out", box.work.parent / "err"
    res = shell(
        f"head -c 20000000 /dev/zero; head -c 20000000 /dev/zero >&2{tail}",
        cwd=box.work,
        env=base_env(box.home),
        stdout=out,
        stderr=err,
        hard_s=60,
        box=box,
        cap=CAP,
    )
    assert (res.code, res.timed_out, res.truncated) == (0, None, ("stdout", "stderr"))
    assert res.leaked == bool(tail)
    assert out.read_bytes() == err.read_bytes() == bytes(CAP)


def test_mark_cut_ends_the_file_with_a_note(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_bytes(b"partial li")
    mark_cut(log, CAP)
    assert log.read_bytes() == b"partial li\n[harness: output cut at 1001 bytes]\n"


def test_stop_all_kills_a_running_command_and_refuses_new_ones_until_allowed(
    tmp_path: Path,
) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(run, sleeper, cwd=tmp_path, env=_env(tmp_path))
        deadline = time.monotonic() + 10
        while not proc._LIVE and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.stop_all()
        try:
            assert running.result(timeout=10).code == -signal.SIGKILL
            with pytest.raises(HarnessError, match="harness is stopping"):
                run([sys.executable, "-c", "pass"], cwd=tmp_path, env=_env(tmp_path))
        finally:
            proc.allow_all()
    # Its twin: allowed again, the same command runs.
    assert run([sys.executable, "-c", "pass"], cwd=tmp_path, env=_env(tmp_path)).code == 0
