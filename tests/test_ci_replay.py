"""docs/ci-replay.yml: a workflow that parses, names the commands, and finds the right tasks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from .builders import git
from .conftest import ROOT

WORKFLOW = ROOT / "docs" / "ci-replay.yml"


def workflow() -> dict[Any, Any]:
    doc = yaml.safe_load(WORKFLOW.read_text("utf-8"))
    assert isinstance(doc, dict)
    return doc


def steps() -> list[dict[str, Any]]:
    jobs = workflow()["jobs"]
    assert list(jobs) == ["replay"]
    found: list[dict[str, Any]] = jobs["replay"]["steps"]
    return found


def step(name: str) -> dict[str, Any]:
    return next(s for s in steps() if s.get("name", "").startswith(name))


def test_workflow_runs_on_pull_requests_with_full_history() -> None:
    doc = workflow()
    # YAML 1.1 reads a bare `on` key as true.
    assert "pull_request" in doc[True]
    assert doc["permissions"] == {"contents": "read"}
    checkout = next(s for s in steps() if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0


def test_workflow_names_the_commands() -> None:
    scripts = "\n".join(s.get("run", "") for s in steps())
    assert 'git diff --name-only "$BASE_SHA...$HEAD_SHA" -- ai/tasks ai/exchanges' in scripts
    assert re.search(r'harness audit "\$task"', scripts)
    assert re.search(r'harness replay "\$task" --verify', scripts)
    assert re.search(r'harness report "\$task" -o ', scripts)
    upload = next(s for s in steps() if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()"
    # Pull-request data reaches the scripts through env only, never spliced into their text.
    assert "${{" not in scripts


def test_doc_shows_the_same_workflow_and_readme_links_it() -> None:
    doc = (ROOT / "docs" / "ci-replay.md").read_text("utf-8")
    block = re.search(r"```yaml\n(.*?)```", doc, re.S)
    assert block is not None and block.group(1) == WORKFLOW.read_text("utf-8")
    assert "(docs/ci-replay.md)" in (ROOT / "README.md").read_text("utf-8")


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_task_discovery_picks_the_changed_tasks_that_still_exist(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(
        root,
        {
            "ai/tasks/kept/plan.json": "{}",
            "ai/tasks/ran/plan.json": "{}",
            "ai/tasks/gone/plan.json": "{}",
            "ai/exchanges/ran/c1/meta.json": "{}",
        },
    )
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD")
    write(
        root,
        {
            "ai/tasks/new/plan.json": "{}",
            "ai/exchanges/ran/c2/meta.json": "{}",
            "ai/tasks/bad id/plan.json": "{}",
            "ai/agents/registry.json": "{}",
            "src/app.py": "",
        },
    )
    (root / "ai/tasks/gone/plan.json").unlink()
    git(root, "add", "-A")
    git(root, "commit", "-qm", "head")
    head = git(root, "rev-parse", "HEAD")
    env = {**os.environ, "BASE_SHA": base, "HEAD_SHA": head, "RUNNER_TEMP": str(tmp_path)}
    script = step("Find the tasks")["run"]
    res = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "tasks").read_text().split() == ["new", "ran"]


def test_each_task_is_reported_audited_and_replayed_and_any_failure_fails(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    fake = bin_dir / "harness"
    # Records its arguments; the replay of task b diverges.
    fake.write_text(
        f'#!/bin/sh\necho "$*" >> {calls}\n[ "$1 $2" = "replay b" ] && exit 1\nexit 0\n'
    )
    fake.chmod(0o755)
    (tmp_path / "tasks").write_text("a\nb\n")
    env = {**os.environ, "RUNNER_TEMP": str(tmp_path), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    script = step("Audit and replay")["run"]
    res = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 1
    reports = tmp_path / "reports"
    assert calls.read_text().splitlines() == [
        f"report a -o {reports}/a.html",
        "audit a",
        "replay a --verify",
        f"report b -o {reports}/b.html",
        "audit b",
        "replay b --verify",
    ]


@pytest.mark.parametrize("committed", ["pip", None], ids=["shadowing-pip", "plain-checkout"])
def test_installing_harness_runs_the_runners_pip_whatever_the_checkout_holds(
    tmp_path: Path, committed: str | None
) -> None:
    root = tmp_path / "checkout"
    ran = tmp_path / "the pull request's pip ran"
    if committed is not None:
        # What a pull request could commit: `python -m pip` in the checkout would run it.
        write(root, {f"{committed}/__init__.py": "", f"{committed}/__main__.py": ""})
        (root / committed / "__main__.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
    root.mkdir(exist_ok=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    # A requirement already met: the real pip says so and installs nothing.
    env = {**os.environ, "HARNESS_SPEC": "pip", "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    res = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step("Install harness")["run"]],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert "Requirement already satisfied: pip" in res.stdout, res.stdout
    assert not ran.exists()


def test_every_python_the_workflow_starts_is_isolated_from_the_checkout() -> None:
    scripts = "\n".join(s.get("run", "") for s in steps())
    started = re.findall(r"\bpython3?\b[^\n]*", scripts)
    assert started
    assert all(re.match(r"python3? -I ", line) for line in started), started
