"""The log chain: append-only, hash-chained, its damage found."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.clock import SteppingClock
from harness.base.errors import Halted, InvalidInput
from harness.record import progress, protocol
from harness.record.ledger import EMPTY, Ledger, digest
from harness.record.progress import GENESIS, Log, line_hash
from harness.repository.layout import Layout

from .builders import FAST

N_EVENTS = 5


def fresh_log(path: Path) -> list[str]:
    """Append N events; return the head after each append."""
    log = Log(path, "demo", SteppingClock("2026-01-01T00:00:00Z"))
    heads = []
    log.append("task_started", "ok", details={"subtasks": 2})
    heads.append(log.head)
    for i in range(N_EVENTS - 1):
        details = {"call_id": f"{i:064x}", "attempt": 1}
        log.append("subagent_invoked", "pending", step=f"T{i}", details=details)
        heads.append(log.head)
    return heads


def read(path: Path) -> Log:
    return Log(path, "demo", SteppingClock("2026-01-01T00:00:00Z"))


def test_log_appends_form_a_chain_that_rereads(tmp_path: Path) -> None:
    path = tmp_path / "progress.ndjson"
    heads = fresh_log(path)
    log = read(path)
    assert [ev["seq"] for ev in log.events] == list(range(N_EVENTS))
    assert log.head == heads[-1]
    lines = path.read_bytes().splitlines()
    assert [ev["prev"] for ev in log.events] == [GENESIS, *(line_hash(x) for x in lines[:-1])]
    assert read(tmp_path / "absent.ndjson").events == []


@pytest.fixture(scope="module")
def log_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("log") / "progress.ndjson"
    fresh_log(path)
    return path.read_bytes()


@FAST
@given(st.data())
def test_flipping_any_byte_is_detected(
    tmp_path: Path, log_bytes: bytes, data: st.DataObject
) -> None:
    last_start = log_bytes.rstrip(b"\n").rfind(b"\n") + 1
    pos = data.draw(st.integers(0, len(log_bytes) - 1), label="pos")
    mask = data.draw(st.integers(1, 255), label="mask")
    bad = bytearray(log_bytes)
    bad[pos] ^= mask
    path = tmp_path / "flipped.ndjson"
    path.write_bytes(bytes(bad))
    if pos < last_start or pos == len(log_bytes) - 1:
        with pytest.raises(InvalidInput):
            read(path)
        return
    # A change inside the last line can leave a valid line (a digit of ts, a letter of a
    # name): the chain alone cannot see it, but the head moves, so a stored head differs.
    try:
        log = read(path)
    except InvalidInput:
        return
    assert log.head != line_hash(log_bytes.splitlines()[-1])


@pytest.mark.parametrize("victim", range(N_EVENTS - 1))
def test_deleting_a_line_is_detected(tmp_path: Path, log_bytes: bytes, victim: int) -> None:
    lines = log_bytes.splitlines(keepends=True)
    del lines[victim]
    path = tmp_path / "p.ndjson"
    path.write_bytes(b"".join(lines))
    with pytest.raises(InvalidInput, match="chain broken"):
        read(path)


@pytest.mark.parametrize(("i", "j"), [(0, 1), (1, 3), (3, 4), (0, 4)])
def test_swapping_two_lines_is_detected(tmp_path: Path, log_bytes: bytes, i: int, j: int) -> None:
    lines = log_bytes.splitlines(keepends=True)
    lines[i], lines[j] = lines[j], lines[i]
    path = tmp_path / "p.ndjson"
    path.write_bytes(b"".join(lines))
    with pytest.raises(InvalidInput):
        read(path)


def test_truncated_last_line_is_detected(tmp_path: Path, log_bytes: bytes) -> None:
    path = tmp_path / "p.ndjson"
    for cut in (1, 10, len(log_bytes.splitlines()[-1])):
        path.write_bytes(log_bytes[:-cut])
        with pytest.raises(InvalidInput, match="no newline: an interrupted write"):
            read(path)
    path.write_bytes(log_bytes)
    assert len(read(path).events) == N_EVENTS  # the twin: the whole file reads


def test_dropping_whole_trailing_lines_moves_the_head(tmp_path: Path, log_bytes: bytes) -> None:
    # Not visible to the chain alone: the Harness-Log-Head trailer is what catches it.
    heads = fresh_log(tmp_path / "again.ndjson")
    lines = log_bytes.splitlines(keepends=True)
    path = tmp_path / "p.ndjson"
    for keep in range(1, N_EVENTS):
        path.write_bytes(b"".join(lines[:keep]))
        log = read(path)
        assert len(log.events) == keep
        assert log.head == heads[keep - 1] != heads[-1]


def test_foreign_task_or_non_canonical_line_is_refused(tmp_path: Path, log_bytes: bytes) -> None:
    path = tmp_path / "p.ndjson"
    path.write_bytes(log_bytes)
    with pytest.raises(InvalidInput, match="not a line harness wrote"):
        Log(path, "other", SteppingClock("2026-01-01T00:00:00Z"))
    first = orjson.loads(log_bytes.splitlines()[0])
    path.write_bytes(orjson.dumps(first, option=orjson.OPT_INDENT_2).replace(b"\n", b" ") + b"\n")
    with pytest.raises(InvalidInput, match="not a line harness wrote"):
        read(path)


# -- the log and the ledger --------------------------------------------------------------------


def repository(tmp_path: Path, log_bytes: bytes) -> tuple[Layout, Path]:
    """A layout whose task log holds `log_bytes` (the ledger needs a .git folder only)."""
    (tmp_path / ".git").mkdir()
    layout = Layout(tmp_path)
    path = layout.log("demo")
    path.parent.mkdir(parents=True)
    path.write_bytes(log_bytes)
    return layout, path


def test_each_append_is_entered_after_it_is_written(tmp_path: Path, log_bytes: bytes) -> None:
    layout, path = repository(tmp_path, log_bytes)
    ledger = Ledger(layout, "demo")
    log = read(path)
    log.follow(ledger, digest(log_bytes))
    assert ledger.entries == {}  # nothing new: the recorded log is what harness last wrote
    log.append("task_completed", "ok")
    assert log.data() == path.read_bytes()
    assert Ledger(layout, "demo").entries == {"ai/tasks/demo/progress.ndjson": log.digest}


@pytest.mark.parametrize("entered", [True, False], ids=["entered", "recorded"])
def test_one_line_past_what_harness_last_wrote_is_a_kill_and_is_taken(
    tmp_path: Path, log_bytes: bytes, entered: bool
) -> None:
    lines = log_bytes.splitlines(keepends=True)
    layout, path = repository(tmp_path, log_bytes)
    ledger = Ledger(layout, "demo")
    known = digest(b"".join(lines[:-1]))
    if entered:
        ledger.note({path: known})
    read(path).follow(ledger, EMPTY if entered else known)
    assert ledger.noted(path) == digest(log_bytes)


@pytest.mark.parametrize("entered", [True, False], ids=["entered", "recorded"])
@pytest.mark.parametrize("change", ["two lines more", "one line less", "rewritten"])
def test_any_other_log_is_refused(
    tmp_path: Path, log_bytes: bytes, entered: bool, change: str
) -> None:
    lines = log_bytes.splitlines(keepends=True)
    known = {
        "two lines more": b"".join(lines[:-2]),
        "one line less": log_bytes + b"{}\n",
        "rewritten": log_bytes.replace(b'"T0"', b'"T9"'),
    }[change]
    layout, path = repository(tmp_path, log_bytes)
    ledger = Ledger(layout, "demo")
    if entered:
        ledger.note({path: digest(known)})
    with pytest.raises(InvalidInput, match="not the log harness last wrote: restore it, or"):
        read(path).follow(ledger, EMPTY if entered else digest(known))


@pytest.mark.parametrize("change", ["appended", "replaced"])
def test_no_line_is_appended_to_a_log_something_else_changed(
    tmp_path: Path, log_bytes: bytes, change: str
) -> None:
    path = tmp_path / "p.ndjson"
    path.write_bytes(log_bytes)
    log = read(path)
    if change == "appended":
        with path.open("ab") as fh:
            fh.write(b"planted\n")
    else:
        (tmp_path / "other").write_bytes(b"")
        path.unlink()
        path.symlink_to(tmp_path / "other")
    before = path.read_bytes()
    with pytest.raises(Halted, match=r"^ai/tasks/demo/progress\.ndjson: "):
        log.append("task_completed", "ok")
    assert path.read_bytes() == before


@pytest.mark.parametrize("kind", ["folder", "fifo", "symlink"])
def test_a_log_that_is_not_a_regular_file_is_refused_unopened(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "p.ndjson"
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # opened, a read would wait for a writer forever
    else:
        path.symlink_to(tmp_path / "elsewhere.ndjson")
    with pytest.raises(InvalidInput, match=r"^ai/tasks/demo/progress\.ndjson: (not a|a symlink)"):
        read(path)


def resealed(log_bytes: bytes, at: int, key: str, value: object) -> bytes:
    """The log with line `at`'s `key` set to `value`, the chain made whole again after it:
    a log as a forger would write it, canonical and chained."""
    events = [orjson.loads(line) for line in log_bytes.splitlines()]
    events[at][key] = value
    prev, out = GENESIS, b""
    for event in events:
        event["prev"] = prev
        line = orjson.dumps(event, option=orjson.OPT_SORT_KEYS)
        out, prev = out + line + b"\n", line_hash(line)
    return out


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("seq", 2.0, "seq 2.0 is not an integer as harness writes it"),
        ("ts", "2026-02-30T00:00:00Z", "ts 2026-02-30T00:00:00Z is no instant"),
        ("ts", "2026-13-01T00:00:00Z", "ts 2026-13-01T00:00:00Z is no instant"),
        ("ts", "2026-01-01T24:00:00Z", "ts 2026-01-01T24:00:00Z is no instant"),
        ("ts", "2024-02-29T00:00:00Z", None),  # the twin: a leap day
        ("seq", 2, None),
    ],
)
def test_what_the_schema_takes_and_harness_never_writes_is_no_event(
    tmp_path: Path, log_bytes: bytes, key: str, value: object, why: str | None
) -> None:
    """A seq of 2.0 passes the schema's integer and equals 2; a 30 February passes its
    pattern. Readers that take them as events trip on them (a seq packed into an int, a ts
    parsed), so the one reader refuses them as lines harness did not write."""
    data = resealed(log_bytes, 2, key, value)
    path = tmp_path / "p.ndjson"
    path.write_bytes(data)
    lines = list(progress.read(data.splitlines(keepends=True), "demo", protocol.Model()))
    if why is None:
        assert read(path).events[2][key] == value
        assert all(line.problems == [] for line in lines)
        return
    with pytest.raises(InvalidInput, match=rf"^ai/tasks/demo/progress\.ndjson:3: .*: {why}$"):
        read(path)
    assert lines[2].event is None
    assert [(p.kind, p.text) for p in lines[2].problems] == [("line", why)]
