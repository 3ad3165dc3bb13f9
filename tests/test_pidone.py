"""The sandbox's init holds each command to its limits: every bomb below is ended and named,
and its twin, the same work under the limit, runs to its end."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from resource import RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NPROC, getrlimit

import pytest

from harness.boundary import proc, sandbox
from harness.spec.limits import GIB, MIB, Limits

pytestmark = pytest.mark.e2e


def sh(box: sandbox.Box, command: str, **limits: int | None) -> tuple[proc.Result, str]:
    boxed = replace(box, limits=Limits().merged(limits))
    out = box.work.parent / "out"
    env = proc.base_env(box.home)
    res = proc.shell(command, cwd=box.work, env=env, stdout=out, stderr=out, box=boxed, hard_s=120)
    return res, out.read_text(errors="replace")


# Forks up to N sleepers, each a process of its own, then waits for them all.
FORK = "import os, sys, time\nfor _ in range({n}):\n    if os.fork() == 0:\n        time.sleep(1)\n        os._exit(0)\nwhile True:\n    try: os.wait()\n    except ChildProcessError: break\nprint('forked', {n})\n"  # noqa: E501


@pytest.mark.parametrize(("n", "over"), [(3000, "processes"), (300, None)])
def test_a_few_thousand_processes_are_ended_and_a_few_hundred_run(
    box: sandbox.Box, n: int, over: str | None
) -> None:
    (box.work / "fork.py").write_text(FORK.format(n=n))
    res, out = sh(box, 'exec "$HARNESS_PYTHON" -I fork.py', processes=1000)
    assert res.over == over
    if over is None:
        assert res.code == 0 and out == f"forked {n}\n"
    else:
        assert res.code == -9 and not res.leaked and "forked" not in out


# Holds N MiB, every page written, for a second.
HOLD = "import time\nb = bytearray({n} << 20)\nb[::4096] = b'x' * len(b[::4096])\ntime.sleep(1)\nprint('held', {n})\n"  # noqa: E501


# A process init may not read the smaps of: its memory counts all the same.
UNDUMPABLE = "import ctypes\nctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n"


@pytest.mark.parametrize(
    ("mib", "over", "hide"),
    [(3072, "memory", False), (3072, "memory", True), (256, None, False)],
    ids=["3GiB", "3GiB-undumpable", "256MiB"],
)
def test_gigabytes_of_memory_are_ended_and_a_few_hundred_megabytes_held(
    box: sandbox.Box, mib: int, over: str | None, hide: bool
) -> None:
    (box.work / "hold.py").write_text((UNDUMPABLE if hide else "") + HOLD.format(n=mib))
    res, out = sh(box, 'exec "$HARNESS_PYTHON" -I hold.py', memory=GIB)
    assert res.over == over
    assert (res.code, out) == ((-9, "") if over else (0, f"held {mib}\n"))


# Holds 600 MiB, then forks into sixteen processes that keep it: sixteen times 600 MiB
# resident, 600 MiB in memory.
SHARED = "import os, time\nb = bytearray(600 << 20)\nb[::4096] = b'x' * len(b[::4096])\nfor _ in range(4):\n    os.fork()\ntime.sleep(1)\nprint('shared')\n"  # noqa: E501


def test_memory_forked_processes_share_counts_once(box: sandbox.Box) -> None:
    (box.work / "shared.py").write_text(SHARED)
    res, out = sh(box, 'exec "$HARNESS_PYTHON" -I shared.py', memory=GIB)
    assert (res.code, res.over) == (0, None)
    assert out == "shared\n" * 16


@pytest.mark.parametrize(
    ("command", "over", "size"),
    [
        ("exec dd if=/dev/zero of=big bs=1M count=2048 status=none", "file_size", 64 * MIB),
        # Sparse: no disk taken, and still past the limit; the file stays as it was.
        ("exec truncate -s 10G big", "file_size", 0),
        ("exec dd if=/dev/zero of=big bs=1M count=32 status=none", None, 32 * MIB),
    ],
    ids=["2GiB", "sparse-10GiB", "32MiB"],
)
def test_a_file_past_its_size_is_stopped_at_the_limit(
    box: sandbox.Box, command: str, over: str | None, size: int
) -> None:
    res, _ = sh(box, command, file_size=64 * MIB)
    assert res.over == over
    assert (box.work / "big").stat().st_size == size
    assert res.code == (-25 if over else 0)


@pytest.mark.parametrize(("command", "over"), [("while True: pass", "cpu_s"), ("", None)])
def test_a_process_past_its_cpu_time_is_ended(
    box: sandbox.Box, command: str, over: str | None
) -> None:
    # The twin sleeps two seconds: wall time is not CPU time.
    work = command or "import time; time.sleep(2)"
    res, _ = sh(box, f'exec "$HARNESS_PYTHON" -I -c "{work}"', cpu_s=1)
    assert (res.over, res.code) == ((over, -24) if over else (None, 0))


@pytest.mark.parametrize("where", ["/tmp", "/dev/shm"])
@pytest.mark.parametrize(("mib", "over"), [(64, "tmp"), (8, None)])
def test_tmp_and_dev_shm_are_sized(
    box: sandbox.Box, where: str, mib: int, over: str | None
) -> None:
    res, out = sh(box, f"dd if=/dev/zero of={where}/x bs=1M count={mib} status=none", tmp=16 * MIB)
    assert res.over == over
    assert ("No space left on device" in out) == bool(over)


@pytest.mark.parametrize(("mib", "over"), [(1536, "disk"), (64, None)])
def test_a_copy_that_fills_the_disk_is_ended(box: sandbox.Box, mib: int, over: str | None) -> None:
    res, _ = sh(box, f"dd if=/dev/zero of=fill bs=1M count={mib} status=none; sleep 1", disk=GIB)
    assert res.over == over
    assert res.code == (-9 if over else 0)
    if over:
        assert (box.work / "fill").stat().st_size < 1536 * MIB


def test_no_other_tmpfs_is_writable(box: sandbox.Box) -> None:
    res, out = sh(box, "for f in /x /dev/x /sandbox/x; do touch $f; done; touch /tmp/ok; echo end")
    assert out.count("Read-only file system") == 3 and out.endswith("end\n")
    assert res.over is None


KERNELS = "import resource as r; print(*(v for n in (r.RLIMIT_NPROC, r.RLIMIT_FSIZE, r.RLIMIT_CPU) for v in r.getrlimit(n)))"  # noqa: E501


def test_the_kernels_limits_are_the_commands_own(box: sandbox.Box) -> None:
    """Set in init before the command starts: what any boundary running it under this init
    holds it to, whatever isolates it."""
    _, out = sh(box, f'"$HARNESS_PYTHON" -I -c "{KERNELS}"', processes=300, file_size=MIB, cpu_s=60)
    assert out.split() == ["300", "300", str(MIB), str(MIB), "60", "65"]
    unset = {"processes": None, "file_size": None, "cpu_s": None}
    _, out = sh(box, f'"$HARNESS_PYTHON" -I -c "{KERNELS}"', **unset)
    # Unlimited: what harness itself was given, as before there were limits.
    host = [v for n in (RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_CPU) for v in getrlimit(n)]
    assert out.split() == [str(v) for v in host]


def test_a_command_under_every_limit_is_what_it_was(box: sandbox.Box, tmp_path: Path) -> None:
    res, out = sh(box, "echo hi; echo x > /tmp/y; cat /tmp/y")
    assert (res.code, res.over, res.leaked, out) == (0, None, False, "hi\nx\n")
