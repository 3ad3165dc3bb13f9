"""harness.repository.history: the branch HEAD names, read from the HEAD file where git would
read the same (the same answer as `git symbolic-ref` for every HEAD file); the files of a
tree, each listing after the first moved from the one before (the same as `git ls-tree`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.errors import InvalidInput
from harness.repository.repo import Repo

from .builders import FAST, TREES, contents, drawn_tree


def git_says(root: Path) -> str | None:
    """The branch as `git symbolic-ref` names it, or None when it names none."""
    done = subprocess.run(
        ["git", "symbolic-ref", "-q", "HEAD"], cwd=root, capture_output=True, check=False
    )
    ref = done.stdout.decode().rstrip("\n")
    return ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None


def harness_says(repo: Repo) -> str | None:
    try:
        return repo.branch()
    except InvalidInput:
        return None


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    root = tmp_path_factory.mktemp("history") / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    return Repo(root)


NAMES = st.lists(
    st.sampled_from(["a", "Z", "0", ".", "-", "_", "/", "@", "{", "~", ":", " ", "é", "lock"]),
    min_size=1,
    max_size=8,
).map("".join)


@FAST
@given(NAMES, st.sampled_from(["ref: refs/heads/{}\n", "ref: refs/heads/{}", "ref:  {}\n"]))
def test_the_branch_is_what_git_says_for_any_head_file(repo: Repo, name: str, form: str) -> None:
    (repo.root / ".git" / "HEAD").write_text(form.format(name), "utf-8")
    try:
        assert harness_says(repo) == git_says(repo.root)
    finally:
        (repo.root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")


@pytest.mark.parametrize(
    "head",
    [
        "ref: refs/heads/main\n",
        "ref: refs/heads/feature/a.b-c_d\n",
        "ref: refs/heads/.invalid\n",  # what a reftable repository's HEAD file says
        "ref: refs/heads/a..b\n",
        "ref: refs/heads/a.lock/b\n",
        "ref: refs/heads/a.\n",
        "ref: refs/tags/v1\n",
        "0123456789abcdef0123456789abcdef01234567\n",
    ],
)
def test_odd_head_files_read_as_git_reads_them(repo: Repo, head: str) -> None:
    (repo.root / ".git" / "HEAD").write_text(head)
    try:
        assert harness_says(repo) == git_says(repo.root)
    finally:
        (repo.root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")


def test_a_symlinked_head_is_read_by_git(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    head = root / ".git" / "HEAD"
    head.unlink()
    os.symlink("refs/heads/main", head)  # as git once wrote HEAD, and still reads it
    assert harness_says(Repo(root)) == git_says(root) == "main"


def listed(root: Path, tree: str) -> tuple[frozenset[str], frozenset[str]]:
    """Every file of the tree, and its symlinks and submodules, as `git ls-tree -r` lists them."""
    out = subprocess.run(
        ["git", "ls-tree", "-r", "-z", tree], cwd=root, capture_output=True, check=True
    ).stdout
    every, special = set(), set()
    for record in filter(None, out.split(b"\0")):
        meta, path = record.split(b"\t", 1)
        name = path.decode("utf-8", "surrogateescape")
        every.add(name)
        if meta.split(b" ")[0] in (b"120000", b"160000"):
            special.add(name)
    return frozenset(every), frozenset(special)


@FAST
@given(st.lists(TREES, min_size=1, max_size=4))
def test_each_tree_s_files_are_what_git_ls_tree_lists(
    tmp_path_factory: pytest.TempPathFactory, specs: list[dict[bytes, object]]
) -> None:
    root = tmp_path_factory.mktemp("files")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    blobs = contents(root)
    trees = [drawn_tree(root, spec, blobs) for spec in specs]
    repo = Repo(root)
    ran: list[str] = []
    run = repo.git

    def counted(*args: str, **kwargs: Any) -> str:
        ran.append(args[0])
        return run(*args, **kwargs)

    repo.git = counted  # type: ignore[method-assign]
    try:
        for tree in [*trees, trees[0]]:  # the last moves back to the first
            assert repo.files(tree) == listed(root, tree)
    finally:
        repo.close()
    assert ran == ["ls-tree"]  # the first listed; each after it moved from the one before
