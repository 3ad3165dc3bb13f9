"""The launchers (harness/boundary/launchers.py): agents/ holds exactly what harness writes into
a repository's ai/agents/bin; each runs harness's own shim whatever the worker's copy holds, and
one that lets the copy in is refused before any call."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.boundary import launchers
from harness.boundary.launchers import launcher
from harness.importers import demo

from .conftest import Sample, completed_demo

AGENTS = Path(__file__).resolve().parent.parent / "agents"


@pytest.mark.parametrize("name", ["scripted", *launchers.SHIMS])
def test_launcher_matches_the_package(name: str) -> None:
    path = AGENTS / f"{name}-cli"
    assert path.read_text() == launcher(name)
    assert os.access(path, os.X_OK)
    assert not launchers.exposed(path)


@pytest.mark.parametrize(
    ("line", "exposed"),
    [
        ('exec "$HARNESS_PYTHON" -m harness.workers.claude "$@"', True),
        ("exec python3 -m harness.workers.codex", True),
        ("exec python3 -u -m harness.workers.codex", True),
        ("/usr/bin/env python -m harness.workers.scripted --script s.json", True),
        ('exec "$HARNESS_PYTHON" -I -m harness.workers.claude "$@"', False),
        ('exec "$HARNESS_PYTHON" -P -m harness.workers.claude "$@"', False),
        ("exec python3 -IS -m harness.workers.gemini", False),
        ("exec python3 -u -I -m harness.workers.gemini", False),
        ("# an old line: python -m harness.workers.claude", False),
        ("exec node cli.js", False),
    ],
)
def test_a_launcher_that_lets_its_folder_onto_the_path_is_told(
    tmp_path: Path, line: str, exposed: bool
) -> None:
    path = tmp_path / "cli"
    path.write_text(f"#!/bin/sh\n{line}\n")
    assert launchers.exposed(path) is exposed


# What a pull request (or an earlier call) could commit: a package that shadows the shim's.
SHADOW = {
    "harness/__init__.py": "",
    "harness/workers/__init__.py": "",
    "harness/workers/scripted.py": (
        "import sys\nsys.stderr.write('the repository shim ran\\n')\nsys.exit(2)\n"
    ),
}
# A project whose own package happens to be named harness, tested by its own suite.
OWN = {
    "harness/__init__.py": "WHOSE = 'the project'\n",
    "tests/test_own_harness.py": (
        "import unittest\n\nimport harness\n\n\n"
        "class Own(unittest.TestCase):\n"
        "    def test_it_is_the_projects(self):\n"
        "        self.assertEqual(harness.WHOSE, 'the project')\n"
    ),
}


@pytest.mark.e2e
@pytest.mark.parametrize("committed", [SHADOW, OWN], ids=["shadowing", "the-projects-own"])
def test_the_shim_is_harness_own_whatever_the_copy_holds(
    tmp_path: Path, committed: dict[str, str]
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    demo.build(root)
    s = Sample(root, root / "agents" / "script.json")
    for rel, text in committed.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    s.commit_all("the repository's own harness package")
    res = s.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    assert s.names()[-1] == "task_completed"
    said = b"".join(p.read_bytes() for p in (root / "ai" / "exchanges").rglob("stderr.log"))
    assert b"the repository shim ran" not in said
    if committed is OWN:
        tested = [ev for ev in s.events() if ev["event"] == "test_passed"]
        assert tested, "the project's suite, with its own harness package, ran and passed"


@pytest.mark.e2e
def test_an_old_launcher_is_refused_before_any_call(tmp_path: Path) -> None:
    s = completed_demo(tmp_path)
    launch = s.root / "agents" / "scripted-cli"
    old = 'exec "${HARNESS_PYTHON:-python3}" -m harness.workers.scripted "$@"\n'
    launch.write_text("#!/bin/sh\n" + old)
    res = s.cli("registry", "check")
    assert res.returncode == 1
    assert "runs its shim with `python -m` alone" in res.stdout + res.stderr
    assert "python -I -m" in res.stdout + res.stderr
