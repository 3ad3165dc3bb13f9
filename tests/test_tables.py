"""The model's packed tables read back exactly what was put in, whatever a log holds."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.record.tables import Calls, Completed, Done, compact, expand

from .builders import FAST

HEX = "0123456789abcdef"
# Ids as harness makes them, and what a hostile or hand-made log may hold instead.
IDS: st.SearchStrategy[Any] = st.one_of(
    st.text(HEX, min_size=64, max_size=64),
    st.text(HEX, min_size=40, max_size=40),
    st.text(HEX.upper(), min_size=40, max_size=40),
    st.text(max_size=70),
    st.none(),
    st.integers(),
    st.booleans(),
    st.lists(st.text(max_size=3), max_size=2),
)
SEQS = st.integers(min_value=0, max_value=2**40)


@FAST
@given(st.lists(st.tuples(st.text(max_size=6), IDS, IDS, SEQS), max_size=20))
def test_done_reads_back_what_each_completion_named(rows: list[tuple[str, Any, Any, int]]) -> None:
    done, last = Done(), {}
    for step, call, commit, at in rows:
        done.add(step, call, commit, at)
        last[step] = (call, commit, at)
    assert list(done) == list(last) and len(done) == len(last)  # in the order first completed
    for step, named in last.items():
        assert step in done and tuple(done[step]) == named
        assert done[step] == Completed(*named)


@FAST
@given(st.data())
def test_a_completion_keeps_a_call_ids_own_bytes_and_reads_back_its_hex(
    data: st.DataObject,
) -> None:
    call = data.draw(st.text(HEX, min_size=64, max_size=64))
    commit = data.draw(st.text(HEX, min_size=40, max_size=40))
    done = Done()
    done.add("T1", compact(call), commit, 7)  # as the model hands it: the calls table's key
    assert tuple(done["T1"]) == (call, commit, 7)


KEYS: st.SearchStrategy[str | bytes] = st.one_of(
    st.text(HEX, min_size=64, max_size=64).map(compact), st.text(max_size=8)
)


@FAST
@given(st.lists(st.tuples(KEYS, SEQS, st.text(max_size=8)), max_size=30))
def test_calls_read_back_each_seq_and_outcome(rows: list[tuple[str | bytes, int, str]]) -> None:
    calls, expected = Calls(), {}
    for key, seq, said in rows:
        calls[key] = (seq, said)
        expected[key] = (seq, said)
    assert calls == expected and len(calls) == len(expected)
    for key in expected:
        assert key in calls and calls[key] == expected[key]
        assert calls.pop(key) == expected[key] and key not in calls
    assert calls == {} and calls.get(b"x") is None


def test_an_outcome_changes_in_place() -> None:
    calls = Calls()
    calls[b"a"] = (5, "")
    calls[b"a"] = (calls[b"a"][0], "timeout")
    calls[b"b"] = (6, "ok")
    assert dict(calls) == {b"a": (5, "timeout"), b"b": (6, "ok")}


def test_compact_undone_by_expand() -> None:
    for value in ("ab" * 20, "ab" * 32, "AB" * 20, "ab" * 21, None, 3, ""):
        assert expand(compact(value)) == value
