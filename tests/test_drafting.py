"""`harness plan draft` / `accept`: an agent proposes, the command approves, nothing runs before."""

from __future__ import annotations

from pathlib import Path

import orjson

from .conftest import CLOCK, Sample, calc_patch, err, ok, subtask

DRAFT = Path("ai/tasks/t9/plan.draft.json")
PLAN = Path("ai/tasks/t9/plan.json")


def planner(sample: Sample, answer: dict[str, object]) -> None:
    reg = sample.read_json("ai/agents/registry.json")
    reg["agents"][0]["capabilities"].append("plan")
    sample.write_json("ai/agents/registry.json", reg)
    sample.write_script([answer])


def proposal(subtasks: list[dict[str, object]]) -> dict[str, object]:
    content = orjson.dumps({"task_id": "t9", "created": CLOCK, "subtasks": subtasks}).decode()
    return {
        "subtask": "draft",
        "result": {
            "artifacts": [{"name": "plan.json", "type": "application/json", "content": content}]
        },
    }


def test_draft_then_accept(sample: Sample) -> None:
    planner(sample, proposal([subtask("T1"), subtask("T2", depends_on=["T1"])]))
    res = sample.cli("plan", "draft", "t9", "--goal", "Add subtract")
    assert res.returncode == 0, res.stderr
    assert orjson.loads((sample.root / DRAFT).read_bytes())["task_id"] == "t9"
    assert not (sample.root / PLAN).exists()
    # a draft never runs
    assert sample.cli("next", "t9").returncode == 2
    assert not (sample.root / "ai/tasks/t9/progress.ndjson").exists()
    # the call is recorded like any other
    exchanges = list((sample.root / "ai/tasks/t9/drafts").iterdir())
    assert len(exchanges) == 1 and not (sample.root / "ai/exchanges/t9").exists()
    prompt = orjson.loads((exchanges[0] / "prompt.ndjson").read_bytes())["payload"]
    assert prompt["role"] == "plan" and prompt["write_scope"] == "none"
    assert prompt["goal"] == "Add subtract"

    res = sample.cli("plan", "accept", "t9")
    assert res.returncode == 0, res.stderr
    assert '"task_id": "t9"' in res.stdout
    assert (sample.root / PLAN).exists() and not (sample.root / DRAFT).exists()
    assert sample.cli("plan", "validate", "t9").returncode == 0


def test_an_invalid_proposal_is_refused_and_no_draft_is_written(sample: Sample) -> None:
    cyclic = [subtask("T1", depends_on=["T2"]), subtask("T2", depends_on=["T1"])]
    planner(sample, proposal(cyclic))
    res = sample.cli("plan", "draft", "t9", "--goal", "x")
    assert res.returncode == 2 and "dependency cycle" in res.stderr
    assert "plan.draft.json" in res.stderr
    assert not (sample.root / DRAFT).exists()
    assert not list((sample.root / "ai/tasks/t9").glob(".*"))


def test_an_agent_failure_halts(sample: Sample) -> None:
    planner(sample, err("draft", "hard", "cannot plan"))
    res = sample.cli("plan", "draft", "t9", "--goal", "x")
    assert res.returncode == 1 and "cannot plan" in res.stderr
    assert not (sample.root / DRAFT).exists()


def test_accept_needs_a_draft_and_an_unstarted_task(sample: Sample) -> None:
    assert sample.cli("plan", "accept", "t9").returncode == 2
    planner(sample, proposal([subtask("T1")]))
    sample.write_plan([subtask("T1")], task="t9")
    (sample.root / "ai/tasks/t9/progress.ndjson").write_text("")
    assert sample.cli("plan", "draft", "t9", "--goal", "x").returncode == 0
    res = sample.cli("plan", "accept", "t9")
    assert res.returncode == 2 and "has started" in res.stderr


def test_what_draft_and_accept_wrote_goes_into_the_record(sample: Sample) -> None:
    planner(sample, proposal([subtask("T1")]))
    assert sample.cli("plan", "draft", "t9", "--goal", "x").returncode == 0
    assert sample.cli("plan", "accept", "t9").returncode == 0
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    res = sample.cli("next", "t9")
    assert res.returncode == 0 and "not recorded" not in res.stderr, res.stderr
    assert sample.git("status", "--porcelain", "--untracked-files=all", "--", "ai") == ""
    tracked = sample.git("ls-tree", "-r", "--name-only", "HEAD", "--", "ai/tasks/t9").split()
    assert str(PLAN) in tracked and str(DRAFT) not in tracked


def test_a_drafted_plan_runs_and_audits_clean(sample: Sample) -> None:
    planner(sample, proposal([subtask("T1")]))
    assert sample.cli("plan", "draft", "t9", "--goal", "Add VALUE").returncode == 0
    assert sample.cli("plan", "accept", "t9").returncode == 0
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("run", "t9").returncode == 0
    res = sample.cli("audit", "t9")
    assert res.returncode == 0, res.stdout
    assert sample.cli("replay", "t9").returncode == 0


def test_a_drafted_plan_may_not_nest_and_nothing_is_written(sample: Sample) -> None:
    sample.write_plan([subtask("O1")], task="other")
    planner(sample, proposal([subtask("T1"), {"id": "inner", "plan": "other"}]))
    res = sample.cli("plan", "draft", "t9", "--goal", "x")
    assert res.returncode == 1
    assert "subtask inner runs another task's plan: a drafted plan may not nest" in res.stderr
    assert not (sample.root / DRAFT).exists()
    # Asked again at the same HEAD and instant, the recorded answer is refused the same way.
    res = sample.cli("plan", "draft", "t9", "--goal", "x")
    assert res.returncode == 1 and "may not nest" in res.stderr
    # A plan that does not nest is drafted.
    sample.write_script([proposal([subtask("T1")])])
    assert sample.cli("plan", "draft", "t9", "--goal", "y").returncode == 0


def test_a_drafted_plan_gets_the_lower_drafted_budgets(sample: Sample) -> None:
    greedy = proposal([subtask("T1")])
    content = orjson.loads(greedy["result"]["artifacts"][0]["content"])  # type: ignore[index]
    content["budgets"] = {"max_steps": 500, "max_cost_usd": 2.5}
    greedy["result"]["artifacts"][0]["content"] = orjson.dumps(content).decode()  # type: ignore[index]
    planner(sample, greedy)
    with (sample.root / "ai/harness.toml").open("a") as fh:
        fh.write("\n[drafted_budgets]\nmax_steps = 4\nmax_runtime_s = 60\n")
    assert sample.cli("plan", "draft", "t9", "--goal", "x").returncode == 0
    drafted = orjson.loads((sample.root / DRAFT).read_bytes())["budgets"]
    # Lowered to the cap, given where it proposed none, and what it proposed under the caps kept.
    assert drafted == {"max_cost_usd": 2.5, "max_runtime_s": 60, "max_steps": 4}
    assert sample.cli("plan", "accept", "t9").returncode == 0
    assert orjson.loads((sample.root / PLAN).read_bytes())["budgets"] == drafted
