"""The shims' launch options and the command allowlist."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.workers import shim


def test_shim_launch_options(tmp_path: Path) -> None:
    persona = tmp_path / "p.md"
    persona.write_text("Be terse.")
    got = shim.parse_launch(
        ["--allow-command", "pytest -q", "--persona", str(persona), "--allow-command", "ruff"]
    )
    assert got == shim.Launch("Be terse.", ("pytest -q", "ruff"))
    assert shim.parse_launch([]) == shim.Launch()
    for bad in (["--allow-command"], ["--yolo", "x"], ["--allow-command", "a;b"]):
        with pytest.raises(shim.ShimError):
            shim.parse_launch(bad)
    with pytest.raises(shim.ShimError, match="--persona"):
        shim.parse_launch(["--persona", str(tmp_path / "missing.md")])


@pytest.mark.parametrize(
    ("command", "allowed"),
    [
        ("pytest -q", True),
        ("pytest -q tests/test_x.py", True),
        ("bash -lc 'pytest -q -k add'", True),
        ("/bin/bash -lc 'ruff check src'", True),
        ("pytest", False),
        ("pytest -x", False),
        ("pytest -q; rm -rf /", False),
        ("pytest -q && curl x", False),
        ("pytest -q | sh", False),
        ("pytest -q `id`", False),
        ("pytest -q $(id)", False),
        ("pytest -q > out", False),
        ("bash -lc 'pytest -q' extra", False),
        ("bash -lc 'pytest -q", False),
        ("bash -lc \"bash -lc 'pytest -q'\"", False),
        ("", False),
    ],
)
def test_allowed_command(command: str, allowed: bool) -> None:
    launch = shim.Launch(commands=("pytest -q", "ruff check"))
    assert shim.allowed_command(command, launch) is allowed


@given(st.text(max_size=60))
def test_nothing_is_allowed_without_an_allowlist(command: str) -> None:
    assert not shim.allowed_command(command, shim.Launch())
