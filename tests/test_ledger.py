"""The ledger: entries journaled in harness's state folder, a kill's torn line forgotten."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base import files
from harness.base.errors import InvalidInput
from harness.record.ledger import Entries, Ledger, digest, enter, parse
from harness.repository.layout import Layout

from .builders import FAST, Waiting

SHA = st.sampled_from(["a" * 64, "b" * 64, None])
PATHS = st.lists(st.sampled_from("xyz"), min_size=1, max_size=3).map(lambda p: "ai/" + "/".join(p))
NOTES = st.lists(st.tuples(PATHS, SHA), max_size=12)


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    (tmp_path / ".git").mkdir()
    return Layout(tmp_path)


def journal(notes: list[tuple[str, str | None]]) -> bytes:
    return b"".join(files.dumps({"path": p, "sha256": sha}) + b"\n" for p, sha in notes)


@FAST
@given(NOTES, st.binary(max_size=20).filter(lambda b: b"\n" not in b))
def test_a_journal_reads_back_as_its_notes_whatever_a_kill_tore(
    notes: list[tuple[str, str | None]], torn: bytes
) -> None:
    applied: Entries = {}
    for path, sha in notes:
        enter(applied, path, sha)
    data = journal(notes)
    assert parse(data + torn, "j") == (applied, len(data))


@FAST
@given(NOTES)
def test_a_removal_leaves_nothing_entered_below_it(notes: list[tuple[str, str | None]]) -> None:
    entries: Entries = {}
    for path, sha in notes:
        enter(entries, path, sha)
        if sha is None:
            assert not [p for p in entries if p.startswith(path + "/")]
    for path, sha in notes[-1:]:
        assert entries[path] == sha


def test_a_damaged_journal_is_one_line(layout: Layout) -> None:
    path = layout.ledger("demo")
    path.parent.mkdir(parents=True)
    path.write_bytes(journal([("ai/x", "a" * 64)]) + b'["not", "an", "entry"]\n')
    with pytest.raises(InvalidInput, match=r"ledger.ndjson:2: not a line harness wrote"):
        Ledger(layout, "demo")


def test_notes_survive_a_new_process_and_a_torn_line_is_cut(layout: Layout) -> None:
    ledger = Ledger(layout, "demo")
    target = layout.root / "ai/tasks/demo/checklist.md"
    ledger.write(target, b"- [ ] T1\n")
    assert target.read_bytes() == b"- [ ] T1\n"
    with layout.ledger("demo").open("ab") as fh:
        fh.write(b'{"path": "ai/tasks/demo/che')  # a kill in the middle of a note
    again = Ledger(layout, "demo")
    assert again.entries == {"ai/tasks/demo/checklist.md": digest(b"- [ ] T1\n")}
    again.remove(target.parent)
    assert not target.parent.exists()
    assert Ledger(layout, "demo").entries == {"ai/tasks/demo": None}
    again.clear()
    assert Ledger(layout, "demo").entries == {}


def test_a_read_enters_the_bytes_it_returns(layout: Layout) -> None:
    plan = layout.plan("demo")
    plan.parent.mkdir(parents=True)
    plan.write_bytes(b"{}")
    ledger = Ledger(layout, "demo")
    assert ledger.read(plan) == b"{}"
    assert ledger.holds(plan, b"{}") and not ledger.holds(plan, b"{} ")
    assert ledger.read(layout.config) is None
    assert layout.rel(layout.config) not in ledger.entries


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder"])
def test_a_read_refuses_what_is_not_a_regular_file_without_opening_it(
    layout: Layout, kind: str
) -> None:
    plan = layout.plan("demo")
    plan.parent.mkdir(parents=True)
    outside = layout.root / "outside.json"
    outside.write_bytes(b"{}")
    waiting = None
    if kind == "symlink":
        plan.symlink_to(outside)
    elif kind == "fifo":
        waiting = Waiting(plan)
    else:
        plan.mkdir()
    ledger = Ledger(layout, "demo")
    why = {"symlink": "a symlink", "fifo": "not a regular file", "folder": "not a regular file"}
    with pytest.raises(InvalidInput, match=f"^ai/tasks/demo/plan.json: {why[kind]}$"):
        ledger.read(plan)
    assert ledger.entries == {}
    if waiting is not None:
        waiting.assert_unopened()
