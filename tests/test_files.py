"""Scratch-tree helpers: what untrusted code may leave in a copy never blocks or escapes harness."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base import files, folders
from harness.base.errors import InvalidInput


def test_untrusted_reads_refuse_links_fifos_and_cap_size(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"a" * 100)
    (tmp_path / "link").symlink_to(tmp_path / "big")
    os.mkfifo(tmp_path / "pipe")
    assert files.read_untrusted(tmp_path / "big", 10) == b"a" * 10
    assert files.read_untrusted(tmp_path / "link", 10) is None
    assert files.read_untrusted(tmp_path / "pipe", 10) is None
    assert files.read_untrusted(tmp_path / "missing", 10) is None


def tree(root: Path) -> Path:
    """root/ai/tasks/t/plan.json, and the same tree outside root for symlinks to reach."""
    for base in (root / "repo", root / "outside"):
        (base / "ai/tasks/t").mkdir(parents=True)
        (base / "ai/tasks/t/plan.json").write_text(f"plan in {base.name}")
    return root / "repo"


@pytest.mark.parametrize("component", ["ai", "ai/tasks", "ai/tasks/t", "ai/tasks/t/plan.json"])
def test_a_record_is_read_with_no_symlink_at_any_component(tmp_path: Path, component: str) -> None:
    repo = tree(tmp_path)
    path = repo / "ai/tasks/t/plan.json"
    assert files.read_regular(path, "plan", repo) == b"plan in repo"  # the twin
    folders.remove(repo / component)
    (repo / component).symlink_to(tmp_path / "outside" / component)
    assert path.read_bytes() == b"plan in outside"  # what following it would read
    with pytest.raises(InvalidInput, match=r"^plan: .*a symlink$") as refused:
        files.read_regular(path, "plan", repo)
    if component != "ai/tasks/t/plan.json":
        assert f"{component} is a symlink" in str(refused.value)
    if component != "ai/tasks/t/plan.json":
        with pytest.raises(InvalidInput, match=f"^{component}: a symlink: harness writes"):
            files.check_folders(repo, path)


def test_a_record_file_is_regular_and_bounded(tmp_path: Path) -> None:
    repo = tree(tmp_path)
    fifo = repo / "ai/tasks/t/progress.ndjson"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match=r"^log: not a regular file$"):
        files.read_regular(fifo, "log", repo)  # refused at once: no writer is waited for
    assert files.read_inside(repo, "ai/tasks/t/plan.json", 12, "plan") == b"plan in repo"
    with pytest.raises(InvalidInput, match=r"^plan: larger than 11 bytes$"):
        files.read_inside(repo, "ai/tasks/t/plan.json", 11, "plan")
    with pytest.raises(InvalidInput, match="outside the repository"):
        files.read_regular(tmp_path / "outside/ai/tasks/t/plan.json", "plan", repo)
    assert files.read_inside(repo, "ai/tasks/t/missing.json", 12, "x") is None


def test_writes_go_only_into_plain_folders(tmp_path: Path) -> None:
    repo = tree(tmp_path)
    files.atomic_write(repo / "ai/exchanges/t/c/meta.json", b"{}", repo)  # made as needed
    (repo / "ai/agents").write_text("a file where a folder belongs")
    (repo / "ai/tasks/t").rename(repo / "ai/tasks/moved")
    (repo / "ai/tasks/t").symlink_to(tmp_path / "outside/ai/tasks/t")
    for path, why in (
        (repo / "ai/agents/registry.json", "ai/agents: not a folder"),
        (repo / "ai/tasks/t/plan.json", "ai/tasks/t: a symlink"),
    ):
        with pytest.raises(InvalidInput, match=f"^{why}: harness writes only into plain"):
            files.atomic_write(path, b"x", repo)
    assert (tmp_path / "outside/ai/tasks/t/plan.json").read_text() == "plan in outside"


@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"") + b"\n")))
def test_lines_are_the_files_lines_until_one_is_too_long(chunks: list[bytes]) -> None:
    data = b"".join(chunks)
    assert list(files.lines(io.BytesIO(data), 41)) == chunks
    cut = list(files.lines(io.BytesIO(data), 8))
    assert cut == [c if len(c) <= 8 else c[:8] for c in chunks]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("x = " + "[" * 5000 + "]" * 5000, "nested too deep"),
        ("x = " + "{a = " * 5000 + "1" + "}" * 5000, "nested too deep"),
        ("x = nan", "nan is not a finite number"),
        ("x = -inf", "-inf is not a finite number"),
        ("x = [", "Invalid value"),
        ("x = [{y = 9223372036854775808}]", "9223372036854775808 is past 64 bits"),
        ("x = -9223372036854775809", "-9223372036854775809 is past 64 bits"),
        ("x = -9223372036854775808", None),
        ('x = ["a\\u0000b"]', "a string holds a NUL character"),
        ('"x\\u0000" = 1', "a string holds a NUL character"),
        ("x = 1", None),
        ("x = " + "[" * 50 + "1.5" + "]" * 50, None),
    ],
)
def test_toml_is_read_or_refused_in_one_line(text: str, problem: str | None) -> None:
    """tomllib recurses once a nested value: a deep one is refused, not a RecursionError."""
    if problem is None:
        assert "x" in files.load_toml(text.encode(), "ai/harness.toml")
        return
    with pytest.raises(InvalidInput, match=f"^ai/harness.toml: .*{problem}"):
        files.load_toml(text.encode(), "ai/harness.toml")


def test_a_users_toml_may_hold_nan_where_harness_asks_for_no_finite_number() -> None:
    assert files.load_toml(b"x = inf", "config.toml", finite=False) == {"x": float("inf")}


def test_a_copys_file_is_removed_and_read_only_below_it(tmp_path: Path) -> None:
    """A checks' file the config names in a copy, which untrusted code may have made a
    symlink or a folder: nothing outside the copy is removed or read."""
    copy, outside = tmp_path / "copy", tmp_path / "outside"
    (copy / "out").mkdir(parents=True)
    outside.mkdir()
    (outside / "victim").write_text("kept")
    (copy / "linked").symlink_to(outside, target_is_directory=True)
    (copy / "dir").mkdir()
    for rel in ("linked/victim", "../outside/victim", "dir", ""):
        files.remove_inside(copy, rel)
        assert files.read_untrusted(copy / rel, 100, copy) is None
    assert (outside / "victim").read_text() == "kept" and (copy / "dir").is_dir()
    assert files.read_untrusted(outside / "victim", 100, copy) is None  # an absolute path
    (copy / "out/report.json").write_text("{}")  # the twin: a plain file in the copy
    assert files.read_untrusted(copy / "out/report.json", 100, copy) == b"{}"
    files.remove_inside(copy, "out/report.json")
    assert not (copy / "out/report.json").exists()
