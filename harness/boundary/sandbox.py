"""The boundary around everything untrusted: a bubblewrap sandbox per command.

A worker and every verify command run in fresh user, mount, PID, IPC, UTS and network
namespaces (an agent CLI's network namespace has one way out, through harness's proxy for the
call: proxy.py): the system read-only, one scratch folder at WORK (writable for a verify
command; read-only for a worker, whose changes travel in its answer), a private home at
HOME, a fresh /proc and a sized /tmp, nothing else of the host. A small init (pid 1 inside,
pidone.py) runs the command within its limits, and when it ends lists what is still alive —
a setsid or double-forked daemon is a leak — then kills everything in the namespace and
reports to a file harness owns.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import orjson

from harness.base.errors import Halted
from harness.boundary import forward, pidone
from harness.spec.limits import Limits

WORK = Path("/sandbox/work")
HOME = Path("/sandbox/home")
BIN = Path("/sandbox/bin")  # an agent CLI and its runtime, first on PATH
# Who a sandboxed command is: never root, even when harness is. An agent CLI's own sandbox
# (codex's bubblewrap, claude's for its Bash tool) cannot map root into a user namespace
# nested in ours, and fails (docs/agent-sandboxes.md); as any other uid it starts. Fixed,
# so nothing a command prints depends on who ran harness.
UID = 1000
# Where the call's proxy socket (proxy.py) is seen inside, and the loopback port inside where
# the proxy variables point: the one a proxy conventionally has.
EGRESS_SOCKET = Path("/sandbox/egress.sock")
PROXY_PORT = 3128
PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")
NO_PROXY_VARS = ("NO_PROXY", "no_proxy")  # emptied: a client bypasses nothing, loopback included
FIX = (
    'install bubblewrap (apt-get install -y bubblewrap), or set [sandbox] mode = "off" '
    "in ai/harness.toml to run uncontained"
)


@dataclass(frozen=True)
class Egress:
    """A sandbox's one way out to the network: the Unix socket of the call's proxy on the
    host (proxy.py), and `tunnels`, (loopback address, port, "host:port") inside, each
    relayed as a CONNECT to that target."""

    socket: Path
    tunnels: tuple[tuple[str, int, str], ...] = ()

    @property
    def port(self) -> int:
        """The proxy port inside: PROXY_PORT, or the first above it that no tunnel takes."""
        taken = {port for _, port, _ in self.tunnels}
        return next(p for p in range(PROXY_PORT, 65536) if p not in taken)

    def spec(self) -> str:
        """What init hands forward.start."""
        listen = [["127.0.0.1", self.port, None], *(list(t) for t in self.tunnels)]
        return orjson.dumps({"socket": str(EGRESS_SOCKET), "listen": listen}).decode()

    def env(self) -> list[tuple[str, str]]:
        url = f"http://127.0.0.1:{self.port}"
        return [(name, url) for name in PROXY_VARS] + [(name, "") for name in NO_PROXY_VARS]


@dataclass(frozen=True)
class Box:
    """One command's view: `work` at WORK (read-only unless `writable`), `home` writable at
    HOME, the rest read-only.

    `files` are host files bound read-only where they are (the worker's own program, its
    persona); `home_files` are files of the user's home a CLI needs, bound read-only at the
    same place under HOME; `binds` and `programs` are an agent CLI as installed
    (installed.py). `network` is the host's whole network; `egress` a way out through
    harness's proxy for the call, in a network namespace of its own.
    """

    work: Path
    home: Path
    network: bool = False
    egress: Egress | None = None
    writable: bool = True
    files: tuple[Path, ...] = ()
    home_files: tuple[tuple[Path, str], ...] = ()
    hide: tuple[Path, ...] = ()  # host trees no toolchain bind may expose
    binds: tuple[tuple[Path, Path], ...] = ()  # (host, inside), read-only: an agent CLI's install
    programs: tuple[tuple[str, Path], ...] = ()  # linked from BIN: the CLI and its runtime
    limits: Limits = field(default_factory=Limits)  # what its command may consume (pidone.py)

    def inside(self, path: Path) -> Path:
        """Where a host path under `work` or `home` is seen from inside."""
        for host, seen in ((self.work, WORK), (self.home, HOME)):
            if path == host or host in path.parents:
                return seen / path.relative_to(host)
        return path


def bwrap() -> str | None:
    return shutil.which("bwrap")


@cache
def problem() -> str | None:
    """Why no sandbox can be made on this machine, or None when one can."""
    exe = bwrap()
    if exe is None:
        return "bwrap is not installed"
    with tempfile.TemporaryDirectory(prefix="harness-probe-") as tmp:
        work, home = Path(tmp) / "work", Path(tmp) / "home"
        work.mkdir()
        home.mkdir()
        box = Box(work, home)
        argv = [*prefix(box, WORK), "/bin/sh", "-c", "echo ok > probe"]
        try:
            done = subprocess.run(
                argv, env={"PATH": os.defpath}, capture_output=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap did not start: {exc}"
        if done.returncode != 0 or not (work / "probe").is_file():
            why = done.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"bwrap cannot make a sandbox here: {why[-1] if why else done.returncode}"
    return None


def version() -> str | None:
    exe = bwrap()
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.decode("utf-8", "replace").strip() or None


def diagnose() -> dict[str, str]:
    """What `harness doctor` prints: the sandbox's state on this machine and why."""
    exe = bwrap()
    why = problem()
    found = {
        "sandbox": "works" if why is None else f"does not work: {why}",
        "bwrap": exe or "not found on PATH",
        "version": version() or "unknown",
    }
    if exe is not None:
        mode = os.stat(exe).st_mode
        # A setuid bwrap is what the known privilege escalations need; harness never
        # depends on one (it uses an unprivileged user namespace).
        found["setuid"] = (
            "yes (not needed: prefer a non-setuid bwrap)" if mode & stat.S_ISUID else "no"
        )
    found["mount points"] = "chosen by harness only: nothing inside a copy is ever a mount point"
    if why is not None:
        found["fix"] = FIX
    return found


