"""Nested plans end to end through the real CLI: a subtask that runs another task's plan as
one unit, the tree refused before anything runs, budgets shared down it, a kill inside it,
and replay and audit across the link."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from .conftest import Sample, err, new_file_patch, ok, scripted, subtask


def making(sid: str, **fields: Any) -> dict[str, Any]:
    """A subtask creating a file of its own."""
    path = f"src/{sid.lower()}.py"
    return subtask(sid, write_scope="src/**", creates=[path], **fields)


def made(sid: str) -> dict[str, Any]:
    path = f"src/{sid.lower()}.py"
    return ok(sid, (path, new_file_patch(path, [f"NAME = {sid!r}"])))


def runs(sid: str, task: str, **fields: Any) -> dict[str, Any]:
    return {"id": sid, "plan": task, **fields}


def three_deep(s: Sample) -> None:
    """top: T1, then `inner` running mid, then T3; mid: M1, then `deeper` running low; low: L1."""
    s.write_plan([making("T1"), runs("inner", "mid", depends_on=["T1"]), making("T3")], "top")
    s.write_plan([making("M1"), runs("deeper", "low", depends_on=["M1"])], "mid")
    s.write_plan([making("L1")], "low")


def ends(s: Sample, task: str, step: str) -> dict[str, Any]:
    return next(
        e
        for e in reversed(s.events(task))
        if e.get("step") == step and e["event"] in ("step_completed", "step_failed")
    )


def applied(s: Sample, task: str) -> dict[str, str]:
    return {
        e["step"]: e["details"]["commit"]
        for e in s.events(task)
        if e["event"] == "subagent_diffs_applied"
    }


def last_line_hash(s: Sample, task: str) -> str:
    data = (s.root / "ai" / "tasks" / task / "progress.ndjson").read_bytes()
    return hashlib.sha256(data.rstrip(b"\n").rpartition(b"\n")[2]).hexdigest()


def status_rows(s: Sample, task: str) -> dict[str, dict[str, Any]]:
    doc = orjson.loads(s.cli("status", task, "--json").stdout)
    return {row["id"]: row for row in doc["subtasks"]}


def test_a_plan_nested_two_deep_runs_as_one_unit_linked_replayed_and_audited(
    sample: Sample,
) -> None:
    three_deep(sample)
    sample.write_script([made(s) for s in ("T1", "M1", "L1", "T3")])
    res = sample.cli("run", "top")
    assert res.returncode == 0, res.stderr
    for task in ("top", "mid", "low"):
        assert sample.names(task)[-1] == "task_completed"
    # The parent's log names the nested task, its last line and the record commit holding it.
    for parent, step, child in (("top", "inner", "mid"), ("mid", "deeper", "low")):
        started = next(e for e in sample.events(parent) if e["event"] == "plan_started")
        assert (started["step"], started["details"]["plan"]) == (step, child)
        end = ends(sample, parent, step)
        assert end["event"] == "step_completed"
        assert end["details"]["log_head"] == last_line_hash(sample, child)
        message = sample.git("log", "-1", "--format=%B", end["details"]["commit"])
        assert f"Harness-Task: {child}" in message and message.startswith("harness: record")
    # Commits land in plan order down the tree: T1, M1, L1, then T3 on the nested record.
    commits = [applied(sample, t)[s] for t, s in (("top", "T1"), ("mid", "M1"), ("low", "L1"))]
    t3 = applied(sample, "top")["T3"]
    chain = sample.git("rev-list", "--reverse", "HEAD").split()
    positions = [chain.index(c) for c in [*commits, t3]]
    assert positions == sorted(positions)
    invoked = {e["step"]: e for e in sample.events("top") if e["event"] == "subagent_invoked"}
    assert invoked["T3"]["details"]["base"] == ends(sample, "top", "inner")["details"]["commit"]
    rows = status_rows(sample, "top")
    assert rows["inner"]["status"] == "done" and rows["inner"]["plan"] == "mid"
    for task in ("top", "mid", "low"):
        res = sample.cli("audit", task)
        assert res.returncode == 0, res.stdout + res.stderr
    res = sample.cli("replay", "top")
    assert res.returncode == 0, res.stderr
    assert all(c in res.stdout for c in [*commits, t3])


def test_an_audit_finds_a_link_that_names_another_log_line(sample: Sample) -> None:
    sample.write_plan([runs("inner", "mid")], "top")
    sample.write_plan([making("M1")], "mid")
    sample.write_script([made("M1")])
    assert sample.cli("run", "top").returncode == 0
    # The nested log grows a line after the unit ended: the link must still name its line.
    log = sample.root / "ai/tasks/top/progress.ndjson"
    lines = log.read_bytes().splitlines()
    ended = orjson.loads(lines[-2])
    assert ended["event"] == "step_completed"
    ended["details"]["log_head"] = "0" * 64
    forged = orjson.dumps(ended, option=orjson.OPT_SORT_KEYS)
    log.write_bytes(b"\n".join([*lines[:-2], forged, lines[-1]]) + b"\n")
    res = sample.cli("audit", "top")
    assert res.returncode != 0
    assert "does not end with the line 000000000000" in res.stdout
    # A ref in place of the commit id is no link, though it names the same commit.
    ended["details"] |= {"log_head": last_line_hash(sample, "mid"), "commit": "HEAD~1"}
    forged = orjson.dumps(ended, option=orjson.OPT_SORT_KEYS)
    log.write_bytes(b"\n".join([*lines[:-2], forged, lines[-1]]) + b"\n")
    res = sample.cli("audit", "top")
    assert res.returncode != 0
    assert "step_completed names no nested task and commit id" in res.stdout


@pytest.mark.parametrize(
    ("plans", "root", "found"),
    [
        ({"a": ["b"], "b": ["a"]}, "a", "plans run in a cycle: a -> b -> a"),
        ({"a": ["a"]}, "a", "plans run in a cycle: a -> a"),
        ({"a": ["b"], "b": ["c"], "c": ["b"]}, "a", "plans run in a cycle: b -> c -> b"),
    ],
)
def test_a_cycle_of_plans_is_refused_with_its_path_before_anything_runs(
    sample: Sample, plans: dict[str, list[str]], root: str, found: str
) -> None:
    for task, children in plans.items():
        sample.write_plan([making(f"W{task}"), *(runs(f"to-{c}", c) for c in children)], task)
    before = sample.head()
    res = sample.cli("plan", "validate", root)
    assert res.returncode != 0 and found in res.stdout + res.stderr
    res = sample.cli("run", root)
    assert res.returncode == 2 and found in res.stderr
    assert sample.head() == before
    assert all(sample.events(task) == [] for task in plans)


def test_plans_nested_deeper_than_max_depth_are_refused(sample: Sample) -> None:
    three_deep(sample)
    with (sample.root / "ai/harness.toml").open("a") as fh:
        fh.write("\n[limits]\nmax_depth = 1\n")
    found = "plans nest 2 deep, more than [limits] max_depth 1 allows: top -> mid -> low"
    res = sample.cli("run", "top")
    assert res.returncode == 2 and found in res.stderr
    assert sample.events("top") == [] and sample.events("mid") == []
    res = sample.cli("plan", "validate", "top", "--json")
    assert found in orjson.loads(res.stdout)["problems"]
    # The nested part alone is within the limit.
    assert sample.cli("plan", "validate", "mid").returncode == 0


def test_a_missing_nested_plan_is_refused_naming_it(sample: Sample) -> None:
    sample.write_plan([runs("inner", "nowhere")], "top")
    res = sample.cli("run", "top")
    assert res.returncode == 2
    assert "subtask inner runs the plan of task nowhere, which has no" in res.stderr
    assert "ai/tasks/nowhere/plan.json" in res.stderr


def test_a_nested_plan_budget_above_its_parents_is_refused(sample: Sample) -> None:
    sample.write_plan([runs("inner", "mid", budgets={"max_steps": 2})], "top")
    sample.write_plan([making("M1")], "mid")
    doc = sample.read_json("ai/tasks/mid/plan.json")
    sample.write_json("ai/tasks/mid/plan.json", doc | {"budgets": {"max_steps": 3}})
    res = sample.cli("run", "top")
    assert res.returncode == 2
    assert "budgets.max_steps 3 exceeds the 2 that task top allows its subtask inner" in res.stderr


def test_budgets_are_shared_down_the_tree_then_raised_and_resumed(sample: Sample) -> None:
    """top may make two calls; its own T1 and mid's M1 use them, so mid's M2 is not made:
    mid halts on the budget, the unit fails and top blocks at it. Raised and resumed, the
    whole tree goes on where it stopped."""
    top = [making("T1"), runs("inner", "mid", depends_on=["T1"])]
    sample.write_plan(top, "top")
    doc = sample.read_json("ai/tasks/top/plan.json")
    sample.write_json("ai/tasks/top/plan.json", doc | {"budgets": {"max_steps": 2}})
    sample.write_plan([making("M1"), making("M2", depends_on=["M1"])], "mid")
    sample.write_script([made(s) for s in ("T1", "M1", "M2")])
    res = sample.cli("run", "top")
    assert res.returncode == 1
    blocker = sample.events("mid")[-1]
    assert blocker["event"] == "blocker_encountered"
    assert blocker["details"] == {"budget": "max_steps", "limit": 2, "used": 2}
    failed = ends(sample, "top", "inner")
    assert failed["event"] == "step_failed" and "max_steps (task)" in failed["error"]
    assert sample.names("top")[-1] == "blocker_encountered"
    assert status_rows(sample, "top")["inner"]["status"] == "blocked"
    assert [n for n in sample.names("mid")].count("subagent_invoked") == 1
    sample.write_json("ai/tasks/top/plan.json", doc | {"budgets": {"max_steps": 3}})
    res = sample.cli("resume", "top", "--reason", "raised max_steps")
    assert res.returncode == 0, res.stderr
    assert sample.names("mid")[-1] == "blocker_resolved"
    res = sample.cli("run", "top")
    assert res.returncode == 0, res.stderr
    assert sample.names("top")[-1] == "task_completed"
    assert sample.names("mid").count("subagent_invoked") == 2
    for task in ("top", "mid"):
        assert sample.cli("audit", task).returncode == 0
    res = sample.cli("replay", "top")
    assert res.returncode == 0, res.stderr


def test_a_nested_failure_under_continue_lets_the_rest_run(sample: Sample) -> None:
    top = [runs("inner", "mid", on_error="continue"), making("T2"), making("T3")]
    sample.write_plan(top, "top")
    sample.write_plan([making("M1")], "mid")
    sample.write_script([err("M1", "hard", "cannot do it"), made("T2"), made("T3")])
    res = sample.cli("run", "top")
    assert res.returncode == 1
    assert "not complete" in res.stderr
    rows = status_rows(sample, "top")
    assert rows["inner"]["status"] == "failed"
    assert "task mid" in rows["inner"]["reason"] and "cannot do it" in rows["inner"]["reason"]
    assert rows["T2"]["status"] == rows["T3"]["status"] == "done"
    failed = ends(sample, "top", "inner")
    assert failed["details"]["on_error"] == "continue"
    assert failed["details"]["log_head"] == last_line_hash(sample, "mid")
    for task in ("top", "mid"):
        assert sample.cli("audit", task).returncode == 0
    assert sample.cli("replay", "top").returncode == 0


@pytest.mark.parametrize("point", ["after:exchange", "after:sync"])
def test_a_kill_inside_a_nested_plan_is_finished_by_the_next_run(
    tmp_path: Path, point: str
) -> None:
    built = []
    for name in ("killed", "whole"):
        (tmp_path / name).mkdir()
        s = scripted(tmp_path / name)
        s.write_plan([runs("inner", "mid"), making("T2", depends_on=["inner"])], "top")
        s.write_plan([making("M1"), making("M2")], "mid")
        s.write_script([made(x) for x in ("M1", "M2", "T2")])
        built.append(s)
    killed, whole = built
    res = killed.cli("run", "top", env={"HARNESS_FAULT": point})
    assert res.returncode == -9, res.stderr
    assert killed.names("top")[-1] == "plan_started"
    res = killed.cli("run", "top")
    assert res.returncode == 0, res.stderr
    assert whole.cli("run", "top").returncode == 0
    # No duplicate call or commit, no lost event: each call made once, the same structure.
    for task in ("top", "mid"):
        assert killed.names(task) == whole.names(task)
        assert killed.cli("audit", task).returncode == 0
    assert killed.names("mid").count("subagent_invoked") == 2
    assert applied(killed, "mid") == applied(whole, "mid")
    assert killed.status_outside_ai() == ""
    res = killed.cli("replay", "top")
    assert res.returncode == 0, res.stderr


def test_next_runs_a_nested_plan_as_its_one_subtask(sample: Sample) -> None:
    sample.write_plan([runs("inner", "mid"), making("T2")], "top")
    sample.write_plan([making("M1"), making("M2")], "mid")
    sample.write_script([made(x) for x in ("M1", "M2", "T2")])
    res = sample.cli("next", "top")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("inner\tdone\t")
    assert sample.names("mid")[-1] == "task_completed"
    assert "T2" not in {e.get("step") for e in sample.events("top")}


def test_a_plan_completed_before_its_parent_runs_it_links_its_last_record(
    sample: Sample,
) -> None:
    sample.write_plan([making("T1"), runs("inner", "mid"), making("T3")], "top")
    sample.write_plan([making("M1")], "mid")
    sample.write_script([made(x) for x in ("T1", "M1", "T3")])
    assert sample.cli("run", "mid").returncode == 0
    record = sample.head()
    res = sample.cli("run", "top")
    assert res.returncode == 0, res.stderr
    end = ends(sample, "top", "inner")
    assert end["details"]["commit"] == record
    assert end["details"]["log_head"] == last_line_hash(sample, "mid")
    assert sample.names("mid").count("task_completed") == 1
    assert sample.cli("audit", "top").returncode == 0
    res = sample.cli("replay", "top")
    assert res.returncode == 0, res.stderr


def test_the_deepest_nesting_the_config_allows_runs_replays_and_audits(sample: Sample) -> None:
    """50 plans each running the next, the last making one change: one run, and replay,
    go down every level in one process without running out of stack."""
    deepest = 50
    for i in range(deepest):
        sample.write_plan([runs(f"u{i}", f"t{i + 1}")], f"t{i}")
    sample.write_plan([making("LEAF")], f"t{deepest}")
    sample.write_script([made("LEAF")])
    with (sample.root / "ai/harness.toml").open("a") as fh:
        fh.write(f"\n[limits]\nmax_depth = {deepest}\n")
    res = sample.cli("run", "t0")
    assert res.returncode == 0, res.stderr
    assert all(sample.names(f"t{i}")[-1] == "task_completed" for i in range(deepest + 1))
    leaf = applied(sample, f"t{deepest}")["LEAF"]
    res = sample.cli("replay", "t0")
    assert res.returncode == 0, res.stderr
    assert leaf in res.stdout
    assert sample.cli("audit", "t0").returncode == 0


def test_a_person_approving_inside_a_nested_plan_holds_the_unit_open(sample: Sample) -> None:
    s = sample
    s.git("config", "user.name", "Ada Reviewer")
    s.git("config", "user.email", "ada@example.org")
    s.write_plan([making("T1"), runs("inner", "mid", depends_on=["T1"]), making("T3")], "top")
    s.write_plan([making("M1", supervised="human")], "mid")
    s.write_script([made("T1"), made("M1"), made("T3")])
    res = s.cli("run", "top")
    assert res.returncode == 1
    assert "M1 awaits approval" in res.stderr and "harness approve mid M1" in res.stderr
    # The unit is open, not failed: nothing for a person to resume.
    assert [e["event"] for e in s.events("top")][-1] == "plan_started"
    assert status_rows(s, "mid")["M1"]["status"] == "awaiting approval"
    assert s.cli("approve", "mid", "M1").returncode == 0
    res = s.cli("run", "top")
    assert res.returncode == 0, res.stderr
    assert ends(s, "top", "inner")["event"] == "step_completed"
    assert sorted(applied(s, "top")) == ["T1", "T3"] and list(applied(s, "mid")) == ["M1"]
    for task in ("top", "mid"):
        assert s.cli("audit", task).returncode == 0
    replay = s.cli("replay", "top")
    assert replay.returncode == 0, replay.stdout + replay.stderr
