"""The e2e marker conftest sets, and the guard that fails an unmarked test starting what
only an e2e test may."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, Sample, _e2e_program, _uses_the_cli, watching

FAKES = ROOT / "tests" / "fakes"


def _starts_the_cli(s: Sample) -> subprocess.CompletedProcess[str]:
    return s.cli("status", "demo")


def _runs_git(root: Path) -> str:
    return subprocess.run(["git", "status"], cwd=root, capture_output=True, text=True).stdout


def test_a_test_naming_a_helper_that_starts_the_cli_is_e2e(request: pytest.FixtureRequest) -> None:
    assert _uses_the_cli(_starts_the_cli, set())
    assert not _uses_the_cli(_runs_git, set())
    # This test names _starts_the_cli, so it is e2e itself.
    assert request.node.get_closest_marker("e2e") is not None


def test_a_test_using_git_only_is_not_e2e(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    assert request.node.get_closest_marker("e2e") is None


@pytest.mark.parametrize(
    "argv",
    [
        [sys.executable, "-m", "harness.cli", "run", "demo"],
        [sys.executable, "-m", "harness.workers.claude"],
        ["/usr/bin/bwrap", "--die-with-parent", "--", "true"],
        ["ai/agents/bin/scripted-cli", "--version"],
        ["claude", "--version"],
    ],
)
def test_the_guard_knows_what_only_an_e2e_test_may_start(argv: list[str]) -> None:
    assert _e2e_program(argv, {"PATH": str(FAKES)}) == " ".join(argv)


def test_git_python_and_a_stand_in_the_test_wrote_are_not_e2e(tmp_path: Path) -> None:
    stub = tmp_path / "bin" / "claude"
    stub.parent.mkdir()
    stub.write_text("#!/bin/sh\necho 2.1.330\n")
    stub.chmod(0o755)
    env = {"PATH": str(stub.parent)}
    assert _e2e_program(["git", "status"], env) is None
    assert _e2e_program([sys.executable, "-c", "pass"], env) is None
    assert _e2e_program(["claude", "--version"], env) is None
    assert _e2e_program("claude", {"PATH": str(FAKES)}) is not None


@pytest.mark.e2e  # it starts what the guard flags, which only an e2e test may
def test_the_guard_sees_a_program_started_while_it_watches() -> None:
    with watching() as started:
        subprocess.run([sys.executable, "-c", "pass", "harness.cli"], check=True)
        subprocess.run(["git", "--version"], capture_output=True, check=True)
    assert started == [f"{sys.executable} -c pass harness.cli"]
