"""The hand-written progress-event check gives the schema's verdict (issue 24, item 5)."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base import schemas
from harness.record.event_schema import checker

DEFS = schemas.document("common")["$defs"]
PROPS = schemas.document("progress-event")["properties"]
PATTERNED = ("prev", "ts", "task_id", "step")

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


HEX, DIGITS = "0123456789abcdef", "0123456789"
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def digits(n: int) -> st.SearchStrategy[str]:
    return st.text(DIGITS, min_size=n, max_size=n)


# The patterns' languages built from whole strings, which hypothesis draws in one choice
# each, where st.from_regex draws a character at a time (then most of this test's time).
# test_the_built_values_are_what_the_patterns_take holds them to the schema.
PATTERNS: dict[str, st.SearchStrategy[str]] = {
    "sha256": st.text(HEX, min_size=64, max_size=64),
    "timestamp": st.builds(
        "{}-{}-{}T{}:{}:{}{}Z".format,
        digits(4),
        *(digits(2) for _ in range(5)),
        st.just("") | st.text(DIGITS, min_size=1, max_size=4).map(".".__add__),
    ),
    "id": st.builds(
        str.__add__, st.text(ALNUM, min_size=1, max_size=1), st.text(ALNUM + "._-", max_size=63)
    ),
}


GOOD: dict[str, st.SearchStrategy[Any]] = {
    "seq": st.integers(min_value=0, max_value=2**70)
    | st.floats(0, 1e6).map(lambda f: float(int(f))),
    "prev": PATTERNS["sha256"],
    "ts": PATTERNS["timestamp"],
    "task_id": PATTERNS["id"],
    "step": PATTERNS["id"],
    "event": st.sampled_from(PROPS["event"]["enum"]),
    "status": st.sampled_from(PROPS["status"]["enum"]),
    "agent": st.text(min_size=1, max_size=3),
    "phase": st.text(max_size=3),
    "error": st.text(max_size=3),
    "details": st.dictionaries(st.text(max_size=4), json_values, max_size=3),
}


def bad(key: str) -> st.SearchStrategy[Any]:
    """Values near the edge of what `key` takes, and any JSON value."""
    near: st.SearchStrategy[Any] = st.text(max_size=6)
    if key in PATTERNED:
        good = GOOD[key]
        near = near | good.map(lambda s: s + "\n") | good.map(lambda s: s + "x")
        near = near | good.map(lambda s: s[1:])
    elif key == "seq":
        near = st.integers(max_value=-1) | st.floats(allow_nan=False) | st.booleans()
    elif key in ("event", "status"):
        near = near | st.sampled_from(PROPS[key]["enum"]).map(str.upper)
    elif key == "agent":
        near = st.just("")
    return near | json_values


@st.composite
def events(draw: st.DrawFn) -> Any:
    """Mostly valid events, each bent in up to three places: a field dropped, given a
    value near what it takes or any JSON value, or a key the schema does not know; now and
    then not an object at all."""
    if draw(st.integers(0, 19)) == 0:
        return draw(json_values)
    required = schemas.document("progress-event")["required"]
    event: dict[str, Any] = {
        key: draw(values) for key, values in GOOD.items() if key in required or draw(st.booleans())
    }
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from([*GOOD, "other"]))
        how = draw(st.integers(0, 2))
        if key == "other":
            event[draw(st.text(max_size=6))] = draw(json_values)
        elif how == 0:
            event.pop(key, None)
        else:
            event[key] = draw(bad(key))
    return event


def fast(event: Any) -> bool:
    return schemas.fast_check("progress-event")(event)


def ends_in_newline(event: Any) -> bool:
    """The one case the verdicts differ: jsonschema's `$` takes a final newline."""
    return isinstance(event, dict) and any(
        isinstance(event.get(key), str) and event[key].endswith("\n") for key in PATTERNED
    )


@settings(max_examples=1000, deadline=None)
@given(events())
def test_the_hand_check_gives_the_schemas_verdict(event: Any) -> None:
    verdict = checker()(event)
    assert verdict == fast(event)
    if not ends_in_newline(event):
        assert verdict == (schemas.problem("progress-event", event) is None)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(sorted(PATTERNS)).flatmap(lambda name: st.tuples(st.just(name), PATTERNS[name]))
)
def test_the_built_values_are_what_the_patterns_take(drawn: tuple[str, str]) -> None:
    name, value = drawn
    assert re.fullmatch(DEFS[name]["pattern"].lstrip("^").rstrip("$"), value)


def test_a_final_newline_is_refused_by_every_reader_of_an_event() -> None:
    event = {
        "agent": "harness",
        "event": "task_started",
        "prev": "0" * 64,
        "seq": 0,
        "status": "ok",
        "task_id": "demo",
        "ts": "2026-01-01T00:00:00Z",
    }
    assert checker()(event) and fast(event)
    for key in PATTERNED:
        bent = {**event, key: event.get(key, "T1") + "\n"}
        assert not checker()(bent) and not fast(bent)
        assert schemas.problem("progress-event", bent) is not None
