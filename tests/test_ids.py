"""Ids (harness/base/ids.py), and every reader that takes one: a value is an id only as a
whole, so no final newline, leading `-`, separator or space gets through any of them."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from harness.base import ids, schemas
from harness.cli import located
from harness.workers import shim

from .conftest import Sample


def near(pattern: re.Pattern[str]) -> st.SearchStrategy[str]:
    """Strings the pattern takes, and the same bent the ways a reader could be fooled."""
    good = st.from_regex(pattern, fullmatch=True)
    bend = st.sampled_from(["\n", "\r", " ", "-", "/", "\0", ".", "x"])
    return st.one_of(
        good,
        st.tuples(good, bend).map("".join),
        st.tuples(bend, good).map("".join),
        st.text(max_size=70),
    )


def schema_id(value: str) -> bool:
    return schemas.problem("common", value, "/$defs/id") is None


def fast_schema_id(value: str) -> bool:
    return schemas.fast_check("common", "/$defs/id")(value)


def shim_agent_id(value: str) -> bool:
    return shim.identity(["--agent-id", value], "fallback") == value


ID_READERS: dict[str, Callable[[str], bool]] = {
    "located.is_task_id": located.is_task_id,
    "schema common#/$defs/id": schema_id,
    "schema common#/$defs/id (fast)": fast_schema_id,
    "shim --agent-id": shim_agent_id,
}


@pytest.mark.parametrize("reader", sorted(ID_READERS))
@given(value=near(ids.ID))
@example(value="n1\n")
@example(value="-h")
def test_every_id_reader_takes_exactly_the_whole_ids(reader: str, value: str) -> None:
    assert ID_READERS[reader](value) == (ids.ID.fullmatch(value) is not None)


@pytest.mark.parametrize("name", ["ID", "CALL_ID", "COMMIT", "SESSION"])
@given(data=st.data())
def test_no_id_holds_a_line_end_or_starts_an_option(name: str, data: st.DataObject) -> None:
    pattern = getattr(ids, name)
    value = data.draw(near(pattern))
    if ids.whole(pattern, value):
        assert not re.search(r"[\s/\0]", value) and not value.startswith(("-", "."))
        assert ".." not in value


def test_schema_patterns_read_dollar_as_the_end_of_the_text() -> None:
    assert schemas.python_pattern(r"^[a-z$]+\$$") == r"^[a-z$]+\$\Z"
    assert schemas.problem("common", "n1\n", "/$defs/id") is not None
    assert schemas.problem("common", "n1", "/$defs/id") is None


@pytest.mark.e2e
def test_a_task_whose_folder_name_ends_in_a_newline_is_refused(sample: Sample) -> None:
    folder = sample.root / "ai" / "tasks" / "n1\n"
    folder.mkdir(parents=True)
    (folder / "plan.json").write_bytes((sample.root / "ai/tasks/demo/plan.json").read_bytes())
    head = sample.head()
    res = sample.cli("run", "n1\n")
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "task id 'n1" in res.stderr
    assert sample.head() == head and sorted(p.name for p in folder.iterdir()) == ["plan.json"]
