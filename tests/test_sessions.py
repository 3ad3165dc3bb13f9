"""sessions.py: a CLI's session store kept between a call and its retry, as untrusted data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.base import folders
from harness.boundary import sessions

from .conftest import chain


def store(home: Path, text: str = "turn 1\n") -> Path:
    """A claude session store as claude leaves it in its home."""
    folder = home / ".claude" / "projects" / "-sandbox-home-work"
    folder.mkdir(parents=True)
    (folder / "abc.jsonl").write_text(text)
    return folder


def test_a_store_goes_from_a_calls_home_to_the_retrys(tmp_path: Path) -> None:
    first, scratch = tmp_path / "home1", tmp_path / "scratch"
    scratch.mkdir()
    store(first)
    (first / "other").write_text("not the store")
    sessions.collect("claude", first, scratch)
    kept = tmp_path / "state" / "call-1"
    digest = sessions.keep(scratch, kept)
    assert digest is not None and len(digest) == 64
    assert sorted(p.relative_to(kept).as_posix() for p in kept.rglob("*.jsonl")) == [
        ".claude/projects/-sandbox-home-work/abc.jsonl"
    ]
    assert not (kept / "other").exists()  # only the CLI's store, nothing else of its home
    sessions.prepare(scratch, kept)
    second = tmp_path / "home2"
    second.mkdir()
    sessions.seed(second, scratch)
    assert (second / ".claude/projects/-sandbox-home-work/abc.jsonl").read_text() == "turn 1\n"


def test_the_digest_covers_each_entry_and_a_links_target_not_what_it_reaches(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    store(a)
    store(b, "turn 2\n")
    assert sessions.digest(a) != sessions.digest(b)
    outside = tmp_path / "secret"
    outside.write_text("one")
    (a / "link").symlink_to(outside)
    before = sessions.digest(a)
    outside.write_text("two")
    assert sessions.digest(a) == before


def test_a_store_reached_through_a_link_is_not_collected(tmp_path: Path) -> None:
    """The CLI (or the model driving it) made ~/.claude a link out of its home: following
    it would copy a host folder into harness's state."""
    home, scratch, elsewhere = tmp_path / "home", tmp_path / "scratch", tmp_path / "host"
    home.mkdir()
    scratch.mkdir()
    (elsewhere / "projects").mkdir(parents=True)
    (elsewhere / "projects" / "private.key").write_text("secret")
    (home / ".claude").symlink_to(elsewhere)
    sessions.collect("claude", home, scratch)
    assert sessions.keep(scratch, tmp_path / "kept") is None


def test_links_inside_a_store_are_kept_as_links(tmp_path: Path) -> None:
    home, scratch = tmp_path / "home", tmp_path / "scratch"
    scratch.mkdir()
    folder = store(home)
    (folder / "escape").symlink_to("/etc/passwd")
    sessions.collect("claude", home, scratch)
    kept = tmp_path / "kept"
    sessions.keep(scratch, kept)
    copied = kept / ".claude/projects/-sandbox-home-work/escape"
    assert copied.is_symlink() and str(copied.readlink()) == "/etc/passwd"


def test_a_store_too_large_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions, "MAX_BYTES", 10)
    home, scratch = tmp_path / "home", tmp_path / "scratch"
    scratch.mkdir()
    store(home, "x" * 11)
    sessions.collect("claude", home, scratch)
    assert sessions.keep(scratch, tmp_path / "kept") is None  # the retry starts afresh


def test_a_cli_with_no_store_or_none_named_keeps_nothing(tmp_path: Path) -> None:
    home, scratch = tmp_path / "home", tmp_path / "scratch"
    home.mkdir()
    scratch.mkdir()
    for cli in ("claude", None, "unknown-cli"):
        sessions.collect(cli, home, scratch)
        assert sessions.keep(scratch, tmp_path / "kept") is None
    sessions.prepare(scratch, tmp_path / "absent")
    sessions.seed(home, scratch)
    assert list(home.iterdir()) == []


def test_a_store_that_cannot_be_copied_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file the CLI left unreadable fails the copy: no store, and no crash of harness."""
    home, scratch = tmp_path / "home", tmp_path / "scratch"
    scratch.mkdir()
    store(home)

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(sessions.folders, "copy", refuse)
    sessions.collect("claude", home, scratch)
    assert sessions.keep(scratch, tmp_path / "kept") is None


@pytest.mark.parametrize("left", ["a chain 1,500 deep", "100,000 empty files"])
def test_a_store_past_its_bounds_is_not_kept_and_the_next_call_goes_on(
    deep: Path, left: str
) -> None:
    tmp_path = deep
    home, scratch = tmp_path / "home", tmp_path / "scratch"
    scratch.mkdir()
    where = store(home).parent
    if left.startswith("a chain"):
        chain(where, 1500)
    else:
        for i in range(100_000):
            os.close(os.open(where / f"e{i}", os.O_WRONLY | os.O_CREAT))
    sessions.collect("claude", home, scratch)
    assert sessions.keep(scratch, tmp_path / "kept") is None  # the retry starts afresh
    # What is left is removed for the next call, as any home is.
    folders.remove(home)
    assert not home.exists()
