"""harness.repository.objects: objects read through one `git cat-file --batch`, trees and
commits in git's own format, held to what git itself writes and lists."""

from __future__ import annotations

import gc
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base.errors import HarnessError, InvalidInput
from harness.repository import objects
from harness.repository.objects import Entry, commit_object
from harness.repository.repo import Repo, find_root

from .builders import TREES, contents, drawn_tree


def git(root: Path, *args: str, data: bytes = b"", env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=root, input=data, capture_output=True, check=True, env=env
    )
    return done.stdout.decode().strip()


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return Repo(root)


def blob(root: Path, data: bytes) -> str:
    return git(root, "hash-object", "-w", "--stdin", data=data)


def tree(root: Path, *lines: tuple[str, str, str, bytes]) -> str:
    """A tree from (mode, type, id, name) entries, by git mktree."""
    listing = b"".join(f"{m} {t} {o}\t".encode() + n + b"\0" for m, t, o, n in lines)
    return git(root, "mktree", "-z", "--missing", data=listing)


def commit(root: Path, tree_id: str, *parents: str) -> str:
    args = [a for p in parents for a in ("-p", p)]
    return git(root, "commit-tree", tree_id, *args, data=b"m\n", env=identity(0))


def identity(seconds: int, name: str = "n", email: str = "e@x") -> dict[str, str]:
    date = f"@{seconds} +0000"  # "@": a bare small number is no date to git
    return {
        "PATH": "/usr/bin:/bin",
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
        "GIT_COMMITTER_DATE": date,
    }


NAMES = st.text(st.characters(codec="ascii", categories=("L", "Nd")), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(
    name=NAMES,
    user=NAMES,
    seconds=st.integers(0, 2**33),
    message=st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\0\r")).map(
        lambda m: m + "\n"
    ),
    parents=st.integers(0, 2),
)
def test_a_commit_object_is_what_git_commit_tree_writes(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    user: str,
    seconds: int,
    message: str,
    parents: int,
) -> None:
    root = tmp_path_factory.mktemp("c")
    git(root, "init", "-q")
    base = tree(root, ("100644", "blob", blob(root, b"x\n"), b"f"))
    above: list[str] = []
    for _ in range(parents):
        above.append(commit(root, base, *above[-1:]))
    who = (name, f"{user}@x")
    raw = commit_object(base, above, who, f"{seconds} +0000", message)
    ours = git(root, "hash-object", "-t", "commit", "-w", "--stdin", data=raw)
    args = [a for p in above for a in ("-p", p)]
    env = identity(seconds, *who)
    assert ours == git(root, "commit-tree", base, *args, data=message.encode(), env=env)


def test_a_commit_is_dated_by_its_timestamp_and_moves_no_ref(repo: Repo) -> None:
    base = tree(repo.root, ("100644", "blob", blob(repo.root, b"x\n"), b"f"))
    made = repo.commit(base, None, "m\n", ("n", "e@x"), "2026-01-01T00:00:00Z")
    env = identity(1767225600)  # 2026-01-01T00:00:00Z
    assert made == git(repo.root, "commit-tree", base, data=b"m\n", env=env)
    assert repo.odb.get("HEAD") is None
    repo.close()


@pytest.mark.parametrize("who", [("a<b", "e@x"), ("n", "e>x"), ("n\nm", "e@x"), ("n", "e\n@x")])
def test_an_identity_that_would_move_a_header_is_refused(who: tuple[str, str]) -> None:
    with pytest.raises(HarnessError, match="commit identity"):
        commit_object("0" * 40, [], who, "0 +0000", "m\n")


def test_head_is_read_when_asked_so_a_moved_branch_is_seen_moved(repo: Repo) -> None:
    with pytest.raises(InvalidInput, match="no commits yet"):
        repo.head()
    base = tree(repo.root, ("100644", "blob", blob(repo.root, b"1\n"), b"f"))
    first = commit(repo.root, base)
    git(repo.root, "update-ref", "refs/heads/main", first)
    assert repo.head() == first
    second = commit(repo.root, base, first)
    git(repo.root, "update-ref", "refs/heads/main", second)  # another process moves it
    assert repo.head() == second and repo.tree_of(second) == base
    repo.close()


@pytest.mark.parametrize("rev", ["", "HEAD\nHEAD", "no-such-ref", "x blob 3", "HEAD\0"])
def test_a_revision_naming_nothing_reads_as_none(repo: Repo, rev: str) -> None:
    base = tree(repo.root, ("100644", "blob", blob(repo.root, b"1\n"), b"f"))
    git(repo.root, "update-ref", "refs/heads/main", commit(repo.root, base))
    assert repo.odb.get(rev) is None
    # The process is still in step with its answers.
    assert repo.odb.commit_tree("HEAD") == base


