"""Fixtures: real temporary git repositories driven through the real `harness` CLI; the e2e
marker, set from what a test uses, and the guard that keeps every other test in process."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.base import folders
from harness.boundary import sandbox
from harness.importers import demo

CLOCK = "2026-01-01T00:00:00Z"
ROOT = Path(__file__).resolve().parent.parent


class Sample:
    """The demo's sample repository, with the plan and worker script under the test's control."""

    def __init__(self, root: Path, script: Path) -> None:
        self.root = root
        self.script = script

    # -- running ---------------------------------------------------------------------------

    def cli(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        timeout: float = 120,
        quiet: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """`harness *args` on this repository; `next` and `run` with --quiet unless told
        otherwise, so stderr holds only the notices and errors a test asserts on (progress
        lines have their own tests, in test_live.py)."""
        full = {**os.environ, "HARNESS_CLOCK": CLOCK, **(env or {})}
        hush = ["--quiet"] if quiet and args[:1] in (("next",), ("run",)) else []
        return subprocess.run(
            [sys.executable, "-m", "harness.cli", *args, *hush, "--repo", str(self.root)],
            capture_output=True,
            text=True,
            env=full,
            timeout=timeout,
            check=False,
        )

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.root, capture_output=True, text=True, check=True
        ).stdout

    # -- state -----------------------------------------------------------------------------

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def events(self, task: str = "demo") -> list[dict[str, Any]]:
        path = self.root / "ai" / "tasks" / task / "progress.ndjson"
        if not path.exists():
            return []
        return [orjson.loads(line) for line in path.read_bytes().splitlines()]

    def names(self, task: str = "demo") -> list[str]:
        return [ev["event"] for ev in self.events(task)]

    def status_outside_ai(self) -> str:
        lines = self.git("status", "--porcelain", "--untracked-files=all").splitlines()
        return "\n".join(line for line in lines if not line[3:].startswith("ai/"))

    # -- inputs ----------------------------------------------------------------------------

    def write_plan(self, subtasks: list[dict[str, Any]], task: str = "demo") -> None:
        path = self.root / "ai" / "tasks" / task / "plan.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"task_id": task, "created": CLOCK, "subtasks": subtasks}
        path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))

    def write_script(self, answers: list[dict[str, Any]]) -> None:
        self.script.write_bytes(orjson.dumps({"answers": answers}))

    def write_json(self, rel: str, doc: object) -> None:
        (self.root / rel).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))

    def read_json(self, rel: str) -> Any:
        return orjson.loads((self.root / rel).read_bytes())

    def set_config(self, text: str) -> None:
        (self.root / "ai" / "harness.toml").write_text(text)

    def uncontain(self) -> None:
        """[sandbox] mode = "off": for tests whose fake CLIs report through a file outside
        the repository, which the sandbox rightly forbids (containment has its own tests)."""
        with (self.root / "ai" / "harness.toml").open("a") as fh:
            fh.write('\n[sandbox]\nmode = "off"\n')

    def commit_all(self, message: str) -> None:
        self.git("add", "-A")
        self.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)


def demo_cli(*args: str, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    """`harness demo *args` as a user starts it: the real clock, no repository of ours."""
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_CLOCK"}
    return subprocess.run(
        [python, "-m", "harness.cli", "demo", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def subtask(sid: str, patch: str | None = None, **fields: Any) -> dict[str, Any]:
    """A plan entry in the sample repository; defaults edit src/calc.py."""
    base = {
        "id": sid,
        "role": "localized-impl",
        "goal": f"Goal of {sid}",
        "inputs": ["src/calc.py"],
        "acceptance": [],
        "write_scope": "src/**",
    }
    return base | fields


def ok(
    sid: str,
    *diffs: tuple[str, str],
    retry: bool | None = None,
    artifacts: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A scripted successful answer carrying (file, patch) diffs."""
    answer: dict[str, Any] = {
        "subtask": sid,
        "result": {
            "diffs": [{"file": f, "patch": p} for f, p in diffs],
            "artifacts": artifacts or [],
            "notes": [],
        },
    }
    if retry is not None:
        answer["retry"] = retry
    return answer


