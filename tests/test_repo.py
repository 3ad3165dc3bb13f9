"""harness.repository.repo: exporting a commit into a scratch copy (byte for byte, nothing
outside the destination), matching and syncing the user's files, and reading history."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.base.errors import Halted
from harness.repository.repo import Repo


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
    repo.export(tree_with(repo.root, "notes.txt"), tmp_path / "copy")
    assert [p.name for p in (tmp_path / "copy").iterdir()] == ["notes.txt"]
    assert (tmp_path / "copy" / "notes.txt").read_bytes() == b"hi\n"


@pytest.mark.parametrize("count", [3, 50, 51, 120])
def test_a_copy_moved_holds_what_a_fresh_export_holds_however_many_files_change(
    repo: Repo, tmp_path: Path, count: int
) -> None:
    """A few changed files are read through the shared object reader, many through a
    `git cat-file --batch` of their own: either way the same bytes."""

    def blob(data: bytes) -> str:
        return git(repo.root, "hash-object", "-w", "--stdin", data=data)

    def made(version: int) -> str:
        lines = [f"120000 blob {blob(b'f000')}\tlink\n"]
        for i in range(count):
            mode = "100755" if i % 2 else "100644"
            lines.append(f"{mode} blob {blob(f'{i} {version}'.encode())}\tf{i:03d}\n")
        return git(repo.root, "mktree", data="".join(lines).encode())

    one, two = made(1), made(2)
    moved, fresh = tmp_path / "moved", tmp_path / "fresh"
    repo.export(one, moved)
    repo.export(two, moved, since=one)
    repo.export(two, fresh)
    for found in (moved, fresh):
        assert sorted(p.name for p in found.iterdir()) == sorted(
            [*(f"f{i:03d}" for i in range(count)), "link"]
        )
        assert (found / "link").is_symlink() and os.readlink(found / "link") == "f000"
        for i in range(count):
            assert (found / f"f{i:03d}").read_bytes() == f"{i} 2".encode()
            assert os.access(found / f"f{i:03d}", os.X_OK) == bool(i % 2)


def test_the_private_index_is_reused_only_while_it_holds_what_harness_wrote(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def patch(name: str) -> tuple[str, Path]:
        path = tmp_path / f"{name}.patch"
        path.write_text(
            f"diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n"
            f"+++ b/{name}\n@@ -0,0 +1 @@\n+{name}\n"
        )
        return name, path

    def files(tree: str) -> list[str]:
        return git(repo.root, "ls-tree", "--name-only", tree).split()

    ran: list[str] = []
    run = repo.git

    def counted(*args: str, **kwargs: Any) -> str:
        ran.append(args[0])
        return run(*args, **kwargs)

    monkeypatch.setattr(repo, "git", counted)
    index = tmp_path / "index"
    tree, _ = repo.apply_tree(tree_with(repo.root, "base"), [patch("a")], index)
    assert tree is not None and files(tree) == ["a", "base"] and ran.count("read-tree") == 1
    tree, _ = repo.apply_tree(tree, [patch("b")], index)  # on the tree it made: kept
    assert tree is not None and files(tree) == ["a", "b", "base"] and ran.count("read-tree") == 1
    # Rewritten, removed, or holding another tree: read again.
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "read-tree", tree_with(repo.root, "other")], cwd=repo.root, env=env)
    tree, _ = repo.apply_tree(tree, [patch("c")], index)
    assert tree is not None and files(tree) == ["a", "b", "base", "c"]
    index.unlink()
    tree, _ = repo.apply_tree(tree, [patch("d")], index)
    assert tree is not None and files(tree) == ["a", "b", "base", "c", "d"]
    first, _ = repo.apply_tree(tree_with(repo.root, "base"), [patch("e")], index)
    assert first is not None and files(first) == ["base", "e"]
    assert ran.count("read-tree") == 4
    # A patch refused (on the index kept) leaves no index to reuse.
    refused, why = repo.apply_tree(first, [patch("e")], index)
    assert refused is None and "git apply refused e" in why and not index.exists()
    assert ran.count("read-tree") == 4
    tree, _ = repo.apply_tree(first, [patch("f")], index)
    assert tree is not None and files(tree) == ["base", "e", "f"] and ran.count("read-tree") == 5
    repo.close()


# -- matching and syncing the user's files ---------------------------------------------------


def commit_files(root: Path, files: dict[str, str]) -> str:
    """Write the files, commit everything, and return the new HEAD."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    return git(root, "rev-parse", "HEAD")