def test_entries_are_found_by_path_whatever_they_are(repo: Repo) -> None:
    root = repo.root
    text, link = blob(root, b"text\n"), blob(root, b"target")
    inner = tree(root, ("100755", "blob", text, b"run"), ("100644", "blob", text, b"f\nx"))
    top = tree(
        root,
        ("100644", "blob", text, b"a"),
        ("120000", "blob", link, b"link"),
        ("160000", "commit", "1" * 40, b"sub"),
        ("40000", "tree", inner, b"dir"),
    )
    at = commit(root, top)
    odb = repo.odb
    assert odb.entry(at, "a") == Entry("100644", text)
    assert odb.entry(at, "dir/run") == Entry("100755", text)
    assert odb.entry(top, "dir/f\nx") == Entry("100644", text)  # a tree answers as its commit
    assert odb.entry(at, "link") == Entry("120000", link) and not Entry("120000", link).regular
    assert (
        odb.entry(at, "sub") == Entry("160000", "1" * 40) and Entry("160000", "").kind == "commit"
    )
    for missing in ("b", "a/b", "dir/", "dir//run", "", "sub/x", "link/x"):
        assert odb.entry(at, missing) is None, missing
    assert repo.read(at, "a") == b"text\n" and repo.read(at, "link") is None
    assert repo.read(at, "dir") is None
    for unknown in ("no-such", text):  # nothing, or a blob
        with pytest.raises(HarnessError, match="names no commit or tree"):
            repo.read(unknown, "a")
    assert repo.folders(at, "") == [] and repo.folders(at, "dir") == []
    assert repo.folders(top, "a") == []
    repo.close()


MODES = st.sampled_from(
    [("100644", "blob"), ("100755", "blob"), ("120000", "blob"), ("40000", "tree")]
)
FILENAMES = st.binary(min_size=1, max_size=10).filter(
    lambda n: b"/" not in n and b"\0" not in n and n not in (b".", b"..", b".git")
)


@settings(max_examples=60, deadline=None)
@given(listing=st.dictionaries(FILENAMES, MODES, max_size=8))
def test_a_tree_reads_as_git_ls_tree_lists_it(
    tmp_path_factory: pytest.TempPathFactory, listing: dict[bytes, tuple[str, str]]
) -> None:
    root = tmp_path_factory.mktemp("t")
    git(root, "init", "-q")
    empty = git(root, "mktree", data=b"")
    some = blob(root, b"some\n")
    top = tree(root, *((m, t, empty if t == "tree" else some, n) for n, (m, t) in listing.items()))
    raw = subprocess.run(
        ["git", "cat-file", "tree", top], cwd=root, capture_output=True, check=True
    ).stdout
    parsed = [(name, e.mode, e.oid) for name, e in objects.entries(raw, 20)]
    listed = subprocess.run(
        ["git", "ls-tree", "-z", top], cwd=root, capture_output=True, check=True
    ).stdout
    expected = []
    for record in filter(None, listed.split(b"\0")):
        meta, name = record.split(b"\t", 1)
        mode, _, oid = meta.decode().split(" ")
        expected.append((name, mode.lstrip("0"), oid))
    assert parsed == expected


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=80))
def test_any_bytes_read_as_a_tree_are_entries_or_refused(data: bytes) -> None:
    try:
        found = list(objects.entries(data, 20))
    except HarnessError as exc:
        assert "malformed" in str(exc)
    else:
        assert all(len(e.oid) == 40 for _, e in found)


def diff_tree(root: Path, old: str, new: str) -> list[tuple[str, Entry | None, Entry | None]]:
    """What `git diff-tree -r --no-renames` says differs, as objects.Changed holds it."""
    out = subprocess.run(
        ["git", "diff-tree", "-r", "-z", "--no-renames", old, new],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout
    records = iter(out.split(b"\0"))
    found = []
    for meta in records:
        if not meta:
            continue
        old_mode, new_mode, old_id, new_id, _ = meta.decode().lstrip(":").split(" ")
        path = next(records).decode("utf-8", "surrogateescape")
        sides = [
            None if int(mode, 8) == 0 else Entry(f"{int(mode, 8):o}", oid)
            for mode, oid in ((old_mode, old_id), (new_mode, new_id))
        ]
        found.append((path, *sides))
    return sorted(found, key=lambda f: f[0])


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Repo, list[str]]]:
    root = tmp_path_factory.mktemp("drawn")
    git(root, "init", "-q")
    found = Repo(root)
    yield found, contents(root)
    found.close()


