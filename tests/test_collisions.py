"""Tests for the spellings another file system takes for one file."""

from __future__ import annotations

import pytest

from harness.gate.collisions import Spellings, key


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("README.md", "readme.md"),
        ("docs/caf\u00e9.md", "docs/cafe\u0301.md"),  # NFC and NFD
        ("docs/guide.md", "docs/guide.md."),
        ("docs/guide.md", "docs/guide.md  "),
        ("docs/Guide.md", "docs/guide.MD. "),
    ],
)
def test_one_file_elsewhere(one: str, other: str) -> None:
    assert key(one) == key(other)
    assert Spellings([one]).clash(other) == one


def test_distinct_names_do_not_clash() -> None:
    tree = Spellings(["docs/guide.md", "src/app.py"])
    assert tree.clash("docs/guide2.md") is None
    assert tree.clash("docs/guide.md") is None  # the very spelling is the same file everywhere
    assert tree.clash("src/new/app.py") is None


def test_a_folder_clashes_by_its_spelling() -> None:
    assert Spellings(["docs/guide.md"]).clash("DOCS/new.md") == "docs"


def test_removing_frees_a_spelling_once_nothing_uses_it() -> None:
    tree = Spellings(["docs/a.md", "docs/b.md"])
    tree.remove("docs/a.md")
    assert tree.clash("Docs/x.md") == "docs"  # docs/b.md still holds the folder
    tree.remove("docs/b.md")
    assert tree.clash("Docs/x.md") is None
    tree.remove("docs/never.md")  # not a file of the tree: nothing changes
    tree.add("Docs/x.md")
    assert tree.clash("docs/y.md") == "Docs"
