"""plan.json read one member, and one subtask, at a time."""

from __future__ import annotations

import io
from typing import Any

import ijson
import orjson
import pytest

from harness.spec import planstream


@pytest.mark.parametrize(
    "text",
    [
        '{"task_id": "demo", "subtasks": [], "created": "x"}',
        ' \n{ "subtasks" : [ {"id": "A", "x": [1, {"y": "]}"}]} , {"id": "B"} ] }\n',
        '{"created":"x","subtasks":[{"id":"A"}],"task_id":"demo"}',
        "{}",
        '{"subtasks": {"not": "a list"}}',
    ],
)
def test_the_plan_is_read_one_subtask_at_a_time_as_json_reads_it(text: str) -> None:
    rebuilt: dict[str, Any] = {}
    for key, value in planstream.members(io.BytesIO(text.encode())):
        if key is None:
            rebuilt["subtasks"].append(value)
        else:
            rebuilt[key] = value
    assert rebuilt == orjson.loads(text)


@pytest.mark.parametrize(
    "text",
    ["", "[]", '{"a": 1', '{"a": 1}}', '{"subtasks": [{"id": "A"} {"id": "B"}]}', '{"a": NaN}'],
)
def test_a_plan_that_is_not_json_is_refused_by_the_reader(text: str) -> None:
    with pytest.raises((ValueError, ijson.JSONError)):
        list(planstream.members(io.BytesIO(text.encode())))


@pytest.mark.parametrize("depth", [planstream.DEPTH, planstream.DEPTH + 1, 200_000])
def test_a_plan_nested_deeper_than_json_reads_is_refused_early(depth: int) -> None:
    """Past orjson's depth, where the rest of harness refuses the plan, ijson would name
    each value by its whole path: 200k deep took gigabytes before the OOM killer came."""
    inner = depth - 1  # the plan's own object is the first level
    text = b'{"x": ' + b"[" * inner + b"]" * inner + b', "subtasks": []}'
    if depth <= planstream.DEPTH:
        assert dict(planstream.members(io.BytesIO(text)))["subtasks"] == []
        assert orjson.loads(text)["subtasks"] == []
        return
    with pytest.raises(ValueError, match=f"^nested deeper than {planstream.DEPTH}$"):
        list(planstream.members(io.BytesIO(text)))
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(text)
