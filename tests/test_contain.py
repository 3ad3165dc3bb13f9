"""The worker's copy: kept between calls, moved between bases by what differs, and always
exactly the visible files of the base it names."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.boundary import registry, sandbox
from harness.boundary.contain import Ahead, Containment
from harness.repository.layout import Layout
from harness.repository.repo import Repo
from harness.spec import config

from .builders import git
from .conftest import calc_patch, new_file_patch, ok, scripted, subtask


def commit(root: Path, files: dict[str, str | None], links: dict[str, str] | None = None) -> str:
    """Write (or, for None, delete) files and commit them all."""
    for rel, text in files.items():
        path = root / rel
        if text is None or path.is_dir():
            git(root, "rm", "-rq", rel)
        if text is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for rel, target in (links or {}).items():
        (root / rel).symlink_to(target)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "c", "--allow-empty")
    return git(root, "rev-parse", "HEAD").strip()


def listing(folder: Path) -> dict[str, str]:
    found = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[rel] = "-> " + str(path.readlink())
        elif path.is_file():
            found[rel] = path.read_text() + ("+x" if path.stat().st_mode & 0o100 else "")
        else:
            found[rel] = "/"
    return found


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, Containment, Repo]:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-qb", "main")
    layout = Layout(root)
    contain = Containment(layout, replace(config.load(layout.config), visible=("**",)))
    return root, contain, Repo(root)


def fresh(contain: Containment, git_: Repo, base: str, where: Path) -> dict[str, str]:
    contain.view(git_, base, where)
    return listing(where)


def test_moving_between_bases_matches_a_fresh_export(
    repo: tuple[Path, Containment, Repo], tmp_path: Path
) -> None:
    root, contain, g = repo
    view = tmp_path / "state" / "view"
    bases = [
        commit(root, {"a": "1", "d/x": "x", "d/y": "y", "ai/tasks/t/plan.json": "{}"}),
        commit(root, {"a": None, "a/b": "file became folder", "d/x": "x2"}),
        commit(root, {"d": "folder became file"}),
        commit(root, {"run.sh": "#!/bin/sh\n"}, links={"link": "a/b"}),
        commit(root, {"link": None, "a": None, "ai/roles/r.md": "brief"}),
    ]
    (root / "run.sh").chmod(0o755)
    bases.append(commit(root, {}))
    for i, base in enumerate([*bases, bases[0], bases[3], bases[1]]):
        contain.view(g, base, view)
        assert listing(view) == fresh(contain, g, base, tmp_path / f"fresh{i}"), i
    assert "ai/tasks/t/plan.json" not in listing(view)


def test_a_copy_left_half_moved_is_rebuilt(
    repo: tuple[Path, Containment, Repo], tmp_path: Path
) -> None:
    root, contain, g = repo
    one = commit(root, {"a": "1", "b": "2"})
    two = commit(root, {"a": "changed"})
    view = tmp_path / "view"
    contain.view(g, one, view)
    (view / "stray").write_text("left by a crash")
    (view / "b").write_text("half-written")
    contain.view(g, one, view)  # the marker still names `one`: nothing to do
    assert (view / "stray").exists()
    view.with_name("view.held").unlink()  # as a crash mid-move leaves it
    contain.view(g, two, view)
    assert listing(view) == {"a": "changed", "b": "2"}


def test_a_change_of_visible_rebuilds_the_copy(
    repo: tuple[Path, Containment, Repo], tmp_path: Path
) -> None:
    root, contain, g = repo
    base = commit(root, {"src/a": "1", "docs/b": "2"})
    view = tmp_path / "view"
    contain.view(g, base, view)
    narrow = replace(contain, config=replace(contain.config, visible=("src/**",)))
    narrow.view(g, base, view)
    assert listing(view) == {"src": "/", "src/a": "1"}


# -- the next call's sandbox, started ahead ------------------------------------------------


class Sandbox:
    """A held sandbox as Ahead keeps it: its key, and whether it was dropped."""

    def __init__(self, key: tuple[object, ...]) -> None:
        self.key, self.dropped = key, False

    def drop(self) -> None:
        self.dropped = True


def test_a_sandbox_held_is_taken_only_for_its_command_on_what_it_binds(
    tmp_path: Path,
) -> None:
    view, home, key = tmp_path / "view", tmp_path / "home", tmp_path / "key.json"
    view.mkdir()
    home.mkdir()
    key.write_text("token")
    box = sandbox.Box(view, home, files=(key,), home_files=((tmp_path / "absent", "a"),))
    ahead = Ahead()

    def held() -> Sandbox:
        made = Sandbox(("k",))
        ahead.hold(tmp_path, made, box)  # type: ignore[arg-type]
        return made

    one = held()
    assert ahead.take(tmp_path / "other", ("k",), box) is None  # another slot's
    assert ahead.take(tmp_path, ("k",), box) is one and not one.dropped
    assert ahead.take(tmp_path, ("k",), box) is None  # taken once
    two = held()
    assert ahead.take(tmp_path, ("another agent",), box) is None and two.dropped
    # Made anew, each is another file or folder to a bind made before, whatever its inode.
    for remake in (
        lambda: (view.rmdir(), view.mkdir()),
        lambda: (key.unlink(), key.write_text("token")),
        lambda: (tmp_path / "absent").write_text("now there"),
    ):
        made = held()
        remake()
        assert ahead.take(tmp_path, ("k",), box) is None and made.dropped
    (tmp_path / "absent").unlink()
    key.write_text("rewritten in place: a bind shows it")
    same = held()
    assert ahead.take(tmp_path, ("k",), box) is same
    four, five = held(), held()
    assert four.dropped and not five.dropped  # one per slot: the newer
    ahead.drop()
    assert five.dropped and ahead.take(tmp_path, ("k",), box) is None


@pytest.mark.e2e
def test_each_call_runs_in_the_sandbox_its_slot_s_last_call_started(
    repo: tuple[Path, Containment, Repo], tmp_path: Path
) -> None:
    root, contained, g = repo
    base = commit(root, {"a.txt": "one"})
    agent = registry.Agent(
        id="cat",
        cmd="/bin/sh",
        version="1",
        capabilities=("localized-impl",),
        # What it finds in its home, then what it leaves there for the next call to find.
        args=("-c", "cat; echo $(cat a.txt); ls -A $HOME; touch $HOME/left; chmod 777 $HOME"),
        env=(),
        timeouts=None,
    )
    ahead = Ahead()
    running = replace(contained, ahead=ahead)
    scratch, staging = tmp_path / "slot", tmp_path / "staging"
    staging.mkdir()
    outputs, used = [], []
    try:
        for i, text in enumerate(["first", "second", "third"]):
            (staging / "stdin").write_text(f"{text}\n")
            held = ahead._ready.get(scratch)
            res = running.call(agent, g, base, staging, {"soft_s": 30, "hard_s": 60}, scratch)
            assert res.code == 0, (staging / "stderr.log").read_text()
            outputs.append((staging / "stdout.ndjson").read_text())
            if held is not None:  # used: its init started the command, which exited 0
                assert held[0]._proc is not None
                used.append(held[0]._proc.returncode)
            base = commit(root, {"a.txt": f"changed {i}"})
        # Each call's home is a folder made for it: nothing left by the one before.
        assert outputs == ["first\none\n", "second\nchanged 0\n", "third\nchanged 1\n"]
        assert (scratch / "home").stat().st_mode & 0o777 != 0o777
        assert used == [0, 0] and scratch in ahead._ready
        # A copy made anew (its marker gone, as a crash leaves it) is another folder: the
        # sandbox held on the old one is dropped, and the call gets a fresh one.
        (scratch / "view.held").unlink()
        stale = ahead._ready[scratch][0]
        (staging / "stdin").write_text("fourth\n")
        res = running.call(agent, g, base, staging, {"soft_s": 30, "hard_s": 60}, scratch)
        assert (staging / "stdout.ndjson").read_text() == "fourth\nchanged 2\n"
        assert stale._proc is not None and stale._proc.returncode == -9
    finally:
        ahead.drop()
    assert ahead._ready == {}


# A worker that leaves a chain of folders 1,500 deep in its home, then answers as the
# scripted worker does: what a CLI, or a command it ran, could leave behind.
DEEP_HOME = """#!/bin/sh
if [ "$1" != --version ]; then
  cd "$HOME" && i=0 && while [ $i -lt 1500 ]; do mkdir d && cd d || exit 9; i=$((i+1)); done
fi
exec "$HARNESS_PYTHON" -I -m harness.workers.scripted "$@"
"""


@pytest.mark.e2e
def test_a_home_left_1500_folders_deep_stops_neither_the_call_nor_the_next(deep: Path) -> None:
    s = scripted(deep)
    worker = s.root / "agents" / "deep-cli"
    worker.write_text(DEEP_HOME)
    worker.chmod(0o755)
    reg = s.read_json("ai/agents/registry.json")
    reg["agents"][0]["cmd"] = "agents/deep-cli"
    s.write_json("ai/agents/registry.json", reg)
    s.commit_all("a worker that leaves a deep home")
    s.write_plan([subtask("T1"), subtask("T2", depends_on=["T1"], write_scope="docs/**",
                  creates=["docs/x.md"])])  # fmt: skip
    s.write_script([
        ok("T1", ("src/calc.py", calc_patch())),
        ok("T2", ("docs/x.md", new_file_patch("docs/x.md", ["# x"]))),
    ])  # fmt: skip
    res = s.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    assert s.names().count("step_completed") == 2 and s.names()[-1] == "task_completed"
