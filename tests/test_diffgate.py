"""Tests for the diff gate: the hostile corpus, real `git apply`, and property checks."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base.errors import Halted
from harness.gate.diffgate import OWNED_PREFIX, Change, DiffRefused, apply_order, check
from harness.gate.patchnames import git_pairs
from tests.hostile_corpus import BASE_FILES, BENIGN, HOSTILE, OPEN, SYMLINKS, Case, rules_for

GATE = [case for case in HOSTILE if case.stage == "gate"]
APPLY = [case for case in HOSTILE if case.stage == "apply"]

# What each benign case must yield: (kind, path, old_path) per entry.
EXPECTED: dict[str, list[tuple[str, str, str | None]]] = {
    "new_empty_file": [("add", "src/empty.py", None)],
    "modify_git": [("modify", "src/app.py", None)],
    "modify_plain": [("modify", "src/util.py", None)],
    "add_in_creates": [("add", "tests/test_util.py", None)],
    "add_plain": [("add", "docs/new.md", None)],
    "delete_cited": [("delete", "src/util.py", None)],
    "rename_pure": [("rename", "src/utils.py", "src/util.py")],
    "rename_with_edit": [("rename", "docs/usage.md", "docs/guide.md")],
    "mode_change_allowed": [("modify", "src/app.py", None)],
    "new_executable_allowed": [("add", "tests/run.sh", None)],
    "no_newline_at_end": [("modify", "src/util.py", None)],
    "space_in_name": [("add", "docs/user guide.md", None)],
    "unicode_name": [("add", "docs/café.md", None)],
    "manifest_when_deps_allowed": [("modify", "pyproject.toml", None)],
    "several_entries": [
        ("modify", "src/app.py", None),
        ("add", "tests/test_more.py", None),
        ("delete", "src/util.py", None),
    ],
    "longest_name": [("add", "docs/" + "é" * 125 + "xxxxx", None)],
    "gnu_timestamps": [("modify", "src/util.py", None)],
    "posix_timestamp": [("modify", "src/util.py", None)],
    "gnu_new_file": [("add", "docs/new.md", None)],
    "gnu_deletion": [("delete", "src/util.py", None)],
    "quoted_name": [("add", "src/é.py", None)],
    "mnemonic_prefix": [("modify", "src/app.py", None)],
    "traditional_creation": [("add", "docs/new.md", None)],
    "quoted_rename": [("rename", "docs/guíde.md", "docs/guide.md")],
    "traditional_orig": [("modify", "src/util.py", None)],
    "traditional_no_prefix": [("modify", "pyproject.toml", None)],
    "case_only_rename": [("rename", "docs/Guide.md", "docs/guide.md")],
    "delete_then_create": [("delete", "src/util.py", None), ("add", "src/util.py", None)],
    "rename_then_change": [
        ("rename", "src/utils.py", "src/util.py"),
        ("modify", "src/utils.py", None),
    ],
    "two_patches_of_one_file": [("modify", "src/util.py", None)] * 2,
    "change_then_delete": [("modify", "src/util.py", None), ("delete", "src/util.py", None)],
    "trailing_whitespace": [("add", "tests/data/trailing.toml", None)],
    "blank_line_at_eof_and_space_before_tab": [("modify", "src/util.py", None)],
}


def _ids(cases: list[Case]) -> list[str]:
    return [case.name for case in cases]


def test_corpus_shape() -> None:
    names = [case.name for case in HOSTILE + BENIGN]
    assert len(names) == len(set(names))
    assert len(GATE) >= 45
    assert len(APPLY) >= 3
    assert set(EXPECTED) == {case.name for case in BENIGN}


@pytest.mark.parametrize("case", GATE, ids=_ids(GATE))
def test_hostile_refused(case: Case) -> None:
    with pytest.raises(DiffRefused) as refused:
        check(case.diffs, rules_for(case))
    assert case.reason in refused.value.reason
    assert isinstance(refused.value, Halted)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("case", BENIGN + APPLY, ids=_ids(BENIGN + APPLY))
def test_passes_gate(case: Case) -> None:
    changes = check(case.diffs, rules_for(case))
    assert [change.patch for change in changes] == [d["patch"] for d in case.diffs]
    if case.name in EXPECTED:
        got = [(change.kind, change.path, change.old_path) for change in changes]
        assert got == EXPECTED[case.name]


def test_refusal_message_is_one_line() -> None:
    refused = DiffRefused("path traversal", "a\nb\rc\\d", 3)
    assert str(refused) == "diff 3 (a\\x0ab\\x0dc\\d): path traversal"
    assert (refused.reason, refused.file, refused.index) == ("path traversal", "a\nb\rc\\d", 3)
    # A refusal of the whole batch names no entry.
    assert str(DiffRefused("too many files (3 > 2)")) == "too many files (3 > 2)"


def test_mode_change_needs_permission_both_ways() -> None:
    case = next(case for case in BENIGN if case.name == "mode_change_allowed")
    with pytest.raises(DiffRefused, match="mode change"):
        check(case.diffs, dataclasses.replace(rules_for(case), allow_mode_change=False))


# --- a real repository: benign cases apply, "apply" cases pass the gate but git refuses ---


def _git(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo.parent),
    }
    return subprocess.run(
        ["git", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("gate") / "repo"
    root.mkdir()
    for name, text in BASE_FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8", newline="")
    for name, target in SYMLINKS.items():
        (root / name).symlink_to(target)
    for args in (("init", "-q", "."), ("add", "-A"), ("commit", "-qm", "base")):
        assert _git(root, *args).returncode == 0
    yield root


def _apply_check(repo: Path, case: Case) -> subprocess.CompletedProcess[str]:
    patch = "".join(str(d["patch"]) for d in case.diffs)
    return _git(repo, "apply", "--check", "--whitespace=nowarn", "-", stdin=patch)


@pytest.mark.parametrize("case", BENIGN, ids=_ids(BENIGN))
def test_benign_applies(repo: Path, case: Case) -> None:
    check(case.diffs, rules_for(case))
    result = _apply_check(repo, case)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("case", APPLY, ids=_ids(APPLY))
def test_apply_stage_refused_by_git(repo: Path, case: Case) -> None:
    check(case.diffs, rules_for(case))
    result = _apply_check(repo, case)
    assert result.returncode != 0, f"git accepted {case.name}"


# --- properties ---

_HOSTILE_SEGMENTS = ["..", ".", "", ".GIT", ".git", ".Git.", "git~1", ".git ", "src", "a", "b.py"]


def _escapes(path: str) -> bool:
    """True when `path` leaves the root or lands in (or under) a .git directory."""
    if path.startswith("/"):
        return True
    depth = 0
    for segment in path.split("/"):
        if segment == "..":
            depth -= 1
            if depth < 0:
                return True
        elif segment not in ("", "."):
            depth += 1
            if segment.casefold().rstrip(" .") in (".git", "git~1"):
                return True
    return False


def _modify(path: str) -> str:
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-old\n+new\n"


@given(
    segments=st.lists(st.sampled_from(_HOSTILE_SEGMENTS), min_size=1, max_size=6),
    absolute=st.booleans(),
    as_rename=st.booleans(),
)
def test_escaping_paths_never_accepted(
    segments: list[str], absolute: bool, as_rename: bool
) -> None:
    path = ("/" if absolute else "") + "/".join(segments)
    if not _escapes(path):
        return
    if as_rename:
        patch = f"diff --git a/x.py b/{path}\nsimilarity index 100%\n"
        patch += f"rename from x.py\nrename to {path}\n"
    else:
        patch = _modify(path)
    rules = dataclasses.replace(OPEN, cited=frozenset({path, "x.py"}))
    with pytest.raises(DiffRefused):
        check([{"file": path, "patch": patch}], rules)


_SAFE_SEGMENT = st.from_regex(r"[A-Za-z0-9_.-]{1,12}", fullmatch=True).filter(
    lambda s: s.strip(".") != "" and s.casefold().rstrip(".") not in (".git", "git~1")
)


@given(st.lists(_SAFE_SEGMENT, min_size=1, max_size=5))
def test_safe_modification_accepted(segments: list[str]) -> None:
    path = "/".join(segments)
    if (path.casefold() + "/").startswith(OWNED_PREFIX):
        return
    rules = dataclasses.replace(OPEN, cited=frozenset({path}))
    assert check([{"file": path, "patch": _modify(path)}], rules) == [
        Change("modify", path, None, _modify(path))
    ]


_FRAGMENTS = st.sampled_from(
    [
        "diff --git a/x b/x",
        "--- a/x",
        "+++ b/x",
        "--- /dev/null",
        "+++ /dev/null",
        "@@ -1 +1 @@",
        "@@ -0,0 +1,2 @@",
        "@@ -1,2 +1 @@",
        "-old",
        "+new",
        " ctx",
        "",
        "\\ No newline at end of file",
        "new file mode 100644",
        "deleted file mode 100644",
        "old mode 100644",
        "new mode 100755",
        "rename from x",
        "rename to y",
        "similarity index 100%",
        "index 1234567..89abcde 100644",
        "GIT binary patch",
        "@@ -99999999999999999999 +1 @@",
    ]
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(
    file=st.text(max_size=20),
    patch=st.one_of(
        st.text(max_size=300),
        st.lists(st.one_of(_FRAGMENTS, st.text(max_size=10)), max_size=12).map(
            lambda lines: "\n".join(lines) + "\n"
        ),
    ),
)
def test_only_diffrefused_escapes(file: str, patch: str) -> None:
    rules = dataclasses.replace(OPEN, cited=frozenset({file, "x"}))
    with contextlib.suppress(DiffRefused):
        check([{"file": file, "patch": patch}], rules)


# --- a `diff --git` line that splits many ways ---

_SPLITS = 200_000
_MANY_WAYS = "x b/" * _SPLITS  # "a/" + this splits at each of its " b/"


def test_many_way_header_is_split_only_where_vouched() -> None:
    rest = "a/" + _MANY_WAYS + "x"
    assert rest.count(" b/") == _SPLITS
    assert git_pairs(rest, []) == []  # halves of different lengths
    tail = "x b/" * (_SPLITS - 1) + "x"
    assert git_pairs(rest, ["x", None]) == [("x", tail), (tail, "x")]
    path = _MANY_WAYS + "x"
    assert git_pairs(f"a/{path} b/{path}", [path, path]) == [(path, path)]


@pytest.mark.parametrize(
    ("file", "patch", "reason"),
    [
        ("x", f"diff --git a/{_MANY_WAYS}\n@@ -1 +1 @@\n-a\n+b\n", "missing ---/+++ header"),
        (
            "x",
            f"diff --git a/{_MANY_WAYS}y\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
            "path too long",
        ),
        (_MANY_WAYS + "x", _modify(_MANY_WAYS + "x"), "path too long"),
    ],
    ids=["unnamed", "named_elsewhere", "named_by_both"],
)
def test_many_way_header_is_refused(file: str, patch: str, reason: str) -> None:
    # Keeping every split would not finish here: 200k splits of up to 800 kB each.
    rules = dataclasses.replace(OPEN, cited=frozenset({file}), max_bytes=1 << 24)
    with pytest.raises(DiffRefused) as refused:
        check([{"file": file, "patch": patch}], rules)
    assert reason in refused.value.reason


# Any text but a newline, and runs of the pieces that make a header split more than one way.
_NAME = st.one_of(
    st.text(st.characters(exclude_characters="\n"), max_size=40),
    st.lists(st.sampled_from(["x", " ", "/", "a/", " b/", "b/"]), max_size=12).map("".join),
)


@given(_NAME)
def test_equal_halves_split_back(path: str) -> None:
    assert git_pairs(f"a/{path} b/{path}", []) == [(path, path)]


@given(_NAME, _NAME)
def test_named_sides_split_back(old: str, new: str) -> None:
    assert (old, new) in git_pairs(f"a/{old} b/{new}", [old, new])


def _change(kind: str, path: str, old: str | None = None) -> Change:
    return Change(kind, path, old, "")  # type: ignore[arg-type]


def test_apply_order_keeps_a_path_in_section_order() -> None:
    first = _change("add", "src/util.py/inner.py")
    gone = _change("delete", "src/util.py")
    edit = _change("modify", "src/app.py")
    late = _change("delete", "src/app.py")
    # a deletion no earlier section touched goes first (a file may become a folder) ...
    assert apply_order([first, gone]) == [gone, first]
    # ... one an earlier section touched stays after it
    assert apply_order([edit, late, gone]) == [gone, edit, late]
