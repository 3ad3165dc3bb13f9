"""Tests for coverage reports: a real `coverage json` run, and the pure delta/claim checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.checks.coverage import Coverage, delta, from_report, matches_claim, normalise_claim

MODULE = """\
def sign(x):
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0


def unused():
    return 2
"""

TEST_ONE = "from mod import sign\n\n\ndef test_pos():\n    assert sign(3) == 1\n"
TEST_ALL = TEST_ONE + "\n\ndef test_rest():\n    assert sign(-3) == -1\n    assert sign(0) == 0\n"


def _run_coverage(root: Path, test_source: str, *, branch: bool = True) -> dict[str, Any]:
    (root / "mod.py").write_text(MODULE)
    (root / "test_mod.py").write_text(test_source)
    # An empty ini pins pytest's rootdir here so no outer configuration leaks in.
    (root / "pytest.ini").write_text("[pytest]\n")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("COVERAGE", "PYTEST", "COV_CORE"))
    }
    run = [sys.executable, "-m", "coverage", "run", *(["--branch"] if branch else [])]
    for cmd in (
        [*run, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        [sys.executable, "-m", "coverage", "json", "-o", "cov.json"],
    ):
        proc = subprocess.run(
            cmd, cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    data: dict[str, Any] = json.loads((root / "cov.json").read_text())
    return data


def test_real_report_counts(tmp_path: Path) -> None:
    data = _run_coverage(tmp_path, TEST_ONE)
    cov = from_report(data)
    totals = data["totals"]
    assert cov == Coverage(
        covered_lines=totals["covered_lines"],
        num_statements=totals["num_statements"],
        covered_branches=totals["covered_branches"],
        num_branches=totals["num_branches"],
    )
    # The per-file counts add up to the totals we read.
    for name in ("covered_lines", "num_statements", "covered_branches", "num_branches"):
        assert sum(f["summary"][name] for f in data["files"].values()) == getattr(cov, name)
    mod = data["files"]["mod.py"]["summary"]
    # sign(3) covers the first branch only; `unused` is never called.
    assert (mod["num_branches"], mod["covered_branches"]) == (4, 1)
    assert cov.line() == totals["covered_lines"] / totals["num_statements"]
    assert cov.branch() == totals["covered_branches"] / totals["num_branches"]
    # The trap this module avoids: with --branch, percent_covered is neither metric.
    assert totals["percent_covered"] / 100 not in (cov.line(), cov.branch())


def test_real_delta_between_runs(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    base = from_report(_run_coverage(tmp_path / "a", TEST_ONE))
    new = from_report(_run_coverage(tmp_path / "b", TEST_ALL))
    assert new.covered_branches > base.covered_branches
    line_delta = delta(base, new, "line")
    assert line_delta == pytest.approx(new.line() - base.line())
    assert line_delta > 0
    assert delta(base, new, "branch") > 0
    assert matches_claim(line_delta, line_delta * 100)


def test_report_without_branch_data_is_refused(tmp_path: Path) -> None:
    data = _run_coverage(tmp_path, TEST_ONE, branch=False)
    with pytest.raises(ValueError, match="--branch"):
        from_report(data)


GOOD = {"covered_lines": 3, "num_statements": 4, "covered_branches": 1, "num_branches": 2}


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({}, "no 'totals'"),
        ({"totals": [1, 2]}, "no 'totals'"),
        ({"totals": {**GOOD, "num_statements": "4"}}, "num_statements must be"),
        ({"totals": {**GOOD, "covered_lines": 3.0}}, "covered_lines must be"),
        ({"totals": {**GOOD, "covered_lines": True}}, "covered_lines must be"),
        ({"totals": {**GOOD, "num_branches": -1}}, "num_branches must be"),
        ({"totals": {k: v for k, v in GOOD.items() if k != "covered_lines"}}, "'covered_lines'"),
        ({"totals": {**GOOD, "covered_lines": 5}}, "exceeds num_statements"),
        ({"totals": {**GOOD, "covered_branches": 3}}, "exceeds num_branches"),
    ],
)
def test_bad_reports(data: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError, match="coverage report") as info:
        from_report(data)
    assert needle in str(info.value)


def test_empty_counts_are_fully_covered() -> None:
    empty = Coverage(0, 0, 0, 0)
    assert (empty.line(), empty.branch()) == (1.0, 1.0)


def test_delta_from_integer_counts() -> None:
    base = Coverage(covered_lines=1, num_statements=3, covered_branches=1, num_branches=4)
    new = Coverage(covered_lines=2, num_statements=6, covered_branches=3, num_branches=4)
    # 1/3 and 2/6 are the same coverage: exactly zero, not a float crumb.
    assert delta(base, new, "line") == 0.0
    assert delta(base, new, "branch") == 0.5
    assert delta(new, base, "branch") == -0.5
    with pytest.raises(ValueError, match="unknown coverage metric"):
        delta(base, new, "statements")


@pytest.mark.parametrize(
    ("measured", "claimed", "expected"),
    [
        (0.10, 0.10, True),
        (0.10, 10, True),
        (0.10, 10.9, True),
        (0.10, 11.5, False),
        (0.10, 0.11, True),
        (0.10, 0.12, False),
        (-0.05, -5, True),
        (-0.05, 0.05, False),
        (0.0, 0.0, True),
        (0.0, 1, False),  # 1 is read as a fraction: the whole range
        (0.01, 1.5, True),  # 1.5 is read as percentage points
        (0.1, float("nan"), False),
        (0.1, float("inf"), False),
        (float("nan"), 0.1, False),
    ],
)
def test_matches_claim(measured: float, claimed: float, expected: bool) -> None:
    assert matches_claim(measured, claimed) is expected


def test_normalise_claim_and_tolerance() -> None:
    assert normalise_claim(-25) == -0.25
    assert normalise_claim(0.25) == 0.25
    assert matches_claim(0.10, 0.13, tolerance=0.05)
    assert not matches_claim(0.10, 0.13, tolerance=0.02)
