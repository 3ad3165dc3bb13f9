"""`harness plan import` end to end: an Agentfile or a Glee workflow written as plan.json, run
with the scripted worker, and every refusal leaving nothing written."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from .conftest import Sample, ok
from .test_glee import SERVE_CUSTOMERS  # seed 000's own example

GREET = """NAME greet
INPUT who DEFAULT world
AGENT critic FROM agents/critic.md
GOAL hello "Say hello to $who"
GOAL check "Review the greeting" USING critic
RUN main USING hello, check
"""


def plan_of(s: Sample, task: str) -> dict[str, object]:
    doc: dict[str, object] = orjson.loads((s.root / f"ai/tasks/{task}/plan.json").read_bytes())
    return doc


def import_(s: Sample, source: Path, task: str, *extra: str) -> tuple[int, str, str]:
    res = s.cli("plan", "import", str(source), "--task", task, *extra)
    return res.returncode, res.stdout, res.stderr


@pytest.fixture
def agentfile(sample: Sample) -> Path:
    (sample.root / "workflows/agents").mkdir(parents=True)
    (sample.root / "workflows/agents/critic.md").write_text("You are a careful critic.\n")
    path = sample.root / "workflows/Agentfile"
    path.write_text(GREET)
    return path


def test_an_agentfile_imports_validates_and_runs(sample: Sample, agentfile: Path) -> None:
    code, out, err = import_(sample, agentfile, "greet", "--input", "who=harness")
    assert code == 0, err
    assert out == "wrote ai/tasks/greet/plan.json\n"
    subtasks = plan_of(sample, "greet")["subtasks"]
    assert isinstance(subtasks, list)
    hello, check = subtasks
    assert (hello["id"], hello["goal"], hello["write_scope"]) == (
        "hello",
        "Say hello to harness",
        "none",
    )
    assert check["depends_on"] == ["hello"]
    assert check["inputs"] == ["workflows/agents/critic.md"]  # the persona, as an input
    assert sample.cli("plan", "validate", "greet").returncode == 0
    sample.write_script([ok("hello"), ok("check")])
    sample.commit_all("the workflow and its persona")  # inputs are read at the base
    res = sample.cli("run", "greet")
    assert res.returncode == 0, res.stderr
    assert sample.names("greet")[-1] == "task_completed"
    assert sample.cli("audit", "greet").returncode == 0
    assert sample.cli("replay", "greet").returncode == 0


def test_an_existing_plan_is_replaced_only_with_force(sample: Sample, agentfile: Path) -> None:
    assert import_(sample, agentfile, "greet")[0] == 0
    first = (sample.root / "ai/tasks/greet/plan.json").read_bytes()
    code, _, err = import_(sample, agentfile, "greet", "--input", "who=you")
    assert code == 2 and "ai/tasks/greet/plan.json exists: give --force" in err
    assert (sample.root / "ai/tasks/greet/plan.json").read_bytes() == first
    code, _, err = import_(sample, agentfile, "greet", "--input", "who=you", "--force")
    assert code == 0, err
    assert "Say hello to you" in (sample.root / "ai/tasks/greet/plan.json").read_text()


def test_a_started_task_is_never_replaced(sample: Sample, agentfile: Path) -> None:
    assert import_(sample, agentfile, "greet")[0] == 0
    sample.write_script([ok("hello"), ok("check")])
    assert sample.cli("next", "greet").returncode == 0
    before = (sample.root / "ai/tasks/greet/plan.json").read_bytes()
    code, _, err = import_(sample, agentfile, "greet", "--force")
    assert code == 2 and "task greet has started" in err
    assert (sample.root / "ai/tasks/greet/plan.json").read_bytes() == before


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (GREET.replace("GOAL hello", "GOAL hello hello"), "workflows/Agentfile:4:"),
        (GREET.replace("agents/critic.md", "../../outside.md"), "outside"),
        (GREET.replace("agents/critic.md", "agents/missing.md"), "agents/missing.md"),
    ],
    ids=["syntax", "escape", "missing-persona"],
)
def test_a_refused_agentfile_writes_nothing(
    sample: Sample, agentfile: Path, text: str, found: str
) -> None:
    (sample.root.parent / "outside.md").write_text("a secret\n")
    agentfile.write_text(text)
    code, out, err = import_(sample, agentfile, "greet")
    assert code == 2 and found in err, err
    assert err.count("\n") == 1 and out == ""
    assert not (sample.root / "ai/tasks/greet").exists()


def test_a_file_outside_the_repository_is_not_read(sample: Sample, tmp_path: Path) -> None:
    outside = tmp_path / "Agentfile"
    outside.write_text('GOAL hello "Say hello"\n')
    code, _, err = import_(sample, outside, "greet")
    assert code == 2 and "outside the repository" in err
    assert not (sample.root / "ai/tasks/greet").exists()


def test_a_malformed_input_is_a_usage_error(sample: Sample, agentfile: Path) -> None:
    code, _, err = import_(sample, agentfile, "greet", "--input", "who")
    assert code == 2 and "--input 'who': give it as NAME=VALUE" in err
    assert not (sample.root / "ai/tasks/greet").exists()


RESTAURANT = """\
name: run-restaurant
steps:
  - workflow: accounting
  - workflow: serve-customers
