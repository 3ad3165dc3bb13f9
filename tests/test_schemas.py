"""schemas.problem keeps jsonschema's verdict with the fast check (jsonschema-rs) answering
first (issue 24, item 5): what the fast check takes, jsonschema takes too."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base import schemas

# One valid document per schema, as the demo wrote them (its config read from TOML).
SEEDS: dict[str, Any] = orjson.loads((Path(__file__).parent / "schema_seeds.json").read_bytes())

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(-2, 2, allow_nan=False)
    | st.sampled_from(["", "x", "T1", "ok", "**", "0" * 40, "0" * 64, "human", "none"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abxy"), inner),
    max_leaves=5,
)


def places(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in the document, the document's own parts first."""
    found: list[tuple[Any, Any]] = []
    queue = [doc]
    while queue:
        node = queue.pop(0)
        pairs = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in pairs:
            found.append((node, key))
            if isinstance(value, (dict, list)):
                queue.append(value)
    return found


@st.composite
def bent(draw: st.DrawFn, name: str) -> Any:
    """The seed of `name` changed in up to three places: a value replaced (by any JSON value,
    the same text with a newline or a character more or less, the number next to it), a key
    dropped or one added."""
    doc = copy.deepcopy(SEEDS[name])
    for _ in range(draw(st.integers(0, 3))):
        spots = places(doc)
        if not spots:
            break
        node, key = draw(st.sampled_from(spots))
        value = node[key]
        how = draw(st.integers(0, 4))
        if how == 0 and isinstance(node, dict):
            del node[key]
        elif how == 1 and isinstance(node, dict):
            node[draw(st.sampled_from(["extra", "id", "kind", "type"]))] = draw(json_values)
        elif how == 2 and isinstance(value, str):
            node[key] = draw(st.sampled_from([value + "\n", value + "x", value[1:], ""]))
        elif how == 2 and isinstance(value, (int, float)) and not isinstance(value, bool):
            node[key] = value + draw(st.sampled_from([-1, 1, 0.5]))
        else:
            node[key] = draw(json_values)
    return doc


def jsonschema_says(name: str, doc: Any) -> bool:
    return bool(schemas._validator(name).is_valid(doc))


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_each_seed_is_valid(name: str) -> None:
    assert schemas.problem(name, SEEDS[name]) is None


@pytest.mark.parametrize("name", sorted(SEEDS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_the_verdict_is_jsonschemas(name: str, data: st.DataObject) -> None:
    doc = data.draw(bent(name))
    assert (schemas.problem(name, doc) is None) == jsonschema_says(name, doc)


@pytest.mark.parametrize("name", sorted(SEEDS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_the_fast_check_and_jsonschema_agree(name: str, data: st.DataObject) -> None:
    # Both read a pattern's `$` as the end of the text: a value with a final newline is
    # refused by each, not taken by jsonschema alone.
    doc = data.draw(bent(name))
    assert schemas.fast_check(name)(doc) == jsonschema_says(name, doc)
