"""Token choice, expiry, revocation and spending."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.base.errors import InvalidInput
from harness.record import tokens

NOW = "2026-01-01T12:00:00Z"


def token(tid: str, *paths: str, **fields: Any) -> tokens.Token:
    base: dict[str, Any] = {
        "id": tid,
        "paths": paths or ("src/**",),
        "expires": "2026-01-02T00:00:00Z",
        "one_shot": False,
        "revoked": False,
        "spent": None,
    }
    return tokens.Token(**(base | fields))


SPENT = {"task_id": "demo", "call_id": "c" * 64, "commit": "d" * 40}


@pytest.mark.parametrize(
    ("made", "why"),
    [
        (token("W1"), None),
        (token("W1", expires="2026-01-01T12:00:01Z"), None),
        (token("W1", expires=NOW), "token W1 expired at 2026-01-01T12:00:00Z"),
        (token("W1", expires="2025-12-31T00:00:00Z"), "expired"),
        (token("W1", revoked=True), "token W1 is revoked"),
        (token("W1", one_shot=True), None),
        (token("W1", one_shot=True, spent=SPENT), "was spent by dddddddddddd"),
        (token("W1", one_shot=False, spent=SPENT), None),
    ],
)
def test_usable_at(made: tokens.Token, why: str | None) -> None:
    found = made.usable_at(NOW)
    if why is None:
        assert found is None
    else:
        assert found is not None and why in found


def test_row_says_whether_the_token_is_usable_and_why_not() -> None:
    assert token("W1", "src/**", "docs/**").row(NOW) == {
        "id": "W1",
        "paths": ["src/**", "docs/**"],
        "expires": "2026-01-02T00:00:00Z",
        "one_shot": False,
        "revoked": False,
        "spent": None,
        "usable": True,
        "why": None,
    }
    row = token("W1", revoked=True).row(NOW)
    assert (row["revoked"], row["usable"], row["why"]) == (True, False, "token W1 is revoked")


def test_select_first_usable_covering_token_in_file_order() -> None:
    known = [
        token("W1", "src/**", revoked=True),
        token("W2", "docs/**"),
        token("W3", "src/**", expires="2025-01-01T00:00:00Z"),
        token("W4", "src/**", one_shot=True, spent=SPENT),
        token("W5", "src/**", "tests/**"),
        token("W6", "**"),
    ]
    assert tokens.select(known, None, ["src/**"], NOW) == (known[4], None)
    assert tokens.select(known, None, ["src/**", "tests/test_*.py"], NOW) == (known[4], None)
    assert tokens.select(known, None, ["lib/**"], NOW) == (known[5], None)
    # The write_scope and creates may name one glob twice: it is named once.
    assert tokens.select(known[:5], None, ["lib/**", "lib/**"], NOW) == (
        None,
        "no usable token covers lib/** (issue one: harness tokens issue --paths 'lib/**' --ttl 2h)",
    )
    assert tokens.select([], None, ["src/**"], NOW)[0] is None


def test_select_named_token() -> None:
    known = [token("W1", "src/**"), token("W2", "docs/**"), token("W3", "src/**", revoked=True)]
    assert tokens.select(known, "W1", ["src/a/*.py"], NOW) == (known[0], None)
    assert tokens.select(known, "W2", ["src/**"], NOW) == (None, "token W2 does not cover src/**")
    assert tokens.select(known, "W9", ["src/**"], NOW) == (None, "token W9 does not exist")
    found, why = tokens.select(known, "W3", ["src/**"], NOW)
    assert found is known[2] and why == "token W3 is revoked"  # named: no fallback to W1


def test_token_covers_needs_every_glob() -> None:
    made = token("W1", "src/**", "tests/*.py")
    assert made.covers(["src/x/y.py", "tests/test_a.py"])
    assert not made.covers(["src/x/y.py", "tests/a/test_a.py"])
    assert made.covers([])


@pytest.mark.parametrize(
    ("expires", "refused"),
    [
        ("2026-13-02T00:00:00Z", True),
        ("2026-04-31T00:00:00Z", True),
        ("2028-02-29T00:00:00Z", False),
    ],
)
def test_a_store_whose_expiry_is_no_instant_is_refused_on_load(
    tmp_path: Path, expires: str, refused: bool
) -> None:
    """The schema's pattern takes a 13th month; a token expiring then would crash every
    command that asks whether it is usable."""
    path = tmp_path / "write_tokens.json"
    entry = {"id": "W1", "paths": ["src/**"], "expires": expires, "one_shot": False}
    path.write_bytes(orjson.dumps({"tokens": [entry]}))
    if refused:
        with pytest.raises(
            InvalidInput,
            match=f"^ai/agents/write_tokens.json: token W1: expires {expires} is no instant$",
        ):
            tokens.load(path, tmp_path)
    else:
        assert tokens.load(path, tmp_path)[0].usable_at(NOW) is None
