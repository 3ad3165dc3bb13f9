"""Tests for reading a patch header's names as `git apply` does."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.gate.diffgate import check
from harness.gate.patchnames import Unreadable, git_pairs, is_epoch, sides, timestamp_len, unquote
from tests.hostile_corpus import OPEN


@pytest.mark.parametrize(
    ("text", "name", "rest"),
    [
        ('"b/caf\\303\\251.txt"', "b/café.txt", ""),
        ('"a/x\\ty" tail', "a/x\ty", " tail"),
        ('"a/q\\"\\\\"', 'a/q"\\', ""),
    ],
)
def test_unquote(text: str, name: str, rest: str) -> None:
    assert unquote(text) == (name, rest)


@pytest.mark.parametrize(
    ("text", "reason"),
    [('"a/\\377"', "not UTF-8"), ('"a/\\q"', "bad escape"), ('"a/x', "unterminated")],
)
def test_unquote_refuses(text: str, reason: str) -> None:
    with pytest.raises(Unreadable, match=reason):
        unquote(text)


@pytest.mark.parametrize(
    ("line", "cut"),
    [
        ("a/x\t2026-01-01 00:00:00.000000000 +0000", 36),
        ("a/x\t2026-01-01 00:00:00", 20),
        ("a/x\t2026-01-01 00:00:00 +05:30", 27),
        ("a/x  2026-01-01", 12),  # blanks before the date: git's "whitespace damage"
        ("a/x", 0),
        ("a/x\tjunk", 0),
        ("2026-01-01", 0),  # a date with nothing before it is a name
    ],
)
def test_timestamp_len(line: str, cut: int) -> None:
    assert timestamp_len(line) == cut


@pytest.mark.parametrize(
    ("line", "epoch"),
    [
        ("a/x\t1970-01-01 00:00:00.000000000 +0000", True),
        ("a/x\t1969-12-31 19:00:00 -0500", True),
        ("a/x\t1970-01-01 05:30:00 +05:30", True),
        ("a/x\t1970-01-01 00:00:01 +0000", False),
        ("a/x\t1970-01-01 01:00:00 +0000", False),
        ("a/x 1970-01-01 00:00:00 +0000", False),
    ],
)
def test_is_epoch(line: str, epoch: bool) -> None:
    assert is_epoch(line) is epoch


@pytest.mark.parametrize(
    ("minus", "plus", "traditional", "read"),
    [
        ("a/f.orig", "b/f", True, ("f", "f")),
        ("a/f", "b/f~", True, ("f", "f")),
        ("f.orig", "f", True, ("f", "f")),  # no slash anywhere: git strips nothing
        ("src/x", "src/x", True, ("x", "x")),  # else the first folder, whatever it is
        ("old/x y 2005-04-12 02:14:06 -07:00", "new/x y", True, ("x y", "x y")),
        ("a/f", "b/g", True, ("f", "g")),  # unrelated: left for the gate to refuse
        ('"a/caf\\303\\251"', '"b/caf\\303\\251"', False, ("café", "café")),
        ("a/x y\t", "b/x y\t", False, ("x y", "x y")),
        ("/dev/null", "b/n\t2026-01-01 00:00:00 +0000", True, (None, "n")),
        ("a/n\t1970-01-01 00:00:00 +0000", "b/n\t2026-01-01 00:00:00 +0000", True, (None, "n")),
        ("a/n\t2026-01-01 00:00:00 +0000", "b/n\t1970-01-01 00:00:00 +0000", True, ("n", None)),
    ],
)
def test_sides(
    minus: str, plus: str, traditional: bool, read: tuple[str | None, str | None]
) -> None:
    assert sides(minus, plus, traditional=traditional) == read


@pytest.mark.parametrize(
    ("minus", "plus", "reason"),
    [
        ("x", "b/x", "missing a/ b/ prefix"),  # one a folder to strip, one not
        ("/dev/null", "/etc/x", "absolute path"),
        ("a/x\tjunk", "b/x", "control character"),
        ('"a/x" junk', "b/x", "control character"),
    ],
)
def test_sides_refused(minus: str, plus: str, reason: str) -> None:
    with pytest.raises(Unreadable, match=reason):
        sides(minus, plus, traditional=True)


# Names git quotes, pads with a TAB, or that look like what follows a name.
NAMES = [
    "café.txt",
    "日本語/ü ö.md",
    "user guide.md",
    'quote".txt',
    "x~",
    "notes 2024-01-01",
    "at 2024-01-01 00:00:00 +0000",
    "a b/c d.txt",
]


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(args, cwd=cwd, capture_output=True, check=False)


@pytest.mark.parametrize("name", NAMES)
def test_names_git_and_gnu_diff_write_are_read_as_git_reads_them(tmp_path: Path, name: str) -> None:
    """Each name written by `git diff` (core.quotePath as it comes) and by GNU `diff -uN`:
    the gate reads the very path, and git applies the patch."""
    repo = tmp_path / "repo"
    assert _run(tmp_path, "git", "init", "-q", str(repo)).returncode == 0
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text("x\n")
    assert _run(repo, "git", "add", "--", name).returncode == 0
    by_git = _run(repo, "git", "diff", "--cached").stdout.decode("utf-8")
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
    (tmp_path / "b" / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "b" / name).write_text("x\n")
    by_gnu = _run(tmp_path, "diff", "-uN", f"a/{name}", f"b/{name}").stdout.decode("utf-8")
    assert _run(repo, "git", "rm", "-q", "--cached", "--", name).returncode == 0
    (repo / name).unlink()
    for patch in (by_git, by_gnu):
        [change] = check([{"file": name, "patch": patch}], OPEN)
        assert (change.kind, change.path) == ("add", name)
        applied = subprocess.run(
            ["git", "apply", "--check", "-"], cwd=repo, input=patch.encode(), capture_output=True
        )
        assert applied.returncode == 0, applied.stderr


@pytest.mark.parametrize(("old", "new"), [("x", "x"), ("a b/c", "d e/f"), ("src/x", "src/y")])
@pytest.mark.parametrize(("left", "right"), [("a", "b"), ("i", "w"), ("c", "i")])
def test_any_prefix_splits_back(old: str, new: str, left: str, right: str) -> None:
    assert (old, new) in git_pairs(f"{left}/{old} {right}/{new}", [old, new])
