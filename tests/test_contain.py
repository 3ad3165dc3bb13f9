"""The worker's copy: kept between calls, moved between bases by what differs, and always
exactly the visible files of the base it names."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.boundary.contain import Containment
from harness.repository.layout import Layout
from harness.repository.repo import Repo
from harness.spec import config

from .builders import git


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
