"""Whole folders (harness/base/folders.py): whatever untrusted code leaves in a tree — a chain of
folders deeper than Python recurses or a path can be long, locked folders, links, FIFOs — is
removed, and copied or listed within bounds, never raising anything but TreeError."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base import files, folders

from .conftest import chain


def test_copy_skips_specials_and_opens_locked_folders(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "locked").mkdir(parents=True)
    (src / "locked" / "f").write_text("x")
    (src / "locked" / "f").chmod(0o000)
    (src / "link").symlink_to("/etc/passwd")
    os.mkfifo(src / "pipe")
    (src / "locked").chmod(0)
    folders.copy(src, tmp_path / "copy")
    copy = tmp_path / "copy"
    assert (copy / "locked" / "f").read_text() == "x"
    assert (copy / "link").is_symlink() and os.readlink(copy / "link") == "/etc/passwd"
    assert not (copy / "pipe").exists()
    folders.remove(src)
    assert not src.exists()


@pytest.mark.parametrize("name", ["d", "a-folder-name-of-forty-characters-or-so-x"])
def test_a_chain_1500_deep_is_removed_and_a_copy_or_listing_of_it_refused(
    deep: Path, name: str
) -> None:
    top = deep / "home"
    chain(top, 1500, name)  # with the long name, 63 KB of path: past PATH_MAX
    with pytest.raises(folders.TreeError, match=r"deeper than 512 folders"):
        folders.copy(top, deep / "copy")
    with pytest.raises(folders.TreeError, match=r"deeper than 32 folders"):
        list(folders.entries(top, 32, 1000))
    folders.remove(deep / "copy")
    folders.remove(top)
    assert not top.exists() and not (deep / "copy").exists()


def test_a_chain_within_the_bound_is_copied_whole(tmp_path: Path) -> None:
    chain(tmp_path / "src", 300)
    folders.copy(tmp_path / "src", tmp_path / "copy")
    got = list(folders.entries(tmp_path / "copy", 512, 1000))
    assert [i.kind for i in got] == ["dir"] * 300 + ["file"]
    assert got[-1].rel == "/".join(["d"] * 300 + ["bottom"])


def test_entries_past_the_bound_are_refused_and_the_tree_still_removed(tmp_path: Path) -> None:
    top = tmp_path / "store"
    top.mkdir()
    for i in range(20_000):
        os.close(os.open(top / f"f{i}", os.O_WRONLY | os.O_CREAT))
    with pytest.raises(folders.TreeError, match=r"more than 10000 entries"):
        list(folders.entries(top, 32, 10_000))
    folders.remove(top)
    assert not top.exists()


def test_a_record_walk_names_a_folder_too_deep_instead_of_recursing(deep: Path) -> None:
    chain(deep / "ai" / "exchanges", 1500)
    (deep / "ai" / "exchanges" / "plain.json").write_text("{}")
    found = dict(files.walk(deep, "ai/exchanges"))
    assert found["ai/exchanges/plain.json"] == b"{}"
    deep = [rel for rel, why in found.items() if why == f"deeper than {files.WALK_DEPTH} folders"]
    assert deep == ["ai/exchanges/" + "/".join(["d"] * (files.WALK_DEPTH + 1))]


def test_remove_takes_a_file_a_link_and_nothing(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    (tmp_path / "l").symlink_to(tmp_path / "f")
    folders.remove(tmp_path / "l")
    assert (tmp_path / "f").exists()
    folders.remove(tmp_path / "f")
    folders.remove(tmp_path / "absent")
    assert list(tmp_path.iterdir()) == []


def test_a_link_to_a_folder_is_copied_as_a_link_and_never_entered(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "way").symlink_to(outside)
    folders.copy(tmp_path / "src", tmp_path / "copy")
    assert [i.rel for i in folders.entries(tmp_path / "copy", 8, 8)] == ["way"]
    folders.remove(tmp_path / "src")
    assert (outside / "secret").read_text() == "s"  # removing the link left its target


def test_merge_replaces_namesakes_and_keeps_the_rest(tmp_path: Path) -> None:
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "sub" / "a").write_text("new")
    (tmp_path / "dest" / "sub").mkdir(parents=True)
    (tmp_path / "dest" / "sub" / "a").write_text("old")
    (tmp_path / "dest" / "b").write_text("kept")
    folders.copy(tmp_path / "src", tmp_path / "dest", merge=True)
    assert (tmp_path / "dest" / "sub" / "a").read_text() == "new"
    assert (tmp_path / "dest" / "b").read_text() == "kept"


names = st.text(alphabet="abc.-_", min_size=1, max_size=4).filter(lambda n: n not in (".", ".."))
trees = st.recursive(
    st.one_of(st.binary(max_size=20), st.text(alphabet="xyz/", min_size=1, max_size=5)),
    lambda kids: st.dictionaries(names, kids, max_size=4),
    max_leaves=12,
)


def build(where: Path, tree: object) -> None:
    if isinstance(tree, dict):
        where.mkdir()
        for name, sub in tree.items():
            build(where / name, sub)
    elif isinstance(tree, bytes):
        where.write_bytes(tree)
    else:
        where.symlink_to(str(tree))


@settings(max_examples=60, deadline=None)
@given(tree=st.dictionaries(names, trees, max_size=5))
def test_a_copy_lists_as_its_source_does_and_both_are_removed(
    tmp_path_factory: pytest.TempPathFactory, tree: dict[str, object]
) -> None:
    where = tmp_path_factory.mktemp("tree")
    build(where / "src", tree)
    folders.copy(where / "src", where / "copy")

    def listing(top: Path) -> list[tuple[str, str, str, bytes | None]]:
        return [(i.rel, i.kind, i.target, i.data) for i in folders.entries(top, 64, 1000, True)]

    assert listing(where / "copy") == listing(where / "src")
    # The order the session digest had with Path.rglob, sorted: a store's digest is unchanged.
    paths = sorted((where / "src").rglob("*"))
    assert [i.rel for i in folders.entries(where / "src", 64, 1000)] == [
        p.relative_to(where / "src").as_posix() for p in paths
    ]
    folders.remove(where / "src")
    folders.remove(where / "copy")
    assert list(where.iterdir()) == []