@settings(max_examples=80, deadline=None)
@given(old=TREES, new=TREES)
def test_the_files_two_trees_differ_in_are_what_git_diff_tree_lists(
    drawn: tuple[Repo, list[str]], old: dict[bytes, object], new: dict[bytes, object]
) -> None:
    repo, blobs = drawn
    a, b = drawn_tree(repo.root, old, blobs), drawn_tree(repo.root, new, blobs)
    assert [tuple(c) for c in repo.odb.changes(a, b)] == diff_tree(repo.root, a, b)
    assert repo.odb.changes(commit(repo.root, b), b) == []  # a commit answers as its tree


def test_trees_nested_past_pythons_stack_are_compared(repo: Repo) -> None:
    deep = "/".join(["d"] * 1200) + "/f"
    stream = (
        "commit refs/heads/main\ncommitter n <e@x> 0 +0000\ndata 2\nm\n"
        f"M 100644 inline {deep}\ndata 2\nx\n\n"
    )
    git(repo.root, "fast-import", "--quiet", data=stream.encode())
    empty = git(repo.root, "mktree", data=b"")
    assert [c.path for c in repo.odb.changes(empty, "main")] == [deep]
    with pytest.raises(HarnessError, match="names no commit or tree"):
        repo.odb.changes(empty, "no-such")
    repo.close()


def test_threads_share_one_reader_one_request_at_a_time(repo: Repo) -> None:
    ids = [blob(repo.root, f"{i}\n".encode()) for i in range(40)]
    wrong: list[str] = []

    def read(i: int) -> None:
        for _ in range(20):
            found = repo.odb.get(ids[i])
            if found is None or found.data != f"{i}\n".encode():
                wrong.append(ids[i])

    threads = [threading.Thread(target=read, args=(i,)) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
    repo.close()


def test_a_reader_killed_starts_again_and_one_left_open_stops_when_dropped(
    repo: Repo,
) -> None:
    some = blob(repo.root, b"x\n")
    assert repo.odb.get(some) is not None
    proc = repo.odb._proc
    assert proc is not None
    proc.kill()
    proc.wait()
    assert repo.odb.get(some) is not None and repo.odb._proc is not proc
    repo.close()
    dropped = Repo(repo.root)
    assert dropped.odb.get(some) is not None
    left = dropped.odb._proc
    assert left is not None
    del dropped
    gc.collect()
    assert left.poll() is not None


def test_the_root_is_where_git_finds_it(tmp_path: Path) -> None:
    root = tmp_path / "work"
    (root / "a" / "b").mkdir(parents=True)
    git(root, "init", "-q")
    assert find_root(root / "a" / "b") == root
    git(tmp_path, "init", "-q", "--bare", "bare.git")
    with pytest.raises(InvalidInput, match="a bare repository has no working tree"):
        find_root(tmp_path / "bare.git")
    (tmp_path / "file").write_text("x")
    for nowhere in (tmp_path / "file", tmp_path / "absent"):
        with pytest.raises(InvalidInput, match="not inside a git repository"):
            find_root(nowhere)


@pytest.mark.parametrize("name", ["evil", "with.dots", "Upper"])
def test_no_filter_the_configuration_names_runs_in_harnesss_git(tmp_path: Path, name: str) -> None:
    """A filter driver is a command from the configuration: git runs it on checkout and
    on hashing. harness's git blanks every one, whatever its name."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    ran = tmp_path / "ran"
    for setting in ("clean", "smudge"):
        git(root, "config", f"filter.{name}.{setting}", f"touch {ran}; cat")
    (root / ".gitattributes").write_text(f"* filter={name}\n")
    (root / "f").write_text("x\n")
    base = tree(
        root,
        ("100644", "blob", blob(root, b"* filter=" + name.encode() + b"\n"), b".gitattributes"),
        ("100644", "blob", blob(root, b"y\n"), b"f"),
    )
    at = commit(root, base)
    git(root, "update-ref", "refs/heads/main", at)
    git(root, "read-tree", at)
    repo = Repo(root)
    assert repo.sync(at, ["f"]) == [] and (root / "f").read_bytes() == b"y\n"
    assert repo.unmatched(["f"], [at]) == []
    repo.close()
    assert not ran.exists()
