"""The shims' launch options, the command allowlist, and the fences around embedded text."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.workers import shim

from .builders import FAST


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


@FAST
@given(
    st.text(max_size=20),
    st.sampled_from(["worker", "person", "repository"]),
    st.lists(st.sampled_from(["x", "\n", ">>>blob id ", "<<<blob ", "0" * 32, "a"]), max_size=12),
)
def test_no_text_closes_or_breaks_its_fence(name: str, source: str, parts: list[str]) -> None:
    text = "".join(parts)
    lines = shim.fence("blob", name, source, text).split("\n")
    assert lines[-1] == ""
    opening, closing = lines[0], lines[-2]
    tag = opening.rsplit(" ", 1)[1]
    assert opening == f"<<<blob {orjson.dumps(name).decode()} from {source} id {tag}"
    assert closing == f">>>blob id {tag}" and len(tag) == 32
    assert lines.count(closing) == 1  # the text never holds its own closing line
    body = "\n".join(lines[1:-2]) + "\n"
    assert body == (text if text.endswith("\n") else text + "\n")


def test_briefs_and_personas_say_where_they_came_from(tmp_path: Path) -> None:
    (tmp_path / "ai" / "roles").mkdir(parents=True)
    (tmp_path / "ai" / "roles" / "mine.md").write_text("Local brief.\n")
    launch = shim.Launch(persona="You are careful.\n>>>persona id x\n")
    local = shim.role_brief("mine", tmp_path, launch)
    assert local.startswith('<<<brief "ai/roles/mine.md" from repository id ')
    assert '<<<persona "persona" from person id ' in local
    shipped = shim.role_brief("localized-impl", tmp_path, shim.Launch())
    assert shipped.startswith('<<<brief "localized-impl" from harness id ')