def err(sid: str, kind: str, message: str = "boom", retry: bool | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {"subtask": sid, "error": {"message": message, "kind": kind}}
    if retry is not None:
        answer["retry"] = retry
    return answer


def append_line_patch(path: str, old_last_lines: list[str], start: int, new: str) -> str:
    """A git-style patch adding `new` after the given last lines of `path` (which begin at
    line `start`)."""
    n = len(old_last_lines)
    body = "".join(f" {line}\n" for line in old_last_lines)
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -{start},{n} +{start},{n + 1} @@\n{body}+{new}\n"
    )


def new_file_patch(path: str, lines: list[str]) -> str:
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


# Appends one line to src/calc.py of the sample (its last three lines start at line 3).
CALC_TAIL = ["", "def add(a, b):", "    return a + b"]


def calc_patch(new: str = "VALUE = 1") -> str:
    return append_line_patch("src/calc.py", CALC_TAIL, 3, new)


def scripted(where: Path) -> Sample:
    """The demo's repository in `where`/repo, its worker answering from `where`/script.json,
    which the test writes."""
    root = where / "repo"
    root.mkdir()
    demo.build(root)
    s = Sample(root, where / "script.json")
    reg = s.read_json("ai/agents/registry.json")
    reg["agents"][0]["args"] = ["--script", str(s.script)]
    reg["agents"][0]["read"] = [str(s.script)]
    s.write_json("ai/agents/registry.json", reg)
    s.write_script([])
    return s


def completed_demo(where: Path) -> Sample:
    """The demo task run to completion through the real CLI, in `where`/repo."""
    root = where / "repo"
    root.mkdir()
    demo.build(root)
    made = Sample(root, root / "agents" / "script.json")
    res = made.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    return made


