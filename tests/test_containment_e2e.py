"""Containment end to end (issue 9): a hostile corpus through the real CLI on real repositories.

Each attack class arrives as test code in a worker's diff (tests/test_evil.py, run by the
`[verify] test` command inside the sandbox) or as a worker program of its own, and each has a
passing twin of the same shape aimed at what the sandbox does let it touch. Every test runs
harness with a throw-away HOME holding a canary `~/.ssh/id_rsa` and a canary secret in its
environment; neither may reach a file under ai/, a commit, harness's state or a listener, and
every refusal leaves the branch, the tree and everything beside the repository byte-identical.

The code in a diff reports what it saw on one line, `EVIL {json}`, which the verify evidence
keeps in its tail: a hostile case whose code did not run at all would otherwise pass for a
refusal.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from .conftest import CLOCK, Sample, calc_patch, new_file_patch, ok, scripted, subtask

pytestmark = pytest.mark.e2e

PY = shlex.quote(sys.executable)
EVIL = "tests/test_evil.py"
# Plugins off: the sample has no pytest config, and autoloading them costs seconds per run.
PYTEST = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {PY} -m pytest -q -s {EVIL}"
UNITTEST = f"{PY} -m unittest discover -s tests -t . -q"
WHO = "harness@example.invalid"


# -- the world around one repository ----------------------------------------------------------


@dataclass
class World:
    """A scripted sample repository in `tmp`/repo, a throw-away home and the canaries."""

    tmp: Path
    sample: Sample
    env: dict[str, str]
    canaries: tuple[str, ...]
    key: Path  # the harness user's ~/.ssh/id_rsa (a canary)

    @property
    def root(self) -> Path:
        return self.sample.root

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.sample.cli(*args, env=self.env, timeout=120)

    def next(self) -> subprocess.CompletedProcess[str]:
        return self.cli("next", "demo")


@pytest.fixture
def world(tmp_path: Path) -> World:
    sample = scripted(tmp_path)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    key_canary = f"canary-{uuid.uuid4()}"
    key = home / ".ssh" / "id_rsa"
    key.write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{key_canary}\n")
    env_canary = f"canary-{uuid.uuid4()}"
    env = {"HOME": str(home), "HARNESS_CANARY": env_canary}
    made = World(tmp_path, sample, env, (env_canary, key_canary), key)
    configure(made, test=PYTEST)
    return made


def toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def configure(
    world: World, *, contained: bool = True, limits: dict[str, Any] | None = None, **verify: Any
) -> None:
    """ai/harness.toml with exactly the given [verify] keys (and [sandbox.limits])."""
    lines = ["[identity]", 'name = "harness"', f'email = "{WHO}"']
    if not contained:
        lines += ["[sandbox]", 'mode = "off"']
    if limits:
        lines += ["[sandbox.limits]", *(f"{k} = {toml(v)}" for k, v in limits.items())]
    lines += ["[verify]", *(f"{k} = {toml(v)}" for k, v in verify.items())]
    lines += ["[defaults]", "timeouts = { soft_s = 60, hard_s = 90 }", "verify_timeout_s = 60"]
    world.sample.set_config("\n".join(lines) + "\n")


def evil_source(body: str, **consts: Any) -> list[str]:
    """The lines of tests/test_evil.py: the imports, the constants, then the body."""
    head = [
        "import ctypes, json, os, shutil, socket, subprocess, sys",
        "from pathlib import Path",
        "",
        *(f"{name} = {value!r}" for name, value in consts.items()),
        "",
        "",
        "def report(seen):",
        '    print("EVIL " + json.dumps(seen, sort_keys=True), flush=True)',
        "",
    ]
    return head + textwrap.dedent(body).strip("\n").splitlines()


def evil_answer(lines: list[str]) -> dict[str, Any]:
    return ok("T1", (EVIL, new_file_patch(EVIL, lines)))


def calc_answer(agent_id: str) -> dict[str, Any]:
    """A worker's ok answer line carrying the sample's one calc.py change."""
    return {
        "ts": CLOCK,
        "task_id": "demo",
        "agent_id": agent_id,
        "status": "ok",
        "result": {"diffs": [{"file": "src/calc.py", "patch": calc_patch()}]},
    }


def evil_subtask(sid: str = "T1", **fields: Any) -> dict[str, Any]:
    return subtask(sid, write_scope=["tests/**"], creates=[EVIL], **fields)


def plant(world: World, lines: list[str]) -> None:
    """A one-subtask plan whose worker adds tests/test_evil.py."""
    world.sample.write_plan([evil_subtask()])
    world.sample.write_script([evil_answer(lines)])


# -- what a run left behind -------------------------------------------------------------------


def named(world: World, name: str) -> list[dict[str, Any]]:
    return [e for e in world.sample.events() if e["event"] == name]


def evidence(world: World, call: int = 0) -> dict[str, Any]:
    """The test check's evidence of the n-th worker call."""
    invoked = named(world, "subagent_invoked")
    folder = world.root / "ai/exchanges/demo" / invoked[call]["details"]["call_id"] / "verify"
    (found,) = [p for p in folder.glob("*-test.json")]
    return orjson.loads(found.read_bytes())


def tails(world: World, call: int = 0) -> list[str]:
    return [run["tail"] for run in evidence(world, call)["runs"]]


