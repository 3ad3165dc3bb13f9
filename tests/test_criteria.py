"""Tests for acceptance-criterion parsing: accepted spellings, plan errors, round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.spec.criteria import NUMERIC_KINDS, OPS, Criterion, holds, parse, render


@pytest.mark.parametrize(
    ("text", "kind", "op", "value"),
    [
        ("line>=0.8", "line", ">=", 0.8),
        ("line >= 0.8", "line", ">=", 0.8),
        ("line>=80%", "line", ">=", 0.8),
        ("  LINE>=80%  ", "line", ">=", 0.8),
        ("branch>=80 %", "branch", ">=", 0.8),
        ("Branch > .5", "branch", ">", 0.5),
        ("branch<1", "branch", "<", 1.0),
        ("line == 100%", "line", "==", 1.0),
        ("line<=0", "line", "<=", 0.0),
        ("coverage_delta >= 0", "coverage_delta", ">=", 0.0),
        ("coverage_delta>=0.5%", "coverage_delta", ">=", 0.005),
        ("COVERAGE_DELTA > -0.02", "coverage_delta", ">", -0.02),
        ("coverage_delta>=-3%", "coverage_delta", ">=", -0.03),
        ("line>=5e-1", "line", ">=", 0.5),
    ],
)
def test_numeric_forms(text: str, kind: str, op: str, value: float) -> None:
    c = parse(text)
    assert (c.text, c.kind, c.op, c.command) == (text, kind, op, None)
    assert c.value == pytest.approx(value, abs=1e-15)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("api_unchanged", "api_unchanged"),
        ("API unchanged", "api_unchanged"),
        (" api-unchanged ", "api_unchanged"),
        ("docs_clean", "docs_clean"),
        ("Docs Clean", "docs_clean"),
    ],
)
def test_flag_forms(text: str, kind: str) -> None:
    assert parse(text) == Criterion(text=text, kind=kind)


def test_cmd_form_strips_command() -> None:
    c = parse("CMD:   pytest -q tests/test_x.py  ")
    assert (c.kind, c.command, c.op, c.value) == ("cmd", "pytest -q tests/test_x.py", None, None)
    assert parse("cmd: echo a:b").command == "echo a:b"


@pytest.mark.parametrize(
    "text",
    [
        "Doxygen complete",
        "no signature drift",
        "",
        "line coverage is good",
        "line>=",
        "line => 0.8",
        "line>=0.8 and branch>=0.5",
        "api clean",
        "docs unchanged",
        "lines>=0.8",
        "line>=nan",
        "line>=inf",
    ],
)
def test_prose_is_unverified(text: str) -> None:
    assert parse(text) == Criterion(text=text, kind="unverified")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("line>=80", "did you mean 80%?"),
        ("branch>=120%", "outside 0..1"),
        ("line>=-0.1", "outside 0..1"),
        ("coverage_delta>=5", "outside -1..1"),
        ("coverage_delta<=-150%", "outside -1..1"),
        ("cmd:   ", "needs a command"),
    ],
)
def test_plan_errors_raise(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match="criterion") as info:
        parse(text)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("text", "measured", "expected"),
    [
        ("line>=0.8", 0.8, True),
        ("line>=0.8", 4 / 5, True),
        ("line>=0.8", 0.79, False),
        ("line>0.8", 0.8, False),
        ("line>0.8", 0.81, True),
        ("branch<=50%", 0.5, True),
        ("branch<50%", 0.5, False),
        ("branch<50%", 0.49, True),
        ("line==100%", 1.0, True),
        ("line==100%", 0.999, False),
        # 0.8 - 0.23 is 0.5700000000000001 in floats: the epsilon keeps this honest.
        ("coverage_delta<=0.57", 0.8 - 0.23, True),
        ("coverage_delta>=0", 0.0, True),
        ("coverage_delta>=0", -0.001, False),
        ("line>=0", float("nan"), False),
    ],
)
def test_holds(text: str, measured: float, expected: bool) -> None:
    assert holds(parse(text), measured) is expected


@pytest.mark.parametrize("text", ["Doxygen complete", "cmd: true", "docs_clean"])
def test_holds_refuses_non_numeric(text: str) -> None:
    with pytest.raises(ValueError, match="not numeric"):
        holds(parse(text), 1.0)


def _value(kind: str) -> st.SearchStrategy[float]:
    low = -1.0 if kind == "coverage_delta" else 0.0
    return st.floats(min_value=low, max_value=1.0, allow_nan=False)


numeric = st.sampled_from(NUMERIC_KINDS).flatmap(
    lambda kind: st.builds(
        lambda op, value: Criterion(text="", kind=kind, op=op, value=value),
        st.sampled_from(OPS),
        _value(kind),
    )
)
commands = st.text(min_size=1).map(str.strip).filter(bool)
criteria = st.one_of(
    numeric,
    st.builds(lambda cmd: Criterion(text="", kind="cmd", command=cmd), commands),
    st.sampled_from(["api_unchanged", "docs_clean"]).map(lambda k: Criterion(text="", kind=k)),
)


@given(criteria)
def test_render_parse_round_trip(c: Criterion) -> None:
    text = render(c)
    assert parse(text) == Criterion(
        text=text, kind=c.kind, op=c.op, value=c.value, command=c.command
    )


@given(
    kind=st.sampled_from(NUMERIC_KINDS),
    op=st.sampled_from(OPS),
    percent=st.integers(min_value=0, max_value=100),
    pad=st.sampled_from(["", " ", "  ", "\t"]),
    upper=st.booleans(),
)
def test_hand_written_percent_round_trip(
    kind: str, op: str, percent: int, pad: str, upper: bool
) -> None:
    text = f"{pad}{kind.upper() if upper else kind}{pad}{op}{pad}{percent}{pad}%{pad}"
    c = parse(text)
    assert (c.kind, c.op, c.value) == (kind, op, percent / 100)
    assert holds(c, percent / 100) is (op in (">=", "<=", "=="))


def test_holds_refuses_unknown_operator() -> None:
    with pytest.raises(ValueError, match="unknown operator"):
        holds(Criterion(text="line!=1", kind="line", op="!=", value=1.0), 1.0)
