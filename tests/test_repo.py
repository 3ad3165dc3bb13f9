"""Exporting a commit into a scratch copy: byte for byte, nothing outside the destination."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.errors import Halted
from harness.repo import Repo


def git(root: Path, *args: str, data: bytes = b"") -> str:
    done = subprocess.run(["git", *args], cwd=root, input=data, capture_output=True, check=True)
    return done.stdout.decode().strip()


def tree_with(root: Path, name: str) -> str:
    blob = git(root, "hash-object", "-w", "--stdin", data=b"hi\n")
    return git(root, "mktree", data=f"100644 blob {blob}\t{name}\n".encode())


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    return Repo(root)


@pytest.mark.parametrize("name", [".git", ".GIT", ".."])
def test_a_tree_naming_git_or_a_parent_is_refused(repo: Repo, tmp_path: Path, name: str) -> None:
    with pytest.raises(Halted, match="path git itself refuses"):
        repo.export(tree_with(repo.root, name), tmp_path / "copy")
    assert not (tmp_path / "copy").exists() or not any((tmp_path / "copy").iterdir())


def test_an_ordinary_tree_is_exported_byte_for_byte(repo: Repo, tmp_path: Path) -> None:
    assert repo.export(tree_with(repo.root, "notes.txt"), tmp_path / "copy") == ["notes.txt"]
    assert (tmp_path / "copy" / "notes.txt").read_bytes() == b"hi\n"