def reported(tail: str) -> dict[str, Any]:
    """What the code in the diff reported (the EVIL line); fails when it never ran."""
    found = re.search(r"EVIL (\{[^|]*\})", tail)
    assert found is not None, f"the code in the diff did not run: {tail!r}"
    return json.loads(found.group(1))


def snapshot(tmp: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry under `tmp` — the tree and everything beside the repository — except the
    repository's .git and ai/, which harness itself writes."""
    skip = {tmp / "repo" / ".git", tmp / "repo" / "ai"}
    found: dict[str, tuple[str, bytes | str]] = {}
    for top, dirs, names in os.walk(tmp):
        here = Path(top)
        dirs[:] = [d for d in dirs if here / d not in skip]
        for name in [*dirs, *names]:
            path = here / name
            rel = path.relative_to(tmp).as_posix()
            info = path.lstat()
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                found[rel] = (f"dir {info.st_mode:o}", "")
            else:
                found[rel] = (f"file {info.st_mode:o}", path.read_bytes())
    return found


def assert_untouched(
    before: dict[str, tuple[str, bytes | str]],
    after: dict[str, tuple[str, bytes | str]],
    applied: dict[str, str] | None = None,
) -> None:
    """`after` is `before` plus exactly the files harness applied (repo-relative: text)."""
    expected = dict(before)
    for rel, text in (applied or {}).items():
        expected[f"repo/{rel}"] = ("file 100644", text.encode())
    changed = sorted(k for k in set(expected) | set(after) if expected.get(k) != after.get(k))
    assert not changed, f"changed outside harness's own writes: {changed}"


def commits_since(world: World, base: str) -> list[str]:
    return world.sample.git("log", "--format=%H", f"{base}..HEAD").split()


def assert_branch_kept(world: World, base: str, touched: set[str]) -> None:
    """Still on main, grown only by harness's commits, which touch ai/ and `touched` only."""
    git = world.sample.git
    assert git("branch", "--show-current").strip() == "main"
    assert git("merge-base", "--is-ancestor", base, "HEAD") == ""
    for commit in commits_since(world, base):
        assert git("log", "-1", "--format=%ae", commit).strip() == WHO
    paths = set(git("diff", "--name-only", base, "HEAD").split())
    assert {p for p in paths if not p.startswith("ai/")} <= touched, paths


def leaks(world: World, *printed: str) -> list[str]:
    """Where a canary turned up: files under ai/ and .git/harness, any commit or git object,
    and what harness printed."""
    root = world.root
    found: list[str] = []

    def look(where: str, data: bytes) -> None:
        found.extend(f"{where}: {c}" for c in world.canaries if c.encode() in data)

    for top in (root / "ai", root / ".git" / "harness"):
        for path in sorted(top.rglob("*")):
            if path.is_file() and not path.is_symlink():
                look(str(path), path.read_bytes())
    for argv in (
        ["git", "log", "-p", "--all", "--format=fuller"],
        ["git", "cat-file", "--batch-all-objects", "--batch"],
    ):
        out = subprocess.run(argv, cwd=root, capture_output=True, check=True).stdout
        look(" ".join(argv[:3]), out)
    for text in printed:
        look("harness's output", text.encode())
    return found


# -- host processes and listeners -------------------------------------------------------------


def running(marker: str) -> list[int]:
    """Pids of host processes whose command line holds `marker`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in argv:
            found.append(int(cmdline.parent.name))
    return found


def kill_ours(marker: str) -> None:
    """Kill what this test started that escaped (only its unique marker)."""
    for pid in running(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP listener on the host's 127.0.0.1."""
    srv = socket.create_server(("127.0.0.1", 0), backlog=32)
    try:
        yield srv
    finally:
        srv.close()


def arrived(srv: socket.socket) -> list[bytes]:
    """What reached the listener: the kernel completes every connection into the backlog, so
    once the run is over, a non-blocking accept sees all there ever were."""
    srv.setblocking(False)
    got = []
    while True:
        try:
            conn, _ = srv.accept()
        except BlockingIOError:
            return got
        with conn:
            conn.settimeout(10)
            chunks = []
            while chunk := conn.recv(4096):
                chunks.append(chunk)
            got.append(b"".join(chunks))


# -- 1. writes by absolute path ---------------------------------------------------------------

WRITE = """
def test_write():
    seen = {}
    for target in TARGETS:
        try:
            Path(target).write_text("pwned by a test\\n")
            seen[Path(target).name] = "written"
        except OSError as exc:
            seen[Path(target).name] = type(exc).__name__
    report(seen)
"""


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
def test_a_test_writes_only_inside_its_own_copy(world: World, hostile: bool) -> None:
    (world.tmp / "outside.txt").write_text("beside the repository\n")
    if hostile:
        beside = [world.root / "README.md", world.tmp / "outside.txt", world.key.parent / "rc"]
        targets = [str(t) for t in beside]
    else:
        targets = ["README.md", "inside.txt"]  # the copy's own README, a new file beside it
    lines = evil_source(WRITE, TARGETS=targets)
    plant(world, lines)
    base, before = world.sample.head(), snapshot(world.tmp)
    res = world.next()
    assert res.returncode == 0, res.stderr
    assert world.sample.names()[-1] == "step_completed"
    for tail in tails(world):
        seen = reported(tail)
        assert len(seen) == len(targets)
        if hostile:
            assert "written" not in seen.values(), seen
        else:
            assert set(seen.values()) == {"written"}, seen
    applied = {EVIL: "\n".join(lines) + "\n"}
    assert_untouched(before, snapshot(world.tmp), applied)
    assert_branch_kept(world, base, {EVIL})
    assert not leaks(world, res.stdout, res.stderr)


# -- 2. .git/config ---------------------------------------------------------------------------

GIT_CONFIG = """
def test_git_config():
    seen = {}
    for n, target in enumerate(TARGETS):
        try:
            with open(target, "a") as fh:
                fh.write(ADDED)
            seen[str(n)] = "written"
        except OSError as exc:
            seen[str(n)] = type(exc).__name__
    # Whatever git the test itself runs is its own, in its own copy.
    got = subprocess.run(["git", "config", "--get", KEY], capture_output=True, text=True)
    seen["get"] = got.stdout.strip()
    status = subprocess.run(["git", "status", "--porcelain"], capture_output=True)
    seen["status"] = status.returncode
    report(seen)
"""


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
def test_a_test_cannot_plant_a_git_command_for_harness(world: World, hostile: bool) -> None:
    marker = world.tmp / "fsmonitor-ran"
    user_config = world.root / ".git" / "config"
    if hostile:
        # git runs core.fsmonitor through the shell on `git status` and friends.
        hook = f"touch {marker}; false"
        added, key, expect = f"[core]\n\tfsmonitor = {json.dumps(hook)}\n", "core.fsmonitor", hook
        targets = [".git/config", str(user_config)]
    else:
        added, key, expect = "[twin]\n\tsetting = kept\n", "twin.setting", "kept"
        targets = [".git/config"]
    lines = evil_source(GIT_CONFIG, TARGETS=targets, ADDED=added, KEY=key)
    # T2 runs the committed test again, in a fresh copy, after harness's own git commands.
    plan = [evil_subtask(), subtask("T2", depends_on=["T1"])]
    world.sample.write_plan(plan)
    world.sample.write_script([evil_answer(lines), ok("T2", ("src/calc.py", calc_patch()))])
    base, before, config = world.sample.head(), snapshot(world.tmp), user_config.read_bytes()
    for _ in range(2):
        res = world.next()
        assert res.returncode == 0, res.stderr
        assert world.sample.names()[-1] == "step_completed"
    assert not marker.exists(), "a git command ran the planted core.fsmonitor"
    assert user_config.read_bytes() == config
    for call in (0, 1):
        for tail in tails(world, call):
            seen = reported(tail)
            assert seen["0"] == "written"  # its own copy's .git/config
            assert seen["get"] == expect
            if hostile:
                assert seen["1"] != "written", seen
    applied = {EVIL: "\n".join(lines) + "\n"}
    applied["src/calc.py"] = (world.root / "src/calc.py").read_text()
    after = snapshot(world.tmp)
    assert after["repo/src/calc.py"][1] != before["repo/src/calc.py"][1]  # T2 did apply
    assert_untouched(before, after, applied)
    assert_branch_kept(world, base, {EVIL, "src/calc.py"})
    assert not leaks(world, res.stdout, res.stderr)
    assert "fsmonitor" not in world.sample.git("config", "--list")


# -- 3. secrets: harness's environment, the user's ~/.ssh --------------------------------------

STEAL = """
def test_steal():
    found, read = [], 0
    for pid in sorted(os.listdir("/proc")):
        try:
            data = Path("/proc", pid, "environ").read_bytes()
        except OSError:
            continue
        read += 1
        found += [f"{pid}: {e.decode()}" for e in data.split(b"\\0") if b"canary-" in e]
    keys = {}
    for key in KEYS:
        try:
            found.append(f"{key}: {Path(os.path.expanduser(key)).read_text()}")
            keys[key] = "read"
        except OSError as exc:
            keys[key] = type(exc).__name__
    report({"environs": read, "keys": list(keys.values())})
    # The loot last, where the evidence tail, the failure and the retry prompt all take it.
    for line in found:
        print(line.replace("\\n", " "))
    sys.stdout.flush()
    os._exit(1)
"""

OWN_ENV = """
def test_own_environment():
    home = Path.home() / ".ssh"
    home.mkdir(parents=True, exist_ok=True)
    (home / "id_rsa").write_text("the test's own key")
    for name, value in sorted(os.environ.items()):
        print(f"{name}={value}")
    own = Path("/proc/self/environ").read_bytes()
    report({"environ": len(own.split(b"\\0")), "key": (home / "id_rsa").read_text()})
"""


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
def test_no_secret_of_harness_or_its_user_reaches_the_record(world: World, hostile: bool) -> None:
    keys = [str(world.key), "~/.ssh/id_rsa"]  # the harness user's key; the sandbox's home
    lines = evil_source(STEAL, KEYS=keys) if hostile else evil_source(OWN_ENV)
    plant(world, lines)
    base, before = world.sample.head(), snapshot(world.tmp)
    res = world.next()
    if hostile:
        # It always fails: its output goes into the evidence, the log's error and the retry
        # prompt, then the task blocks, and the record commit takes it all.
        assert res.returncode == 1
        assert named(world, "test_failed") and world.sample.names()[-1] == "blocker_encountered"
        assert len(named(world, "subagent_invoked")) == 2
        for call in (0, 1):
            for tail in tails(world, call):
                seen = reported(tail)
                assert seen["environs"] >= 1  # it did read /proc: the sandbox's own
                assert "read" not in seen["keys"], seen
        applied: dict[str, str] = {}
    else:
        assert res.returncode == 0, res.stderr
        assert world.sample.names()[-1] == "step_completed"
        for tail in tails(world):
            assert reported(tail)["key"] == "the test's own key"
        applied = {EVIL: "\n".join(lines) + "\n"}
    assert not leaks(world, res.stdout, res.stderr)
    assert_untouched(before, snapshot(world.tmp), applied)
    assert_branch_kept(world, base, set(applied))


# -- 4. the host's 127.0.0.1 ------------------------------------------------------------------

CONNECT = """
def test_connect():
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=10) as conn:
            conn.sendall(b"from the sandbox")
        outcome = "connected"
    except OSError as exc:
        outcome = type(exc).__name__
    report({"connect": outcome})
"""

CONNECT_OWN = """
def test_connect_own():
    with socket.create_server(("127.0.0.1", 0)) as srv:
        with socket.create_connection(srv.getsockname(), timeout=10) as conn:
            conn.sendall(b"to myself")
            peer, _ = srv.accept()
            with peer:
                assert peer.recv(64) == b"to myself"
    report({"connect": "connected"})
"""


@pytest.mark.parametrize("case", ["hostile", "twin-own-listener", "twin-host-network"])
def test_a_test_reaches_no_listener_on_the_hosts_loopback(
    world: World, listener: socket.socket, case: str
) -> None:
    port = listener.getsockname()[1]
    if case == "twin-own-listener":
        lines = evil_source(CONNECT_OWN)
    else:
        lines = evil_source(CONNECT, PORT=port)
    if case == "twin-host-network":
        configure(world, test=PYTEST, isolate_network=False)
    plant(world, lines)
    before = snapshot(world.tmp)
    res = world.next()
    assert res.returncode == 0, res.stderr
    assert world.sample.names()[-1] == "step_completed"
    got = arrived(listener)
    outcomes = {reported(tail)["connect"] for tail in tails(world)}
    if case == "hostile":
        assert got == []
        assert "connected" not in outcomes, outcomes
    elif case == "twin-own-listener":
        assert got == [] and outcomes == {"connected"}
    else:
        # The same code with the host's network allowed: both runs got through.
        assert got == [b"from the sandbox"] * 2 and outcomes == {"connected"}
    assert_untouched(before, snapshot(world.tmp), {EVIL: "\n".join(lines) + "\n"})
    assert not leaks(world, res.stdout, res.stderr)


# -- 5. harness's network namespace -----------------------------------------------------------

ENTER = """
CONNECT = (
    "import socket, sys; "
    "socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10).sendall(b'escaped')"
)


def test_enter():
    seen = {}
    pids = {p for p in os.listdir("/proc") if p.isdigit()} | {str(p) for p in HOST_PIDS}
    for pid in sorted(pids, key=int):
        argv = ["nsenter", f"--net=/proc/{pid}/ns/net", "--", sys.executable, "-c", CONNECT]
        done = subprocess.run([*argv, str(PORT)], capture_output=True, timeout=60)
        seen[pid] = done.returncode
    # In-process too: open a namespace file and setns(2) into it.
    libc = ctypes.CDLL(None, use_errno=True)
    for pid in ["1", *map(str, HOST_PIDS)]:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        except OSError as exc:
            seen["open " + pid] = type(exc).__name__
            continue
        if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
            seen["setns " + pid] = os.strerror(ctypes.get_errno())
            continue
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=10).sendall(b"setns")
            seen["setns " + pid] = "connected"
        except OSError as exc:
            seen["setns " + pid] = type(exc).__name__
    report(seen)
"""

ENTER_OWN = """
def test_own_namespace():
    seen = {"ns": os.readlink("/proc/self/ns/net").split(":")[0]}
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = str(srv.getsockname()[1])
        done = subprocess.run([sys.executable, "-c", CONNECT, port], capture_output=True)
        peer, _ = srv.accept()
        with peer:
            seen["got"] = peer.recv(64).decode()
    seen["code"] = done.returncode
    report(seen)
"""


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
def test_a_test_cannot_enter_the_hosts_network_namespace(
    world: World, listener: socket.socket, hostile: bool
) -> None:
    port = listener.getsockname()[1]
    # This pytest process lives in the host's network namespace, as harness does.
    if hostile:
        lines = evil_source(ENTER, PORT=port, HOST_PIDS=[os.getpid(), os.getppid()])
    else:
        own = ENTER.split("\n\n\ndef test_enter", 1)[0] + "\n\n" + ENTER_OWN
        lines = evil_source(own)
    plant(world, lines)
    before = snapshot(world.tmp)
    res = world.next()
    assert res.returncode == 0, res.stderr
    assert world.sample.names()[-1] == "step_completed"
    assert arrived(listener) == []
    for tail in tails(world):
        seen = reported(tail)
        if hostile:
            pids = {k: v for k, v in seen.items() if k.isdigit()}
            assert pids and all(code != 0 for code in pids.values()), seen
            assert "connected" not in seen.values(), seen
        else:
            assert seen == {"ns": "net", "got": "escaped", "code": 0}
    assert_untouched(before, snapshot(world.tmp), {EVIL: "\n".join(lines) + "\n"})


# -- 6. a setsid daemon -----------------------------------------------------------------------

DAEMON = """
def test_daemon():
    child = subprocess.Popen(["setsid", "sleep", SECONDS])
    if WAIT:
        child.wait()
    report({"pid": child.pid, "waited": WAIT})
"""


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
def test_a_daemon_left_by_a_test_fails_the_run_and_does_not_outlive_it(
    world: World, hostile: bool
) -> None:
    unique = uuid.uuid4().int % 10**9
    # Unique on the host: a daemon's ~15 minutes, or the twin's fraction of a second.
    seconds = f"{900 + unique % 100}.{unique}" if hostile else f"0.1{unique:09d}"
    lines = evil_source(DAEMON, SECONDS=seconds, WAIT=not hostile)
    plant(world, lines)
    base, before = world.sample.head(), snapshot(world.tmp)
    try:
        res = world.next()
        assert running(seconds) == [], "the daemon outlived the run"
    finally:
        kill_ours(seconds)
    if not hostile:
        assert res.returncode == 0, res.stderr
        (passed,) = named(world, "test_passed")
        assert "process_leak" not in passed["details"]
        assert_untouched(before, snapshot(world.tmp), {EVIL: "\n".join(lines) + "\n"})
        return
    assert res.returncode == 1
    failed = named(world, "test_failed")
    assert len(failed) == 2  # the one retry leaks too
    assert failed[0]["details"]["process_leak"] is True
    assert failed[0]["details"]["exit_codes"] == [0, 0]
    assert "process leak" in failed[0]["error"]
    for tail in tails(world):
        assert reported(tail)["waited"] is False
        assert tail.endswith("still running after the command ended: sleep")
    assert world.sample.names()[-1] == "blocker_encountered"
    assert_untouched(before, snapshot(world.tmp))
    assert_branch_kept(world, base, set())


# -- 7. harness's own files: ai/ and the lock -------------------------------------------------

TAMPER = """
def test_tamper():
    seen = {}
    actions = [
        ("config", lambda: Path(TARGETS["config"]).write_text("[verify]\\n")),
        ("registry", lambda: Path(TARGETS["registry"]).write_text('{"agents": []}')),
        ("log", lambda: Path(TARGETS["log"]).unlink()),
        ("drop", lambda: Path(TARGETS["drop"]).write_text("planted by a test\\n")),
        ("locks", lambda: shutil.rmtree(TARGETS["locks"])),
    ]
    for name, act in actions:
        try:
            act()
            seen[name] = "done"
        except OSError as exc:
            seen[name] = type(exc).__name__
    report(seen)
"""


def locks(world: World) -> dict[str, tuple[int, bytes]]:
    folder = world.root / ".git" / "harness" / "locks"
    return {p.name: (p.stat().st_ino, p.read_bytes()) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
def test_a_test_cannot_touch_harness_files_or_its_lock(world: World, hostile: bool) -> None:
    root = world.root
    rels = {
        "config": "ai/harness.toml",
        "registry": "ai/agents/registry.json",
        "log": "ai/tasks/demo/progress.ndjson",
        "drop": "ai/exchanges/demo/planted.txt",
    }
    if hostile:
        targets = {k: str(root / v) for k, v in rels.items()}
        targets["locks"] = str(root / ".git" / "harness" / "locks")
    else:
        # The same acts on the copy's own files: the copy is the test's to wreck.
        targets = dict(rels, locks="ai/agents")
    lines = evil_source(TAMPER, TARGETS=targets)
    configure(world, test=f"if [ -e {EVIL} ]; then {PYTEST}; fi")  # T1 adds no test file
    # T1 leaves a log, an exchange folder and the lock behind; T2 attacks them.
    plan = [subtask("T1"), evil_subtask("T2", depends_on=["T1"])]
    world.sample.write_plan(plan)
    answers = [ok("T1", ("src/calc.py", calc_patch())), evil_answer(lines)]
    answers[1]["subtask"] = "T2"
    world.sample.write_script(answers)
    assert world.next().returncode == 0
    held = {rel: (root / rel).read_bytes() for rel in rels.values() if (root / rel).exists()}
    assert set(held) == {rels["config"], rels["registry"], rels["log"]}
    base, before, lock = world.sample.head(), snapshot(world.tmp), locks(world)
    assert lock, "T1 left no lock file to attack"
    res = world.next()
    assert res.returncode == 0, res.stderr
    assert world.sample.names()[-1] == "step_completed"
    for tail in tails(world, 1):
        seen = reported(tail)
        if hostile:
            assert set(seen.values()) <= {"FileNotFoundError", "PermissionError", "OSError"}, seen
        else:
            assert set(seen.values()) == {"done"}, seen
    assert (root / rels["config"]).read_bytes() == held[rels["config"]]
    assert (root / rels["registry"]).read_bytes() == held[rels["registry"]]
    assert (root / rels["log"]).read_bytes().startswith(held[rels["log"]])
    assert not (root / rels["drop"]).exists()
    assert rels["drop"] not in world.sample.git("log", "--all", "--name-only", "--format=")
    assert locks(world) == lock
    assert_untouched(before, snapshot(world.tmp), {EVIL: "\n".join(lines) + "\n"})
    assert_branch_kept(world, base, {EVIL})
    # The record is whole: the chain audits, and the next command finishes the task.
    audited = world.cli("audit", "demo")
    assert audited.returncode == 0, audited.stdout + audited.stderr
    done = world.next()
    assert done.returncode == 0, done.stderr
    assert world.sample.names()[-1] == "task_completed"


# -- 8. a worker program attacks --------------------------------------------------------------

WORKER = """\
#!/bin/sh
if [ "$1" = --version ]; then echo "evil-agent 1.0"; exit 0; fi
cat > /dev/null
exec 3>&1 1>&2
echo "--- write"
echo pwned > {readme} && echo "WROTE {readme}"
echo pwned > {outside} && echo "WROTE {outside}"
echo "--- read"
cat {config}
cat {key}
cat ~/.ssh/id_rsa
cat {secret}
cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -i canary
echo "--- cwd $(pwd)"
find . -maxdepth 2 | sort
cat >&3 <<'ANSWER'
{answer}
ANSWER
"""


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
def test_a_worker_program_sees_only_its_copy(world: World, hostile: bool) -> None:
    root, tmp = world.root, world.tmp
    secret_canary = f"canary-{uuid.uuid4()}"
    world.canaries += (secret_canary,)
    (tmp / "outside.txt").write_text("beside the repository\n")
    (tmp / "secret.txt").write_text(f"{secret_canary}\n")
    # The user's .git/config holds a secret too: reading it would show in stderr.log.
    world.sample.git("config", "canary.secret", secret_canary)
    if hostile:
        paths = {
            "readme": root / "README.md",
            "outside": tmp / "outside.txt",
            "config": root / ".git" / "config",
            "key": world.key,
            "secret": tmp / "secret.txt",
        }
    else:
        paths = {  # its private home, and its own copy's files by relative path
            "readme": "/sandbox/home/README.md",
            "outside": "/sandbox/home/inside.txt",
            "config": "src/calc.py",
            "key": "tests/test_calc.py",
            "secret": "README.md",
        }
    answer = calc_answer("evil")
    program = tmp / "evil-agent"
    quoted = {k: shlex.quote(str(v)) for k, v in paths.items()}
    program.write_text(WORKER.format(answer=json.dumps(answer), **quoted))
    program.chmod(0o755)
    reg = world.sample.read_json("ai/agents/registry.json")
    reg["agents"].append(
        {"id": "evil", "cmd": str(program), "version": ">=1", "capabilities": ["localized-impl"]}
    )
    world.sample.write_json("ai/agents/registry.json", reg)
    world.sample.write_plan([subtask("T1", agent="evil")])
    configure(world, test=UNITTEST)  # the worker's diff adds no test file
    base, before = world.sample.head(), snapshot(world.tmp)
    res = world.next()
    assert res.returncode == 0, res.stderr
    assert world.sample.names()[-1] == "step_completed"
    (call,) = named(world, "subagent_invoked")
    exchange = root / "ai/exchanges/demo" / call["details"]["call_id"]
    stderr = (exchange / "stderr.log").read_text()
    listing = stderr.split("--- cwd ", 1)[1].splitlines()
    assert listing[0] == "/sandbox/work"
    entries = set(listing[1:])
    assert "./src/calc.py" in entries and "./README.md" in entries  # it did list its copy
    assert "./.git" not in entries and "./ai/harness.toml" not in entries, entries
    assert {e for e in entries if e == "./ai" or e.startswith("./ai/")} <= {"./ai", "./ai/roles"}
    if hostile:
        # The program's own folder is a mount point, so its parents exist in the sandbox's
        # private /tmp and outside.txt may be "written" there; the snapshot below shows
        # the host's is not. The repository's folder does not exist in there at all.
        assert f"WROTE {paths['readme']}" not in stderr, stderr
    else:
        assert (
            "WROTE /sandbox/home/README.md" in stderr and "WROTE /sandbox/home/inside.txt" in stderr
        )
        assert "def add(a, b):" in stderr  # it read its own files
    assert not leaks(world, res.stdout, res.stderr)
    applied = {"src/calc.py": (root / "src/calc.py").read_text()}
    assert applied["src/calc.py"].endswith("VALUE = 1\n")
    assert_untouched(before, snapshot(world.tmp), applied)
    assert_branch_kept(world, base, {"src/calc.py"})


# -- 9. no bubblewrap: fail closed, unless the config says so ---------------------------------


def path_without_bwrap(tmp: Path) -> str:
    """A PATH of one folder linking every executable on the current PATH but bwrap."""
    folder = tmp / "bin-without-bwrap"
    folder.mkdir()
    for raw in os.environ.get("PATH", "").split(os.pathsep):
        if not raw or not Path(raw).is_dir():
            continue
        for entry in sorted(Path(raw).iterdir()):
            link = folder / entry.name
            if entry.name == "bwrap" or link.exists() or link.is_symlink():
                continue
            if entry.is_file() and os.access(entry, os.X_OK):
                link.symlink_to(entry.resolve())
    assert (folder / "git").exists() and not (folder / "bwrap").exists()
    return str(folder)


def unsandboxed(world: World) -> None:
    world.env["PATH"] = path_without_bwrap(world.tmp)
    test = UNITTEST
    world.sample.write_plan([subtask("T1")])
    world.sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    configure(world, test=test)


def test_without_bwrap_harness_refuses_to_call_a_worker(world: World) -> None:
    unsandboxed(world)
    base, before = world.sample.head(), snapshot(world.tmp)
    res = world.next()
    assert res.returncode == 1, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert "bubblewrap" in line and 'mode = "off"' in line, line
    names = world.sample.names()
    assert "subagent_succeeded" not in names and "subagent_invoked" not in names, names
    exchanges = world.root / "ai" / "exchanges"
    assert not exchanges.exists() or not any(exchanges.rglob("stdout.ndjson"))
    assert_untouched(before, snapshot(world.tmp))
    assert_branch_kept(world, base, set())


def test_without_bwrap_mode_off_runs_and_marks_every_event(world: World) -> None:
    unsandboxed(world)
    configure(world, contained=False, test=UNITTEST)
    res = world.next()
    assert res.returncode == 0, res.stderr
    events = world.sample.events()
    assert [e["event"] for e in events][-1] == "step_completed"
    assert "subagent_succeeded" in [e["event"] for e in events]
    assert all(e.get("details", {}).get("contained") is False for e in events), events


def test_status_shows_a_run_was_not_contained(world: World) -> None:
    unsandboxed(world)
    configure(world, contained=False, test=UNITTEST)
    assert world.next().returncode == 0
    shown = world.cli("status", "demo")
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"not contained|uncontained|sandbox: off", shown.stdout, re.I), shown.stdout
    doc = orjson.loads(world.cli("status", "demo", "--json").stdout)
    assert doc["uncontained_events"] == len(world.sample.events())


# -- 10. the record commit: only what harness wrote -------------------------------------------

RECORD = """
def test_record():
    if os.path.exists(TARGETS["once"]):
        return  # the second test run: tampering once is enough
    open(TARGETS["once"], "w").close()
    ai = Path(TARGETS["ai"])
    exchanges = ai / "exchanges" / "demo"
    seen = {}

    def log():
        path = ai / "tasks" / "demo" / "progress.ndjson"
        shutil.copyfile(path, TARGETS["before"])
        with open(path, "ab") as fh:
            fh.write(b'{"planted": true}\\n')

    def fresh():
        (call,) = [p for p in exchanges.iterdir() if p.name != TARGETS["recorded"]]
        (call / "prompt.ndjson").write_text("planted\\n")

    actions = [
        ("log", log),
        ("recorded", lambda: (exchanges / TARGETS["recorded"] / "stdout.ndjson").write_text("x")),
        ("fresh", fresh),
        ("config", lambda: (ai / "harness.toml").write_text("# planted\\n")),
        ("drop", lambda: (exchanges / "planted.txt").write_text("planted\\n")),
        ("notes", lambda: (ai / "tasks" / "demo" / "notes.md").write_text("planted\\n")),
        ("fifo", lambda: os.mkfifo(ai / "tasks" / "demo" / "pipe")),
        ("link", lambda: (exchanges / "link").symlink_to("/etc/passwd")),
    ]
    for name, act in actions:
        try:
            act()
            seen[name] = "done"
        except (OSError, ValueError) as exc:
            seen[name] = type(exc).__name__
    report(seen)
"""


def committed(world: World, path: str) -> bytes | None:
    """The bytes HEAD holds at `path`, or None."""
    shown = subprocess.run(["git", "show", f"HEAD:{path}"], cwd=world.root, capture_output=True)
    return shown.stdout if shown.returncode == 0 else None


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
def test_uncontained_code_gets_none_of_its_bytes_into_the_record(
    world: World, hostile: bool
) -> None:
    root, tmp = world.root, world.tmp
    world.sample.write_plan([subtask("T1"), evil_subtask("T2", depends_on=["T1"])])
    configure(world, contained=False, test=f"if [ -e {EVIL} ]; then {PYTEST}; fi")
    config = (root / "ai/harness.toml").read_bytes()
    world.sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert world.next().returncode == 0  # T1, recorded: what T2's tests then attack
    (t1,) = [e["details"]["call_id"] for e in named(world, "step_completed")]
    recorded = f"ai/exchanges/demo/{t1}/stdout.ndjson"
    t1_stdout = (root / recorded).read_bytes()
    targets = {"ai": str(root / "ai") if hostile else "ai", "recorded": t1}
    targets |= {"once": str(tmp / "once"), "before": str(tmp / "log-before")}
    lines = evil_source(RECORD, TARGETS=targets)
    world.sample.write_script([evil_answer(lines) | {"subtask": "T2"}])
    res = world.next()
    exchanges = root / "ai/exchanges/demo"
    (t2,) = [p.name for p in exchanges.iterdir() if p.name not in (t1, "link", "planted.txt")]
    (test,) = (exchanges / t2 / "verify").glob("*-test.json")
    seen = reported(orjson.loads(test.read_bytes())["runs"][0]["tail"])
    log = "ai/tasks/demo/progress.ndjson"
    if not hostile:
        assert res.returncode == 0, res.stderr
        assert "not recorded" not in res.stderr
        assert seen == dict.fromkeys(seen, "done") | {"fresh": "ValueError"}, seen
        assert world.sample.names()[-1] == "step_completed"
        assert committed(world, log) == (root / log).read_bytes()
        assert world.sample.git("status", "--porcelain", "--untracked-files=all", "ai") == ""
        return
    assert set(seen.values()) == {"done"}, seen
    assert res.returncode == 1
    assert res.stderr.splitlines() == [
        f"harness: not recorded: {recorded}: not written or read by harness",
        f"harness: not recorded: ai/exchanges/demo/{t2}/prompt.ndjson: "
        "changed after harness wrote or read it",
        "harness: not recorded: ai/exchanges/demo/link: a symlink",
        "harness: not recorded: ai/exchanges/demo/planted.txt: not written or read by harness",
        "harness: not recorded: ai/harness.toml: changed after harness wrote or read it",
        "harness: not recorded: ai/tasks/demo/notes.md: not written or read by harness",
        "harness: not recorded: ai/tasks/demo/pipe: not a regular file",
        f"harness: not recorded: {log}: changed after harness wrote it",
        f"harness: {log}: changed by something other than harness",
    ]
    assert world.sample.git("log", "-1", "--format=%s").strip() == "harness: record demo"
    # What the record holds is harness's, byte for byte: the log up to the tampering, the
    # recorded exchange and config as they were, and nothing of the planted files.
    assert committed(world, log) == (tmp / "log-before").read_bytes()
    assert committed(world, recorded) == t1_stdout
    assert committed(world, "ai/harness.toml") == config
    fresh = f"ai/exchanges/demo/{t2}"
    assert committed(world, f"{fresh}/meta.json") == (root / fresh / "meta.json").read_bytes()
    for planted in ("prompt.ndjson", "../link", "../planted.txt"):
        assert committed(world, os.path.normpath(f"{fresh}/{planted}")) is None
    for planted in ("notes.md", "pipe"):
        assert committed(world, f"ai/tasks/demo/{planted}") is None
    again = world.next()
    assert again.returncode == 2 and again.stderr.startswith(f"harness: {log}:"), again.stderr


# -- 10. limits: a bomb in a test, a worker past its memory -----------------------------------

FORK = """
def test_fork():
    pids = []
    for _ in range(N):
        pid = os.fork()
        if pid == 0:
            import time
            time.sleep(2)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    report({"forked": len(pids)})
"""


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
def test_a_test_that_forks_thousands_fails_its_check_naming_the_limit(
    world: World, hostile: bool
) -> None:
    lines = evil_source(FORK, N=3000 if hostile else 300)
    configure(world, test=PYTEST, limits={"processes": 1000})
    plant(world, lines)
    base, before = world.sample.head(), snapshot(world.tmp)
    res = world.next()
    if not hostile:
        assert res.returncode == 0, res.stderr
        (passed,) = named(world, "test_passed")
        assert "over_limit" not in passed["details"]
        assert [reported(tail) for tail in tails(world)] == [{"forked": 300}] * 2
        return
    assert res.returncode == 1
    failed = named(world, "test_failed")
    assert len(failed) == 2  # its retry forks as many
    said = (
        "over its limit of processes: it had 1000 processes and threads at once "
        "(raise it with [sandbox.limits] processes in ai/harness.toml)"
    )
    assert failed[0]["details"]["over_limit"] == said
    assert f"run 1: {said}" in failed[0]["error"] and "\n" not in failed[0]["error"]
    assert world.sample.names()[-1] == "blocker_encountered"
    assert_untouched(before, snapshot(world.tmp))
    assert_branch_kept(world, base, set())


HOLDER = """#!/bin/sh
if [ "$1" = --version ]; then echo "holder-agent 1.0"; exit 0; fi
# Holds 2 GiB, every page written, then answers.
"$HARNESS_PYTHON" -I -c "import time; b = bytearray(2 << 30); b[::4096] = b'x' * len(b[::4096]); time.sleep(1)" || exit 9
cat <<'ANSWER'
{answer}
ANSWER
"""  # noqa: E501


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
def test_a_worker_past_its_memory_fails_hard_and_its_entry_can_raise_it(
    world: World, hostile: bool
) -> None:
    answer = calc_answer("holder")
    program = world.tmp / "holder-agent"
    program.write_text(HOLDER.format(answer=json.dumps(answer)))
    program.chmod(0o755)
    entry: dict[str, Any] = {"id": "holder", "cmd": str(program), "version": ">=1"}
    entry["capabilities"] = ["localized-impl"]
    if not hostile:  # the twin: its entry raises the limit the config sets
        entry["limits"] = {"memory": "4GiB"}
    reg = world.sample.read_json("ai/agents/registry.json")
    reg["agents"].append(entry)
    world.sample.write_json("ai/agents/registry.json", reg)
    world.sample.write_plan([subtask("T1", agent="holder")])
    configure(world, test=UNITTEST, limits={"memory": "1GiB"})
    res = world.next()
    if not hostile:
        assert res.returncode == 0, res.stderr
        assert world.sample.names()[-1] == "step_completed"
        return
    assert res.returncode == 1
    (failed,) = named(world, "subagent_failed")  # hard: not retried
    said = (
        "over its limit of memory: its processes held more than 1GiB (raise it with "
        '"limits": {"memory": …} of agent holder in ai/agents/registry.json, '
        "or [sandbox.limits] memory in ai/harness.toml)"
    )
    assert failed["details"]["kind"] == "hard" and failed["error"] == said
    (call,) = named(world, "subagent_invoked")
    meta = orjson.loads(
        (world.root / "ai/exchanges/demo" / call["details"]["call_id"] / "meta.json").read_bytes()
    )
    assert meta["over_limit"] == said and meta["exit_code"] == -9
    assert world.cli("audit", "demo").returncode == 0