def require() -> None:
    """Fail closed: no untrusted command runs outside the boundary unless the config says so."""
    why = problem()
    if why is not None:
        raise Halted(f"no sandbox: {why}; {FIX}")


def prefix(
    box: Box, cwd: Path, init: tuple[str, int, int] | None = None, held: bool = False
) -> list[str]:
    """The bwrap command line that enters `box` at `cwd` (a path as seen inside).

    With `init` (python, report fd, info fd) the command runs under the init above, as
    pid 1, and bwrap writes that pid's host pid to the info fd. A box's `egress` needs
    init, which starts its forwarder. A `held` init starts the command only once its stdin
    says "go", and gives it the rest of its stdin (held.Held).
    """
    if box.egress is not None and init is None:
        raise ValueError("a sandbox with a way out through a proxy runs under init")
    argv = [
        bwrap() or "bwrap",
        *(["--info-fd", str(init[2])] if init is not None else []),
        "--unshare-all",
        *(["--share-net"] if box.network else []),
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        str(UID),
        "--gid",
        str(UID),
        "--hostname",
        "sandbox",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / top
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    # Every tmpfs it may write is sized: /tmp and /dev/shm to the limit, bwrap's / and
    # /dev (each half the host's memory by default) read-only once all is mounted.
    tmp = [] if box.limits.tmp is None else ["--size", str(box.limits.tmp)]
    argv += ["--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev"]
    argv += [*tmp, "--tmpfs", "/tmp", *tmp, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    for path in toolchain(box.hide):
        argv += ["--ro-bind", str(path), str(path)]
    argv += ["--bind" if box.writable else "--ro-bind", str(box.work), str(WORK)]
    argv += ["--bind", str(box.home), str(HOME)]
    for path in box.files:
        argv += ["--ro-bind", str(path), str(path)]
    for path, rel in box.home_files:
        argv += ["--ro-bind-try", str(path), str(HOME / rel)]
    for host, seen in box.binds:
        argv += ["--ro-bind", str(host), str(seen)]
    if box.programs:
        argv += ["--dir", str(BIN)]
    for name, host in box.programs:
        argv += ["--symlink", str(host), str(BIN / name)]
    spec, program = "", pidone.INIT
    if box.egress is not None:
        argv += ["--ro-bind", str(box.egress.socket), str(EGRESS_SOCKET)]
        for name, value in box.egress.env():
            argv += ["--setenv", name, value]
        spec, program = box.egress.spec(), f"FORWARD = {_forwarder()!r}\n{pidone.INIT}"
    argv += ["--remount-ro", "/", "--chdir", str(cwd)]
    if init is not None:
        python, fd, _ = init
        argv += ["--as-pid-1", "--", python, "-I", "-S", "-c", program, str(fd), spec]
        argv += ["1" if held else "", *pidone.args(box.limits, (str(WORK), str(HOME)))]
    else:
        argv.append("--")
    return argv


@cache
def _forwarder() -> str:
    """forward.py's source, which init runs in the sandbox (it cannot import harness)."""
    return Path(forward.__file__).read_text("utf-8")


def toolchain(hide: Iterable[Path]) -> list[Path]:
    """Read-only host folders a command needs beyond /usr and /etc: the Python running
    harness, harness itself, and the folders on PATH — never the home or `hide`."""
    env = os.environ.get
    found = _toolchain(tuple(hide), env("HOME", "/nonexistent"), env("PATH", ""), tuple(sys.path))
    return list(found)


# Every call of a run asks with the same inputs, and resolving the folders again was a tenth
# of a trivial call's cost. Resolved once, at the first call, before this run landed anything
# that could change what a name on PATH points at.
@cache
def _toolchain(
    hide: tuple[Path, ...], home_var: str, path_var: str, sys_path: tuple[str, ...]
) -> tuple[Path, ...]:
    home = Path(home_var).resolve()
    hidden = [Path(p).resolve() for p in hide]
    wanted: list[Path] = []
    for raw in path_var.split(os.pathsep):
        path = Path(raw)
        if not raw or not path.is_absolute() or not path.is_dir():
            continue
        path = path.resolve()
        # A tool's bin/ usually needs the lib/ beside it.
        wanted.append(path.parent if path.name == "bin" else path)
    # sys.path may hold the folder harness was started from (`python -m`): like PATH, it
    # is taken only outside the home. The interpreter and harness's own packages are needed
    # wherever they are.
    wanted += [Path(p) for p in sys_path if p and Path(p).is_absolute()]
    trusted = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)]
    trusted += [Path(p) for p in _package_dirs()]
    found: set[Path] = set()
    for path in wanted:
        path = path.resolve()
        if path.is_dir() and not (_under(path, home) or _ancestor(path, home)):
            found.add(path)
    for path in trusted:
        path = path.resolve()
        if path.is_dir() and not (path == home or _ancestor(path, home)):
            found.add(path)
    kept = sorted(
        p
        for p in found
        if p != Path("/")
        and not _under(p, Path("/usr"))
        and not _under(p, Path("/etc"))
        and not any(_under(p, h) or _ancestor(p, h) for h in hidden)
    )
    # A folder inside another bound one adds nothing.
    return tuple(p for p in kept if not any(q != p and _under(p, q) for q in kept))


def _package_dirs() -> list[str]:
    """Where harness's own packages are: a worker shim runs harness.workers inside."""
    found = []
    for name in ("harness", "harness.workers", "harness._schemas"):
        spec = importlib.util.find_spec(name)
        found += list(spec.submodule_search_locations or []) if spec else []
    return found


def _under(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


def _ancestor(path: Path, of: Path) -> bool:
    return path in of.parents


def command(
    box: Box, argv: Sequence[str], cwd: Path, report_fd: int, info_fd: int, held: bool = False
) -> list[str]:
    """The full command line that runs `argv` at `cwd` (a host path) in `box`, under init
    (held until told to go, with `held`)."""
    init = (sys.executable, report_fd, info_fd)
    return [*prefix(box, box.inside(cwd), init, held), *argv]


def child_pid(info: bytes) -> int | None:
    """The host pid of the sandbox's pid 1, from what bwrap wrote to --info-fd."""
    try:
        found = orjson.loads(info).get("child-pid")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return found if isinstance(found, int) and found > 1 else None
