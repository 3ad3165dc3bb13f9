"""A worker's reported spending: a figure out of an answer's bounds is never a number
anything sums. The answer carrying one is malformed when judged, and the same figure read
back from a record, or from a CLI's events, is unknown."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base import metrics, schemas
from harness.boundary import worker
from harness.workers import claude, codex_events, gemini

from .builders import FAST

NAN, INF = float("nan"), float("inf")
BOUND = {"cost_usd": 1000, "tokens": 1_000_000_000, "turns": 1_000_000}

HOSTILE = [
    ("cost_usd", -100),
    ("cost_usd", -1e-9),
    ("cost_usd", NAN),
    ("cost_usd", INF),
    ("cost_usd", -INF),
    ("cost_usd", 1e308),
    ("cost_usd", 1000.01),
    ("cost_usd", True),
    ("cost_usd", "0.5"),
    ("cost_usd", [1]),
    ("tokens", -1),
    ("tokens", -1e9),
    ("tokens", NAN),
    ("tokens", INF),
    ("tokens", 10**12),
    ("tokens", 2**64),
    ("tokens", 1.5),
    ("tokens", True),
    ("tokens", "120"),
    ("turns", -3),
    ("turns", 10**7),
]
# The honest twins, of the same shapes: what comes back.
HONEST = [
    ("cost_usd", 0, 0.0),
    ("cost_usd", 0.6, 0.6),
    ("cost_usd", 1000, 1000.0),
    ("tokens", 0, 0),
    ("tokens", 120, 120),
    ("tokens", 1e9, 1_000_000_000),  # JSON's 1e9 is a float; a whole one is a count
    ("tokens", 5.0, 5),
    ("turns", 3, 3),
]


@pytest.mark.parametrize(("name", "value"), HOSTILE)
def test_a_figure_out_of_bounds_is_unknown(name: str, value: object) -> None:
    assert metrics.figure(name, value) is None
    assert metrics.figures({name: value}) == {}


@pytest.mark.parametrize(("name", "value", "counted"), HONEST)
def test_a_figure_within_bounds_counts(name: str, value: object, counted: float) -> None:
    found = metrics.figure(name, value)
    assert found == counted and type(found) is type(counted)
    assert metrics.figures({name: value}) == {name: counted}


def test_a_cost_of_minus_zero_is_zero() -> None:
    found = metrics.figure("cost_usd", -0.0)
    assert found == 0 and math.copysign(1.0, found or 0.0) == 1.0
    assert f"${found:.4f}" == "$0.0000"


def test_no_metrics_or_other_keys_report_nothing() -> None:
    assert metrics.figures(None) == metrics.figures([{"cost_usd": 1}]) == {}
    assert metrics.figures({"coverage_delta": -5, "cost_usd": 0.5}) == {"cost_usd": 0.5}


def _answer_line(name: str, value_json: bytes) -> bytes:
    """An answer line whose result.metrics.`name` is the JSON text `value_json`, verbatim
    (JSON has no NaN; a worker may still print one)."""
    doc = {
        "ts": "2026-01-01T00:00:00Z",
        "task_id": "demo",
        "agent_id": "scripted",
        "status": "ok",
        "result": {"metrics": {name: "@"}},
    }
    return orjson.dumps(doc).replace(b'"@"', value_json) + b"\n"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("cost_usd", b"-100"),
        ("cost_usd", b"NaN"),
        ("cost_usd", b"Infinity"),
        ("cost_usd", b"1e400"),
        ("cost_usd", b"1e308"),
        ("cost_usd", b'"0.5"'),
        ("cost_usd", b"true"),
        ("tokens", b"-1000000000"),
        ("tokens", b"-1e9"),
        ("tokens", b"NaN"),
        ("tokens", b"1e400"),
        ("tokens", b"1000000000000"),
        ("tokens", b"1.5"),
        ("turns", b"-1"),
    ],
)
def test_an_answer_reporting_such_a_figure_is_malformed(name: str, text: bytes) -> None:
    got = worker.judge(_answer_line(name, text), 0, None, "demo", "scripted", (10_000, 100))
    assert (got.status, got.kind) == ("error", "format")


@pytest.mark.parametrize(
    ("name", "text"), [("cost_usd", b"0.6"), ("cost_usd", b"0"), ("tokens", b"120")]
)
def test_its_honest_twin_is_an_answer(name: str, text: bytes) -> None:
    got = worker.judge(_answer_line(name, text), 0, None, "demo", "scripted", (10_000, 100))
    assert got.status == "ok" and got.result["metrics"] == {name: orjson.loads(text)}


JSON_VALUES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5)
)


@FAST
@given(name=st.sampled_from(metrics.SPENDING), value=JSON_VALUES | st.floats())
def test_whatever_is_reported_what_counts_is_a_bounded_figure(name: str, value: object) -> None:
    found = metrics.figure(name, value)
    if found is not None:
        assert math.isfinite(found) and 0 <= found <= BOUND[name]
        assert math.copysign(1.0, found) == 1.0  # no -0.0 either
        assert name == "cost_usd" or isinstance(found, int)


@FAST
@given(name=st.sampled_from(metrics.SPENDING), value=JSON_VALUES)
def test_what_counts_when_read_back_is_exactly_what_the_judge_accepts(
    name: str, value: Any
) -> None:
    """Any value JSON can carry (orjson reads no NaN or infinity) either makes a valid
    answer and counts when read back, or makes the answer malformed: the read side never
    counts a figure the judge would have refused, nor drops one it accepted."""
    answer = {
        "ts": "2026-01-01T00:00:00Z",
        "task_id": "demo",
        "agent_id": "scripted",
        "status": "ok",
        "result": {"metrics": {name: value}},
    }
    valid = schemas.problem("worker-output", answer) is None
    assert valid == (metrics.figure(name, value) is not None)


@pytest.mark.parametrize(
    ("counts", "total"),
    [
        ([100, 20, None], 120),
        ([None, None], None),
        ([], None),
        ([-900_000, 1_000_000], None),  # a negative part would hide the other's spending
        ([NAN, 10], None),
        ([True, 5], None),
        (["5", 5], None),
        ([600_000_000, 600_000_000], None),  # each a count, together over the bound
        ([500_000_000, 500_000_000], 1_000_000_000),
    ],
)
def test_a_cli_usage_total(counts: list[Any], total: int | None) -> None:
    assert metrics.total(counts) == total


def test_a_shim_takes_spending_from_its_cli_alone() -> None:
    claimed = {"cost_usd": 0.0, "tokens": 1, "turns": 1, "files_touched": 2}
    assert metrics.measured(claimed, {"session_id": "s", "cost_usd": 0.5, "tokens": 90}) == {
        "files_touched": 2,
        "session_id": "s",
        "cost_usd": 0.5,
        "tokens": 90,
    }
    # The CLI's own figure out of bounds is unknown: left out, never the model's instead.
    assert metrics.measured(claimed, {"cost_usd": -5.0, "tokens": 2**70}) == {"files_touched": 2}
    assert metrics.measured(["not", "a", "dict"], {"tokens": 7}) == {"tokens": 7}


@pytest.mark.parametrize(
    ("meter", "counted"),
    [
        pytest.param(
            claude._metrics(
                {"total_cost_usd": -100, "num_turns": 3, "usage": {"input_tokens": -(10**9)}}
            ),
            {"turns": 3},
            id="claude-negative",
        ),
        pytest.param(
            claude._metrics({"total_cost_usd": 0.0123, "usage": {"input_tokens": 100}}),
            {"cost_usd": 0.0123, "tokens": 100},
            id="claude-honest",
        ),
        pytest.param(
            codex_events.event_metrics(
                [
                    {"type": "turn.completed", "usage": {"input_tokens": 100, "output_tokens": 20}},
                    {"type": "turn.completed", "usage": {"input_tokens": -90, "output_tokens": 1}},
                ]
            ),
            {},
            id="codex-negative-turn",
        ),
        pytest.param(
            codex_events.event_metrics(
                [{"type": "turn.completed", "usage": {"input_tokens": 100, "output_tokens": 20}}]
            ),
            {"tokens": 120},
            id="codex-honest",
        ),
        pytest.param(
            gemini._metrics({"stats": {"input_tokens": 10**12, "output_tokens": 5}}),
            {},
            id="gemini-huge",
        ),
        pytest.param(
            gemini._metrics({"stats": {"input_tokens": 2010, "output_tokens": 205}}),
            {"tokens": 2215},
            id="gemini-honest",
        ),
    ],
)
def test_what_a_cli_reports_out_of_bounds_is_unknown(
    meter: dict[str, Any], counted: dict[str, float]
) -> None:
    """The model claims nothing cost anything; only its CLI's sane figures are kept."""
    claimed = {"cost_usd": 0, "tokens": 0}
    assert metrics.figures(metrics.measured(claimed, meter)) == counted


def test_usage_splits_what_was_read_from_what_was_written() -> None:
    assert metrics.usage([100, 30, None], [20]) == {
        "tokens": 150,
        "input_tokens": 130,
        "output_tokens": 20,
    }
    # A side not reported is left out; the total still counts what was.
    assert metrics.usage([None], [20]) == {"tokens": 20, "output_tokens": 20}
    # A count that is no count (negative, a string) leaves out its side and the total.
    assert metrics.usage([-5], [20]) == {"output_tokens": 20}
    assert metrics.usage([], []) == {}