# A suite started in the background by a shell without job control (`cmd &` in a script)
# ignores SIGINT, and so would every harness it starts: the Ctrl-C tests need it as a
# user's terminal delivers it. (Python turns an ignored SIGINT at start into no handler.)
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def chain(top: Path, depth: int, name: str = "d") -> None:
    """`top`/name/name/... `depth` folders deep, a file at the bottom: made by descriptor,
    as a test's code could make it, past what a path can name."""
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            below = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        os.close(os.open("bottom", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    finally:
        os.close(fd)


@pytest.fixture
def deep(tmp_path: Path) -> Iterator[Path]:
    """tmp_path for a test that leaves folders deeper than Python recurses (chain): emptied
    by folders.remove after it, as pytest's own cleanup (shutil.rmtree) would stop there."""
    yield tmp_path
    for entry in tmp_path.iterdir():
        folders.remove(entry)


@pytest.fixture
def sample(tmp_path: Path) -> Sample:
    return scripted(tmp_path)


@pytest.fixture
def box(tmp_path: Path) -> sandbox.Box:
    """An empty work folder and home in a sandbox that hides the test's own folder."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    return sandbox.Box(work, home, hide=(tmp_path,))


# -- the e2e marker ----------------------------------------------------------------------------
#
# `pytest -m "not e2e"` is the developer's fast loop: it leaves out every test that starts the
# real harness CLI, an agent CLI (real or fake), bwrap or a worker process. The marker is set
# here from what a test uses, so a new test is placed without anyone remembering to mark it:
# the fixtures below, or in its code, a fixture's or a helper's of the tests it calls, a name
# below or a module below as a string (`python -m` it). The rest mark themselves: a module
# that is end to end throughout with `pytestmark`, a test with `@pytest.mark.e2e`; the guard
# further down fails a test that should have.
E2E_FIXTURES = frozenset({"sample", "box"})
E2E_NAMES = frozenset({"cli", "demo_cli", "completed_demo"})
E2E_MODULES = ("harness.cli", "harness.workers.")


def _names(code: types.CodeType) -> Iterator[str]:
    """The global and attribute names of `code` and its nested code (comprehensions, lambdas,
    inner functions); a string constant naming one of E2E_MODULES counts as the name `cli`."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, str) and const.startswith(E2E_MODULES):
            yield "cli"
        elif isinstance(const, types.CodeType):
            yield from _names(const)


def _uses_the_cli(func: Callable[..., Any], seen: set[int]) -> bool:
    """Whether `func`, or a function of the tests it names (followed from module to module),
    names the CLI."""
    code = getattr(func, "__code__", None)
    if code is None or id(code) in seen:
        return False
    seen.add(id(code))
    scope = getattr(func, "__globals__", {})
    for name in _names(code):
        if name in E2E_NAMES:
            return True
        helper = scope.get(name)
        if (
            isinstance(helper, types.FunctionType)
            and helper.__module__.startswith("tests")
            and _uses_the_cli(helper, seen)
        ):
            return True
    return False


def _is_e2e(item: pytest.Function) -> bool:
    """Whether the test, or a fixture it uses, uses an e2e fixture or names the CLI."""
    if E2E_FIXTURES & set(item.fixturenames):
        return True
    seen: set[int] = set()
    fixtures = item._fixtureinfo.name2fixturedefs.values()
    funcs = [item.function, *(defs[-1].func for defs in fixtures if defs)]
    return any(_uses_the_cli(getattr(f, "__func__", f), seen) for f in funcs)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the cores. Most end-to-end tests spend part of their
    time waiting on what they started (an agent CLI, a model API's timeout, a sandbox), and
    one worker per core left the cores idle then: the whole suite of .ci/run on 2 cores took
    1235 s with 2 workers, 1012 s with 3 and 1029 s with 4."""
    return len(os.sched_getaffinity(0)) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        marked = item.get_closest_marker("e2e") is not None
        if isinstance(item, pytest.Function) and not marked and _is_e2e(item):
            item.add_marker(pytest.mark.e2e)


# What a test not marked e2e must not start: the harness CLI or a worker module (named in a
# word: `-m harness.cli`, or code given to `-c` that imports it), bwrap, an agent CLI (the real
# one or a fake of tests/; a stand-in the test wrote in a temporary folder is fine) or a
# launcher (`*-cli`).
_AGENT_CLIS = frozenset({"claude", "codex", "gemini"})
_TEMP = Path(tempfile.gettempdir()).resolve()


def _e2e_program(args: Any, env: Mapping[str, str] | None) -> str | None:
    """The command line `args` (as Popen takes them) if it starts what only an e2e test may."""
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    words = [os.fsdecode(word) for word in argv]
    for word in words:
        base = os.path.basename(word)
        if any(m in word for m in E2E_MODULES) or base == "bwrap" or base.endswith("-cli"):
            return " ".join(words)
        if base in _AGENT_CLIS:
            found = shutil.which(word, path=(env or os.environ).get("PATH"))
            where = Path(found).resolve() if found is not None else None
            if where is not None and (
                where.is_relative_to(ROOT) or not where.is_relative_to(_TEMP)
            ):
                return " ".join(words)
    return None


@contextlib.contextmanager
def watching() -> Iterator[list[str]]:
    """The programs only an e2e test may start, as they are started while inside (they still
    run)."""
    started: list[str] = []
    real = subprocess.Popen.__init__

    def watched(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
        program = _e2e_program(args, kw.get("env"))
        if program is not None:
            started.append(program)
        real(self, args, *rest, **kw)

    setattr(subprocess.Popen, "__init__", watched)  # noqa: B010 (mypy: no assigning methods)
    try:
        yield started
    finally:
        setattr(subprocess.Popen, "__init__", real)  # noqa: B010


def _in_process(item: pytest.Item) -> Generator[None, None, None]:
    """Fails a test outside the e2e marker that started, in its setup (a module's fixtures
    too), call or teardown, what only an e2e test may: the fast loop would otherwise grow slow
    unseen. The process still runs; the phase fails after it."""
    if item.get_closest_marker("e2e"):
        return (yield)
    with watching() as started:
        result = yield
    if started:
        pytest.fail(f"not marked e2e but started {started[0]!r}", pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _in_process(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _in_process(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _in_process(item))
