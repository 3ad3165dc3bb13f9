"""`harness init` writes what is missing and nothing else (the CLI's view: test_cli.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.importers import scaffold
from harness.repository.layout import Layout
from harness.spec import config

from .conftest import Sample, calc_patch, new_file_patch, ok, subtask

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


def test_a_run_under_init_s_config_says_nothing_is_built_or_tested(sample: Sample) -> None:
    sample.set_config(config.DEFAULT_TEXT)  # what `harness init` writes: [verify] commented out
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    res = sample.cli("run", "demo", quiet=False)
    assert res.returncode == 0, res.stderr
    assert res.stderr.startswith(
        "harness: build: none configured, test: none configured ([verify] in ai/harness.toml)\n"
    )
    assert "T1: gate ok" in res.stderr and "build" not in res.stderr.split("\n", 1)[1]
    # Its twin: a build configured is run and said so.
    sample.set_config(config.DEFAULT_TEXT.replace("# build = ", "build = "))
    sample.write_plan([subtask("T1", creates=["src/b.py"])], task="again")
    sample.write_script([ok("T1", ("src/b.py", new_file_patch("src/b.py", ["B = 2"])))])
    res = sample.cli("run", "again", quiet=False)
    assert res.returncode == 0, res.stderr
    assert "none configured" not in res.stderr and "T1: build ok" in res.stderr
