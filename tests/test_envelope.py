"""call_id: what a call is keyed by, and what is not part of it."""

from __future__ import annotations

from typing import Any

import pytest

from harness.record import envelope
from harness.spec.plan import Subtask

from .builders import sub

HASHES = {"src/a.py": "a" * 64, "src/b.py": "b" * 64}
BLOBS = [{"name": "T0/notes.md", "text": "hello"}]
CONS = list(envelope.DEFAULT_CONSTRAINTS)


def cid(sub_: Subtask | None = None, **kw: Any) -> str:
    args: dict[str, Any] = {
        "task_id": "demo",
        "sub": sub_ or sub("T1"),
        "constraint_list": CONS,
        "write_scope": "token:W1",
        "input_hashes": HASHES,
        "blobs": BLOBS,
        "epoch": 0,
    }
    return envelope.call_id(**(args | kw))


def test_call_id_is_stable_and_ignores_dict_order() -> None:
    first = cid()
    assert len(first) == 64 and all(c in "0123456789abcdef" for c in first)
    assert cid() == first
    assert cid(input_hashes=dict(reversed(HASHES.items()))) == first
    assert cid(sub_=sub("T1", inputs=("x",), acceptance=("y",))) == first  # not part of it


@pytest.mark.parametrize(
    "change",
    [
        {"sub_": sub("T1", goal="Another goal")},
        {"sub_": sub("T1", role="doc-writer")},
        {"sub_": sub("T9")},
        {"sub_": sub("T1", write_scope=("src/a/**",))},
        {"task_id": "other"},
        {"constraint_list": [*CONS, envelope.RETRY_CONSTRAINT]},
        {"constraint_list": CONS[:1]},
        {"write_scope": "none"},
        {"write_scope": "token:W2"},
        {"input_hashes": {**HASHES, "src/a.py": "c" * 64}},
        {"input_hashes": {"src/a.py": "a" * 64}},
        {"blobs": [{"name": "T0/notes.md", "text": "hello!"}]},
        {"blobs": [{"name": "T0/other.md", "text": "hello"}]},
        {"blobs": []},
        {"epoch": 1},
    ],
    ids=lambda change: next(iter(change)) + ":" + repr(next(iter(change.values())))[:30],
)
def test_call_id_changes_with_what_shapes_the_answer(change: dict[str, Any]) -> None:
    assert cid(**change) != cid()