"""

ACCOUNTING = """\
name: accounting
steps:
  - agent: bookkeeper
    description: Reconcile the day's receipts
"""


def test_a_glee_workflow_imports_with_its_nested_workflows_and_runs(sample: Sample) -> None:
    folder = sample.root / ".glee/workflows"
    folder.mkdir(parents=True)
    for name, text in (
        ("run-restaurant", RESTAURANT),
        ("accounting", ACCOUNTING),
        ("serve-customers", SERVE_CUSTOMERS),
    ):
        (folder / f"{name}.yml").write_text(text)
    code, out, err = import_(
        sample, folder / "run-restaurant.yml", "restaurant", "--input", "channel=app"
    )
    assert code == 0, err
    assert out.splitlines() == [
        "wrote ai/tasks/restaurant/plan.json",
        "wrote ai/tasks/accounting/plan.json",
        "wrote ai/tasks/serve-customers/plan.json",
    ]
    top = plan_of(sample, "restaurant")["subtasks"]
    assert isinstance(top, list)
    assert [s.get("plan") for s in top] == ["accounting", "serve-customers"]
    served = plan_of(sample, "serve-customers")["subtasks"]
    assert isinstance(served, list)
    # Sequential (the default): each after the one before, and after what it references.
    edges = [[], ["step-0"], ["step-0", "step-1"], ["step-0", "step-2"]]
    assert [s["depends_on"] for s in served] == edges
    assert "app" in served[0]["goal"]
    assert sample.cli("plan", "validate", "restaurant").returncode == 0
    sample.write_script([ok(f"step-{i}") for i in range(4)])
    res = sample.cli("run", "restaurant", "--max-parallel", "2")
    assert res.returncode == 0, res.stderr
    for task in ("restaurant", "accounting", "serve-customers"):
        assert sample.names(task)[-1] == "task_completed"
        assert sample.cli("audit", task).returncode == 0
    res = sample.cli("replay", "restaurant")
    assert res.returncode == 0, res.stderr


def test_a_glee_workflow_whose_nested_plan_exists_writes_nothing(sample: Sample) -> None:
    folder = sample.root / ".glee/workflows"
    folder.mkdir(parents=True)
    (folder / "run-restaurant.yml").write_text(RESTAURANT.replace("serve-customers", "accounting"))
    (folder / "accounting.yml").write_text(ACCOUNTING)
    sample.write_plan([{"id": "x", "plan": "elsewhere"}], "accounting")
    code, _, err = import_(sample, folder / "run-restaurant.yml", "restaurant")
    assert code == 2 and "ai/tasks/accounting/plan.json exists" in err
    assert not (sample.root / "ai/tasks/restaurant").exists()


def test_a_broken_glee_workflow_names_its_line_and_column(sample: Sample) -> None:
    folder = sample.root / ".glee/workflows"
    folder.mkdir(parents=True)
    (folder / "bad.yml").write_text("name: bad\nsteps:\n  - agent: a\n    workflow: b\n")
    code, _, err = import_(sample, folder / "bad.yml", "bad")
    assert code == 2 and err.startswith("harness: .glee/workflows/bad.yml:3:")
    assert not (sample.root / "ai/tasks/bad").exists()
