"""`harness init` writes what is missing and nothing else (the CLI's view: test_cli.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness import scaffold
from harness.layout import Layout

MADE = [
    "ai/harness.toml",
    "ai/agents/registry.json",
    "ai/agents/write_tokens.json",
    "ai/agents/bin/claude-cli",
    "ai/agents/bin/codex-cli",
]


def test_init_names_what_it_wrote_and_writes_it_once(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    layout = Layout(tmp_path)
    assert scaffold.init(layout, gemini=False) == MADE
    assert scaffold.init(layout, gemini=False) == []
    assert scaffold.init(layout, gemini=True) == ["ai/agents/bin/gemini-cli"]
    assert (tmp_path / "ai/agents/bin/gemini-cli").stat().st_mode & 0o111