@pytest.mark.parametrize("where", ["untracked", "staged", "none"])
def test_a_file_where_the_commit_has_none_is_not_its_version(repo: Repo, where: str) -> None:
    parent = commit_files(repo.root, {"a.txt": "a\n"})
    if where != "none":  # the twin: nothing there, as in the commit
        (repo.root / "new.txt").write_text("mine\n")
    if where == "staged":
        git(repo.root, "add", "new.txt")
        (repo.root / "new.txt").unlink()
    assert (repo.unmatched(["new.txt"], [parent]) == []) is (where == "none")


def test_working_files_are_hashed_as_git_would_add_them_whatever_their_names(
    repo: Repo,
) -> None:
    names = ["n\nl", "cr\r", '"lead', "b\\s", "d \u00e9/f", "x.txt"]
    parent = commit_files(repo.root, {".gitattributes": "*.txt text eol=crlf\n"})
    made = commit_files(repo.root, dict.fromkeys(names, "p\n"))
    # Line ends git converts on adding are no change of the user's.
    (repo.root / "x.txt").write_bytes(b"p\r\n")
    assert repo.unmatched(names, [made]) == []
    (repo.root / "cr\r").write_text("mine\n")
    assert repo.unmatched(names, [made]) == ["cr\r"]
    assert repo.unmatched(names, [parent]) == names


@pytest.mark.parametrize("name", [":!b.py", "b.py"])
def test_sync_takes_paths_as_names_never_as_patterns(repo: Repo, name: str) -> None:
    # As a pathspec, `:!b.py` is every path but b.py: the user's a.py among them.
    commit_files(repo.root, {"a.py": "p\n", name: "p\n"})
    made = commit_files(repo.root, {name: "c\n"})
    (repo.root / "a.py").write_text("mine\n")
    (repo.root / name).write_text("p\n")
    assert repo.sync(made, [name]) == []
    assert (repo.root / name).read_text() == "c\n"
    assert (repo.root / "a.py").read_text() == "mine\n"


@pytest.mark.parametrize("mine", [True, False])
def test_sync_leaves_a_folder_holding_the_users_files_where_a_file_goes(
    repo: Repo, mine: bool
) -> None:
    parent = commit_files(repo.root, {"a/b": "b\n"})
    git(repo.root, "rm", "-q", "a/b")
    made = commit_files(repo.root, {"a": "a\n"})
    git(repo.root, "reset", "-q", "--hard", parent)
    if mine:  # the twin: only the commit's own file lies in the folder
        (repo.root / "a/mine.txt").write_text("mine\n")
    assert repo.sync(made, ["a", "a/b"]) == (["a"] if mine else [])
    if mine:
        assert (repo.root / "a/mine.txt").read_text() == "mine\n"
        assert not (repo.root / "a/b").exists()
    else:
        assert (repo.root / "a").read_text() == "a\n"


# -- reading history ---------------------------------------------------------------------


def test_ancestry_existence_and_changes_between_commits(repo: Repo) -> None:
    first = commit_files(repo.root, {"a.txt": "a\n", "b.txt": "b\n"})
    second = commit_files(repo.root, {"b.txt": "B\n", "c/d.txt": "d\n"})
    assert repo.exists(first) and not repo.exists("0" * 40)
    assert repo.is_ancestor(first, second) and not repo.is_ancestor(second, first)
    assert not repo.is_ancestor("0" * 40, second)
    assert repo.changed_between(first, second) == repo.changed(second) == ["b.txt", "c/d.txt"]
    assert repo.tree_of(second) == git(repo.root, "rev-parse", "HEAD^{tree}")
    assert repo.message(second) == "c\n\n" and repo.message("0" * 40) == ""


def test_a_commit_is_found_by_its_trailer_between_two_commits(repo: Repo) -> None:
    first = commit_files(repo.root, {"a.txt": "a\n"})
    who = ("-c", "user.name=t", "-c", "user.email=t@t")
    git(repo.root, *who, "commit", "-q", "--allow-empty", "-m", "s\n\nHarness-Call-Id: c1")
    made = git(repo.root, "rev-parse", "HEAD")
    last = commit_files(repo.root, {"a.txt": "A\n"})
    assert repo.find_commit("Harness-Call-Id", "c1", first, last) == made
    assert repo.find_commit("Harness-Call-Id", "", first, last) == made  # any value
    assert repo.find_commit("Harness-Call-Id", "", made, last) is None
