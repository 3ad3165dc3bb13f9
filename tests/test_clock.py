"""The clock's reading of a recorded instant."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base import clock
from harness.base.errors import InvalidInput

from .builders import FAST

# Texts the schemas' timestamp pattern takes: any two digits for a month, a day, an hour.
DIGITS = st.integers(0, 99).map(lambda n: f"{n:02d}")
STAMPS = st.builds(
    lambda y, mo, d, h, mi, s, frac: f"{y:04d}-{mo}-{d}T{h}:{mi}:{s}{frac}Z",
    st.integers(0, 9999),
    DIGITS,
    DIGITS,
    DIGITS,
    DIGITS,
    DIGITS,
    st.sampled_from(["", ".5", ".123456"]),
)


def parses(ts: str) -> bool:
    try:
        clock.parse(ts)
    except ValueError:
        return False
    return True


@FAST
@given(st.one_of(STAMPS, st.datetimes().map(lambda t: t.strftime(clock.FORMAT))))
def test_readable_is_whether_parse_takes_a_timestamp_the_pattern_took(ts: str) -> None:
    assert parses(ts) == clock.readable(ts)


@pytest.mark.parametrize(
    ("ts", "readable"),
    [
        ("2026-02-30T00:00:00Z", False),
        ("2026-13-01T00:00:00Z", False),
        ("2026-01-01T24:00:00Z", False),
        ("2026-01-01T00:60:00Z", False),
        ("2026-01-01T00:00:62Z", False),
        ("0000-01-01T00:00:00Z", False),
        ("2024-02-29T23:59:59Z", True),  # a leap day
        ("2026-12-31T23:59:60Z", False),  # a leap second: datetime has none
        ("2026-01-01T00:00:00.5Z", True),
    ],
)
def test_a_timestamp_that_is_no_instant_is_told(ts: str, readable: bool) -> None:
    assert clock.readable(ts) is readable is parses(ts)


@pytest.mark.parametrize(
    "start", ["garbage", "2026-02-30T00:00:00Z", "2026-01-01 00:00:00", "2026-01-01T00:00:00Z\n"]
)
def test_a_clock_the_environment_sets_is_an_instant_or_refused(
    monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    monkeypatch.setenv("HARNESS_CLOCK", start)
    with pytest.raises(InvalidInput, match=r"^HARNESS_CLOCK=.*: not an instant like"):
        clock.from_env()
    monkeypatch.setenv("HARNESS_CLOCK", "2026-01-01T00:00:00Z")  # the twin
    assert clock.from_env().now(61) == "2026-01-01T00:01:01Z"


def test_a_stepping_clock_that_would_pass_the_year_9999_stops_in_one_line() -> None:
    stepping = clock.SteppingClock("9999-12-31T23:59:58Z")
    assert stepping.now(1) == "9999-12-31T23:59:59Z"
    with pytest.raises(InvalidInput, match=r"^HARNESS_CLOCK: the clock went past the year 9999$"):
        stepping.now(2)
