"""The launchers in agents/ are exactly what harness writes into a repository's ai/agents/bin."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.workers import launcher

AGENTS = Path(__file__).resolve().parent.parent / "agents"


@pytest.mark.parametrize("name", ["scripted", "claude", "codex", "gemini"])
def test_launcher_matches_the_package(name: str) -> None:
    path = AGENTS / f"{name}-cli"
    assert path.read_text() == launcher(name)
    assert os.access(path, os.X_OK)
