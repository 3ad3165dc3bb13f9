"""The program that is pid 1 inside every sandbox, and what it reports.

It starts the command, holds it to its limits (spec/limits.py) and, when it ends, lists
what is still alive — a setsid or double-forked daemon is a leak — then kills everything in
the namespace and reports to a file harness owns. The limits are set on init itself just
before it starts the command, which inherits them, and watched from init: any boundary that
runs the command under this init holds it to the same limits, whatever isolates it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from harness.spec.limits import Limits

# It imports nothing it can do without, as it starts every time. Not dumpable, so the
# command can neither ptrace it nor open its fds through /proc/1/fd; the report fd is closed
# on exec, so only init writes it. Given a forwarder's spec, it first starts forward.py's
# listeners (the sandbox's way out), as threads of its own: no process the command could
# kill or count as its own.
#
# Limits: file size, CPU time and processes are the kernel's (RLIMIT_FSIZE, RLIMIT_CPU,
# RLIMIT_NPROC — the last counted per user namespace, so per sandbox, but not applied when
# harness runs as root). Init samples the rest, and processes again, every 100 ms: the
# tasks and the resident memory (anonymous and shared, each page shared by forked processes
# counted once) of every process in its PID namespace, whether /tmp or /dev/shm is full,
# and how far the free space of the disks of the copy and home has fallen since the start.
# Over one, it kills everything and reports which.
INIT = r"""
import os, sys, _signal
fd = int(sys.argv[1]); spec = sys.argv[2]; held = sys.argv[3]
memory, tasks, fsize, cpu, tmp, disk = (int(v) if v else 0 for v in sys.argv[4].split(","))
disks = sys.argv[5].split(":") if disk else []
argv = sys.argv[6:]
os.set_inheritable(fd, False)
try:
    # prctl(PR_SET_DUMPABLE, 0) through _ctypes itself: ctypes's own modules take 3 ms more
    # of every call's start.
    import _ctypes
    _ctypes.call_function(_ctypes.dlsym(_ctypes.dlopen(None), "prctl"), (4, 0, 0, 0, 0))
except Exception:
    try:
        import ctypes
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    except Exception:
        pass
pid = 0
def forward(signum, frame):
    if pid:
        try: os.killpg(pid, signum)
        except OSError: pass
_signal.signal(15, forward)
_signal.signal(2, forward)
if held:
    # Started ahead of its call: the command's stdin comes on ours after "go", and goes to
    # it as a file; anything else (harness closed the pipe) ends the sandbox unused.
    got = []
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        got.append(chunk)
    data = b"".join(got)
    if not data.startswith(b"go\n"):
        os._exit(0)
    mem = os.memfd_create("stdin")
    rest = memoryview(data)[3:]
    while rest:
        rest = rest[os.write(mem, rest):]
    os.lseek(mem, 0, 0)
    os.dup2(mem, 0)
    os.close(mem)
