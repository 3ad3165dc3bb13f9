"""The record commit carries harness's own regular files only: nothing planted under ai/."""

from __future__ import annotations

import os
from pathlib import Path

from harness import recordset
from harness.layout import Layout

from .conftest import Sample, calc_patch, ok, subtask


def plant(root: Path) -> None:
    exchanges = root / "ai/exchanges/demo"
    (exchanges / "planted.txt").write_text("not harness's")
    (exchanges / ("0" * 64)).mkdir()  # named like an exchange, with no meta.json
    os.mkfifo(root / "ai/tasks/demo/pipe")
    (root / "ai/tasks/demo/link").symlink_to("/etc/passwd")


def test_planted_files_are_refused_not_committed(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("next", "demo").returncode == 0
    plant(sample.root)
    res = sample.cli("next", "demo")  # the task is complete: only the record runs
    assert res.returncode == 0, res.stderr
    refused = [line for line in res.stderr.splitlines() if "not recorded" in line]
    assert len(refused) == 4
    tracked = sample.git("ls-tree", "-r", "--name-only", "HEAD").split()
    assert not [p for p in tracked if p.endswith(("planted.txt", "/pipe", "/link"))]
    assert "ai/tasks/demo/progress.ndjson" in tracked


def test_a_clean_tree_refuses_nothing(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("next", "demo").returncode == 0
    keep, refused = recordset.collect(Layout(sample.root), "demo")
    assert refused == []
    assert "ai/tasks/demo/progress.ndjson" in keep and "ai/harness.toml" in keep
