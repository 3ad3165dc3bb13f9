"""The command line as README documents it: Ctrl-C, `demo --repo`, `--json` on reading commands."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from harness.base import files
from harness.boundary import registry
from harness.boundary.launchers import launcher as write_launcher

from .conftest import CLOCK, Sample, calc_patch, demo_cli, ok, subtask

ISSUE = " (issue one: harness tokens issue --paths 'src/**' --ttl 2h)"


def document(res: subprocess.CompletedProcess[str]) -> Any:
    """The one JSON document a --json command printed, checked to be in its stable form."""
    doc = orjson.loads(res.stdout)
    assert res.stdout == files.pretty(doc).decode()  # sorted keys, one layout
    return doc


# -- Ctrl-C ----------------------------------------------------------------------------------


def test_ctrl_c_during_a_call_exits_130_with_one_line_and_the_next_run_goes_on(
    sample: Sample,
) -> None:
    sample.write_plan([subtask("T1")])
    slow = ok("T1", ("src/calc.py", calc_patch())) | {"sleep_s": 60}
    sample.write_script([slow])
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "next", "demo", "--repo", str(sample.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HARNESS_CLOCK": CLOCK},
    )
    assert proc.stderr is not None
    assert proc.stderr.readline() == "T1: scripted working as localized-impl\n"
    time.sleep(1)  # the worker is asleep in its sandbox
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err == "harness: interrupted; run the command again to go on\n"
    assert out == ""
    # Nothing half-written: the log holds whole lines up to the call, the tree is untouched,
    # and the worker is gone with harness.
    assert sample.names() == ["task_started", "subagent_invoked"]
    assert sample.status_outside_ai() == ""
    alive = subprocess.run(["pgrep", "-f", str(sample.script)], capture_output=True, check=False)
    assert alive.stdout == b""

    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    again = sample.cli("next", "demo")
    assert again.returncode == 0, again.stderr
    invoked = [e for e in sample.events() if e["event"] == "subagent_invoked"]
    assert len(invoked) == 1  # the interrupted call is made again under the same call_id
    assert sample.names()[-1] == "step_completed"
    audit = sample.cli("audit", "demo")
    assert audit.returncode == 0, audit.stdout + audit.stderr


# -- demo --repo -----------------------------------------------------------------------------


def test_demo_builds_its_repository_where_repo_says(tmp_path: Path) -> None:
    where = tmp_path / "new" / "calc"
    res = demo_cli("--repo", str(where))
    assert res.returncode == 0, res.stderr
    assert f"sample repository: {where}" in res.stdout
    assert (where / "ai/tasks/demo/progress.ndjson").is_file()


def test_demo_refuses_two_different_folders(tmp_path: Path) -> None:
    res = demo_cli("--repo", str(tmp_path / "a"), "--dir", str(tmp_path / "b"))
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "give one folder" in res.stderr
    assert list(tmp_path.iterdir()) == []


# -- --json on plan show, tokens list, registry check ---------------------------------------


def test_plan_show_json_lists_the_subtasks_in_run_order(sample: Sample) -> None:
    sample.write_plan(
        [
            subtask("T2", depends_on=["T1"], goal="second", on_error="continue"),
            subtask("T1", goal="first", agent=["scripted"], budgets={"max_steps": 2}),
            {"id": "T3", "plan": "other", "depends_on": ["T2"]},
        ]
    )
    doc = sample.read_json("ai/tasks/demo/plan.json")
    sample.write_json("ai/tasks/demo/plan.json", doc | {"max_parallel": 2})
    res = sample.cli("plan", "show", "demo", "--json")
    assert res.returncode == 0, res.stderr
    common = {"role": "localized-impl", "plan": None}
    assert document(res) == {
        "task_id": "demo",
        "max_parallel": 2,
        "budgets": {},
        "subtasks": [
            common
            | {"id": "T1", "goal": "first", "depends_on": [], "agents": ["scripted"]}
            | {"on_error": "stop", "budgets": {"max_steps": 2}},
            common
            | {"id": "T2", "goal": "second", "depends_on": ["T1"], "agents": []}
            | {"on_error": "continue", "budgets": {}},
            {"id": "T3", "role": "nested-plan", "goal": "run the plan of task other"}
            | {"depends_on": ["T2"], "agents": [], "on_error": "stop", "budgets": {}}
            | {"plan": "other"},
        ],
    }


def test_tokens_list_json_says_whether_each_token_is_usable(sample: Sample) -> None:
    res = sample.cli("tokens", "list", "--json")
    assert res.returncode == 0, res.stderr
    w1 = {
        "id": "W1",
        "paths": ["src/**", "tests/**", "docs/**"],
        "expires": "2026-01-02T00:00:00Z",
        "one_shot": False,
        "revoked": False,
        "spent": None,
        "usable": True,
        "why": None,
    }
    assert document(res) == {"tokens": [w1]}
    assert sample.cli("tokens", "revoke", "W1").returncode == 0
    res = sample.cli("tokens", "list", "--json")
    revoked = w1 | {"revoked": True, "usable": False, "why": "token W1 is revoked"}
    assert document(res) == {"tokens": [revoked]}


def test_registry_check_json_names_each_agent_and_fails_like_the_table(sample: Sample) -> None:
    reg = sample.read_json("ai/agents/registry.json")
    reg["agents"].append(dict(reg["agents"][0], id="ghost", cmd="agents/missing-cli"))
    sample.write_json("ai/agents/registry.json", reg)
    res = sample.cli("registry", "check", "--json")
    assert res.returncode == 1, res.stderr
    doc = document(res)
    assert doc["ok"] is False
    good, ghost = doc["agents"]
    assert (good["id"], good["ok"], good["wanted"], good["error"]) == (
        "scripted",
        True,
        ">=0.1",
        None,
    )
    assert isinstance(good["version"], str) and good["version"]
    assert (ghost["id"], ghost["ok"], ghost["version"]) == ("ghost", False, None)
    assert "agents/missing-cli not found" in ghost["error"]


def test_plan_validate_json_gives_the_order_or_every_problem(sample: Sample) -> None:
    sample.write_plan([subtask("T1"), subtask("T2", depends_on=["T1"])])
    res = sample.cli("plan", "validate", "demo", "--json")
    assert res.returncode == 0, res.stderr
    assert orjson.loads(res.stdout) == {
        "order": ["T1", "T2"],
        "problems": [],
        "task_id": "demo",
        "valid": True,
    }
    sample.write_json("ai/agents/write_tokens.json", {"tokens": []})
    res = sample.cli("plan", "validate", "demo", "--json")
    doc = orjson.loads(res.stdout)
    assert res.returncode == 1 and doc["valid"] is False and doc["order"] == []
    assert doc["problems"] == [
        f"subtask T1: no usable token covers src/**{ISSUE}",
        f"subtask T2: no usable token covers src/**{ISSUE}",
    ]


def test_doctor_json_is_one_document(sample: Sample) -> None:
    res = sample.cli("doctor", "--json")
    doc = orjson.loads(res.stdout)
    assert doc["sandbox"] == "works" and res.returncode == 0
    assert [a["id"] for a in doc["agents"]] == ["scripted"] and doc["agents"][0]["ok"]


def test_doctor_starts_each_agent_in_its_sandbox_and_names_the_fix(sample: Sample) -> None:
    """An agent whose CLI is not on PATH: doctor says which, and how to install it."""
    reg = sample.read_json("ai/agents/registry.json")
    reg["agents"].append(registry.shim_entry("claude"))
    sample.write_json("ai/agents/registry.json", reg)
    (sample.root / "ai" / "agents" / "bin").mkdir(parents=True, exist_ok=True)
    launcher = sample.root / "ai" / "agents" / "bin" / "claude-cli"
    launcher.write_text(write_launcher("claude"))
    launcher.chmod(0o755)
    res = sample.cli("doctor", env={"PATH": os.defpath})
    assert res.returncode == 1
    lines = res.stdout.splitlines()
    assert "sandbox: works" in lines and any(
        line.startswith("agent scripted: ok ") for line in lines
    )
    assert (
        "agent claude: claude not found on PATH (npm install -g @anthropic-ai/claude-code)" in lines
    )


def readme_plan() -> str:
    """The plan.json the README shows under "A plan", as a user would copy it."""
    text = (Path(__file__).parents[1] / "README.md").read_text()
    after = text[text.index("### A plan: ai/tasks/demo/plan.json") :]
    return after[after.index("```json\n") + 8 : after.index("\n```\n")]


def test_the_readme_s_plan_validates_once_a_token_covers_it(sample: Sample) -> None:
    (sample.root / "ai/tasks/demo/plan.json").write_text(readme_plan())
    sample.write_json("ai/agents/write_tokens.json", {"tokens": []})
    res = sample.cli("plan", "validate", "demo")
    assert res.returncode == 1
    assert "subtask T2: no usable token covers tests/**, tests/test_*.py" in res.stderr
    # What the README says to issue covers it.
    paths = ["src/**", "tests/**", "docs/**"]
    assert sample.cli("tokens", "issue", "--paths", *paths, "--ttl", "2h").returncode == 0
    res = sample.cli("plan", "validate", "demo")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "plan demo is valid: 3 subtasks, order T1 -> T2 -> T3\n"