def free(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize
def full():
    if tmp and any(os.statvfs(p).f_bavail == 0 for p in ("/tmp", "/dev/shm")):
        return "tmp"
    if any(start - free(path) > disk for path, start in started):
        return "disk"
    return ""
def resident(name):
    # Proportional: a page that forked processes share counts once among them. A process
    # whose smaps init may not read (one that made itself undumpable) counts whole.
    for path, keys in ((f"/proc/{name}/smaps_rollup", (b"Pss_Anon", b"Pss_Shmem")),
                       (f"/proc/{name}/status", (b"RssAnon", b"RssShmem"))):
        try:
            with open(path, "rb") as fh:
                lines = fh.read().split(b"\n")
        except OSError:
            continue
        kb = [int(v.split()[0]) for k, _, v in (l.partition(b":") for l in lines) if k in keys]
        if kb:
            return sum(kb)
    return 0
def sample():
    names = [n for n in os.listdir("/proc") if n.isdigit()] if tasks or memory else []
    count = 0
    for name in names if tasks else ():
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                count += int(fh.read().rpartition(b")")[2].split()[17])
        except (OSError, ValueError, IndexError):
            continue
    if tasks and count >= tasks:
        return "processes"
    if memory and sum(resident(name) for name in names) * 1024 > memory:
        return "memory"
    return full()
def reap():
    global code, ended
    while True:
        try:
            done, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            ended = True
            return
        if done == 0:
            return
        if done == pid:
            code, ended = os.waitstatus_to_exitcode(status), True
code = 127
over = ""
ended = False
try:
    if spec:
        import json
        ns = {}
        exec(FORWARD, ns)
        ns["start"](json.loads(spec))
except OSError as exc:
    os.write(2, f"sandbox: no way out to the network: {exc}\n".encode())
else:
    try:
        started = [(path, free(path)) for path in disks]
        if fsize or cpu or tasks:
            import resource
            limits = ((resource.RLIMIT_FSIZE, fsize, 0), (resource.RLIMIT_CPU, cpu, 5),
                      (resource.RLIMIT_NPROC, tasks, 0))
            for which, most, more in limits:
                if most:
                    # At the CPU limit SIGXCPU ends the process; one that handles it has 5 s
                    # more before SIGKILL.
                    resource.setrlimit(which, (most, most + more))
        # Python ignores SIGPIPE and SIGXFSZ; the command gets them back as from a shell.
        pid = os.posix_spawnp(argv[0], argv, dict(os.environ), setpgroup=0, setsigdef=(13, 24, 25))
    except OSError as exc:
        os.write(2, f"sandbox: cannot execute {argv[0]!r}: {exc.strerror}\n".encode())
if pid:
    import select
    watch = memory or tasks or tmp or disk
    poller = select.poll()
    try:
        poller.register(os.pidfd_open(pid), select.POLLIN)
    except OSError:
        watch = True  # no pidfd (Linux < 5.3): the command's end is found by sampling too
    while True:
        poller.poll(100 if watch else None)
        reap()
        if ended:
            break
        over = sample()
        if over:
            try:
                os.kill(-1, 9)
            except OSError:
                pass
            while not ended:
                poller.poll(100)
                reap()
            break
me = os.getpid()
leaked = []
for name in os.listdir("/proc") if not over else ():
    if not name.isdigit() or int(name) == me:
        continue
    try:
        with open(f"/proc/{name}/stat", "rb") as fh:
            head, _, tail = fh.read().rpartition(b")")
    except OSError:
        continue
    if tail.split()[0] != b"Z":
        leaked.append(head.partition(b"(")[2].decode("utf-8", "replace"))
try:
    os.kill(-1, 9)
except OSError:
    pass
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
if pid and not over:
    # What the kernel's limits ended, when it was the command itself, and what is left of
    # /tmp and the disks once everything is gone.
    over = {-24: "cpu_s" if cpu else "", -25: "file_size" if fsize else ""}.get(code, "") or full()
os.ftruncate(fd, 0)
lines = [str(code), over, *(n.encode().hex() for n in sorted(leaked))]
os.pwrite(fd, "\n".join(lines).encode(), 0)
os._exit(code if 0 <= code < 256 else 128 - code)
"""


@dataclass(frozen=True)
class Report:
    code: int
    leaked: tuple[str, ...]  # names of processes alive in the namespace after the command
    over: str | None = None  # the limit (spec/limits.py) it went over, when it did


def args(limits: Limits, disks: tuple[str, ...]) -> list[str]:
    """What init is told of the limits, before the command's argv: `disks` are the folders
    whose disks' free space it watches."""
    values = (limits.memory, limits.processes, limits.file_size, limits.cpu_s, limits.tmp)
    told = ",".join(str(v or "") for v in (*values, limits.disk))
    return [told, ":".join(disks)]


def read_report(fd: int) -> Report | None:
    """What init reported, or None when it never got to (the sandbox was killed)."""
    lines = os.pread(fd, 1 << 20, 0).decode("ascii", "replace").split("\n")
    try:
        names = tuple(bytes.fromhex(n).decode("utf-8", "replace") for n in lines[2:])
        return Report(int(lines[0]), names, lines[1] or None)
    except (ValueError, IndexError):
        return None
