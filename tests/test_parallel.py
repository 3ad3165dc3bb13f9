"""`harness run --max-parallel N` end to end: calls in flight at once, commits in plan order,
the same record whatever order the calls end in, and the on_error modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from .conftest import Sample, err, new_file_patch, ok, scripted, subtask

IDS = ["P1", "P2", "P3", "P4"]


def independent(sid: str, **fields: Any) -> dict[str, Any]:
    """A subtask that creates a file of its own, so any order of landing applies."""
    path = f"src/{sid.lower()}.py"
    return subtask(sid, write_scope="src/**", creates=[path], **fields)


def creating(sid: str, sleep: float = 0.0) -> dict[str, Any]:
    path = f"src/{sid.lower()}.py"
    return ok(sid, (path, new_file_patch(path, [f"NAME = {sid!r}"]))) | {"sleep_s": sleep}


def applied(s: Sample) -> dict[str, str]:
    return {
        e["step"]: e["details"]["commit"]
        for e in s.events()
        if e["event"] == "subagent_diffs_applied"
    }


def bases(s: Sample) -> dict[str, str]:
    return {e["step"]: e["details"]["base"] for e in s.events() if e["event"] == "subagent_invoked"}


def structure(s: Sample) -> list[tuple[str, str | None]]:
    return [(e["event"], e.get("step")) for e in s.events()]


def statuses(s: Sample) -> dict[str, tuple[str, str | None]]:
    doc = orjson.loads(s.cli("status", "demo", "--json").stdout)
    return {row["id"]: (row["status"], row["reason"]) for row in doc["subtasks"]}


def test_four_calls_at_once_land_the_same_commits_whichever_ends_first(tmp_path: Path) -> None:
    runs = []
    for name, sleeps in (
        ("fast-first", [0.1, 0.6, 1.1, 1.6]),
        ("slow-first", [1.6, 1.1, 0.6, 0.1]),
    ):
        (tmp_path / name).mkdir()
        s = scripted(tmp_path / name)
        s.write_plan([independent(sid) for sid in IDS])
        s.write_script([creating(sid, sleep) for sid, sleep in zip(IDS, sleeps, strict=True)])
        res = s.cli("run", "demo", "--max-parallel", "4")
        assert res.returncode == 0, res.stderr
        runs.append(s)
    one, two = runs
    # All four were in flight before the first result was taken.
    assert [n for n, _ in structure(one)[1:5]] == ["subagent_invoked"] * 4
    assert structure(one) == structure(two)
    assert applied(one) == applied(two)
    assert (one.root / "ai/tasks/demo/progress.ndjson").read_bytes() == (
        two.root / "ai/tasks/demo/progress.ndjson"
    ).read_bytes()
    # Each was made on the head the run began on; they land one on another, in plan order.
    start = set(bases(one).values())
    assert len(start) == 1
    commits = [applied(one)[sid] for sid in IDS]
    assert one.git("rev-parse", *(f"{c}^" for c in commits[1:])).split() == commits[:-1]
    for s in runs:
        assert s.cli("audit", "demo").returncode == 0
        res = s.cli("replay", "demo")
        assert res.returncode == 0, res.stderr
        assert all(c in res.stdout for c in commits)


def test_a_dependent_sees_its_dependency_and_lands_after_it(sample: Sample) -> None:
    sample.write_plan([independent("P1"), independent("P2", depends_on=["P1"]), independent("P3")])
    sample.write_script([creating("P1", 0.8), creating("P2"), creating("P3")])
    start = sample.head()
    res = sample.cli("run", "demo", "--max-parallel", "3")
    assert res.returncode == 0, res.stderr
    made, base = applied(sample), bases(sample)
    assert base == {"P1": start, "P2": made["P1"], "P3": start}
    # P3 ended long before P1 but is taken after P2, which comes first in plan order.
    assert sample.git("rev-parse", f"{made['P3']}^", f"{made['P2']}^").split() == [
        made["P2"],
        made["P1"],
    ]
    assert sample.cli("replay", "demo").returncode == 0


def test_plan_max_parallel_caps_the_command(sample: Sample) -> None:
    plan = [independent(sid) for sid in IDS[:2]]
    sample.write_plan(plan)
    doc = sample.read_json("ai/tasks/demo/plan.json")
    sample.write_json("ai/tasks/demo/plan.json", doc | {"max_parallel": 1})
    sample.write_script([creating(sid) for sid in IDS[:2]])
    assert sample.cli("run", "demo", "--max-parallel", "4").returncode == 0
    # One slot: the second call is made on the first one's commit, after its result.
    names = [n for n, _ in structure(sample)]
    assert names.index("subagent_invoked", 2) > names.index("step_completed")
    assert bases(sample)["P2"] == applied(sample)["P1"]


@pytest.mark.parametrize(
    "bad", ["0", "-1", "two", "\u00b2", "\u0663", "1025", "99999999999999999999"]
)
def test_max_parallel_must_be_a_whole_number(sample: Sample, bad: str) -> None:
    """Past the most, a slot list and its threads once took all memory (MemoryError) or
    overflowed (exit 4); a count of slots beyond the subtasks changes nothing anyway."""
    res = sample.cli("run", "demo", "--max-parallel", bad)
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines()[-1].endswith(f"{bad!r} is not a whole number from 1 to 1024")
    assert not (sample.root / "ai/tasks/demo/progress.ndjson").exists()


def test_the_most_slots_run(sample: Sample) -> None:
    sample.write_plan([independent(sid) for sid in IDS[:2]])
    sample.write_script([creating(sid) for sid in IDS[:2]])
    assert sample.cli("run", "demo", "--max-parallel", "1024").returncode == 0


# -- on_error ----------------------------------------------------------------------------------

FAIL = err("P1", "hard", "cannot do it")


def failing_plan(sample: Sample, on_error: str | None, slots: str) -> Any:
    extra = {} if on_error is None else {"on_error": on_error}
    sample.write_plan(
        [independent("P1", **extra), independent("P2", depends_on=["P1"]), independent("P3")]
    )
    sample.write_script([FAIL, creating("P2"), creating("P3")])
    return sample.cli("run", "demo", "--max-parallel", slots)


@pytest.mark.parametrize("slots", ["1", "3"])
def test_stop_blocks_the_task_at_the_failure(sample: Sample, slots: str) -> None:
    res = failing_plan(sample, None, slots)
    assert res.returncode == 1 and "P1 blocked: cannot do it" in res.stderr
    found = statuses(sample)
    assert found["P1"] == ("blocked", "cannot do it")
    assert found["P2"] == ("pending", None)
    # With one slot P3 never started; with three it was in flight and landed first.
    assert found["P3"] == (("pending", None) if slots == "1" else ("done", None))
    assert "task_completed" not in [n for n, _ in structure(sample)]
    assert sample.cli("audit", "demo").returncode == 0
    assert sample.cli("replay", "demo").returncode == 0


@pytest.mark.parametrize("slots", ["1", "3"])
def test_continue_runs_the_dependents_and_leaves_the_task_incomplete(
    sample: Sample, slots: str
) -> None:
    res = failing_plan(sample, "continue", slots)
    assert res.returncode == 1
    assert "not complete: P1 failed: cannot do it" in res.stderr
    assert statuses(sample) == {
        "P1": ("failed", "cannot do it"),
        "P2": ("done", None),
        "P3": ("done", None),
    }
    names = [n for n, _ in structure(sample)]
    assert names[-1] == "blocker_encountered" and "task_completed" not in names
    assert sample.events()[-1].get("step") is None
    shown = sample.cli("status", "demo").stdout
    assert "blocked at the task's end: P1 failed: cannot do it" in shown
    # The dependent ran without the failed subtask's work: no blob of it in its prompt.
    call = next(
        e["details"]["call_id"]
        for e in sample.events()
        if e["event"] == "subagent_invoked" and e["step"] == "P2"
    )
    prompt = orjson.loads((sample.root / f"ai/exchanges/demo/{call}/prompt.ndjson").read_bytes())
    assert [b["name"] for b in prompt["payload"]["inputs"]["blobs"]] == []
    assert sample.cli("audit", "demo").returncode == 0
    assert sample.cli("replay", "demo").returncode == 0
    # A person resumes: the failed subtask runs again in a new epoch, and the task completes.
    assert sample.cli("resume", "demo", "--reason", "fixed").returncode == 0
    sample.write_script([creating("P1")])
    res = sample.cli("run", "demo", "--max-parallel", slots)
    assert res.returncode == 0, res.stderr
    assert statuses(sample)["P1"] == ("done", None)
    assert sample.cli("audit", "demo").returncode == 0
    assert sample.cli("replay", "demo").returncode == 0


@pytest.mark.parametrize("slots", ["1", "3"])
def test_skip_dependents_skips_them_naming_the_cause(sample: Sample, slots: str) -> None:
    res = failing_plan(sample, "skip_dependents", slots)
    assert res.returncode == 1
    assert statuses(sample) == {
        "P1": ("failed", "cannot do it"),
        "P2": ("skipped", "P1 failed"),
        "P3": ("done", None),
    }
    skipped = [e for e in sample.events() if e["event"] == "step_skipped"]
    assert [(e["step"], e["details"]["cause"]) for e in skipped] == [("P2", "P1")]
    assert "P2" not in bases(sample)
    assert sample.cli("audit", "demo").returncode == 0
    assert sample.cli("replay", "demo").returncode == 0


def test_a_skip_carries_down_the_graph(sample: Sample) -> None:
    sample.write_plan(
        [
            independent("P1", on_error="skip_dependents"),
            independent("P2", depends_on=["P1"]),
            independent("P3", depends_on=["P2"]),
        ]
    )
    sample.write_script([FAIL])
    assert sample.cli("run", "demo").returncode == 1
    assert statuses(sample)["P3"] == ("skipped", "P2 skipped")


def test_next_reports_a_failure_that_goes_on_and_the_next_next_goes_on(sample: Sample) -> None:
    sample.write_plan([independent("P1", on_error="continue"), independent("P3")])
    sample.write_script([FAIL, creating("P3")])
    res = sample.cli("next", "demo")
    assert res.returncode == 1 and "P1 failed: cannot do it" in res.stderr
    assert "blocker_encountered" not in [n for n, _ in structure(sample)]
    res = sample.cli("next", "demo")
    assert res.returncode == 0, res.stderr
    res = sample.cli("next", "demo")
    assert res.returncode == 1 and "not complete" in res.stderr
    assert sample.cli("audit", "demo").returncode == 0


# -- kill -9 in the middle of a parallel run ---------------------------------------------------

PARALLEL_FAULTS = ["after:subagent_invoked", "after:exchange", "before:advance", "after:sync"]


@pytest.mark.parametrize("point", PARALLEL_FAULTS)
def test_a_kill_during_a_parallel_run_is_finished_by_the_next_run(
    tmp_path: Path, point: str
) -> None:
    runs = []
    for name in ("killed", "whole"):
        (tmp_path / name).mkdir()
        s = scripted(tmp_path / name)
        s.write_plan([independent(sid) for sid in IDS])
        s.write_script([creating(sid, 0.2) for sid in IDS])
        runs.append(s)
    killed, whole = runs
    res = killed.cli("run", "demo", "--max-parallel", "4", env={"HARNESS_FAULT": point})
    assert res.returncode == -9, res.stderr
    res = killed.cli("run", "demo", "--max-parallel", "4")
    assert res.returncode == 0, res.stderr
    assert whole.cli("run", "demo", "--max-parallel", "4").returncode == 0
    # No duplicate commit, no lost event: the same commits, each call invoked once.
    assert applied(killed) == applied(whole)
    invoked = [n for n, _ in structure(killed)].count("subagent_invoked")
    assert invoked == 4
    assert killed.status_outside_ai() == ""
    assert killed.cli("audit", "demo").returncode == 0
    res = killed.cli("replay", "demo")
    assert res.returncode == 0, res.stderr


# -- fallback agents ---------------------------------------------------------------------------


def with_backup(sample: Sample, answers: list[dict[str, Any]]) -> None:
    """A second registry agent, `backup`, answering from a script of its own."""
    script = sample.root.parent / "backup.json"
    script.write_bytes(orjson.dumps({"answers": answers}))
    reg = sample.read_json("ai/agents/registry.json")
    first = reg["agents"][0]
    args = ["--script", str(script), "--agent-id", "backup"]
    reg["agents"].append(first | {"id": "backup", "args": args, "read": [str(script)]})
    sample.write_json("ai/agents/registry.json", reg)
    sample.commit_all("a backup agent")


def test_a_fallback_agent_is_called_when_the_first_fails_for_good(sample: Sample) -> None:
    with_backup(sample, [creating("P1")])
    sample.write_plan([independent("P1", agent=["scripted", "backup"])])
    sample.write_script([err("P1", "retryable", "busy"), err("P1", "retryable", "busy")])
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    names = [n for n, _ in structure(sample)]
    assert names.count("subagent_retried") == 1 and names.count("subagent_fallback") == 1
    fallback = next(e for e in sample.events() if e["event"] == "subagent_fallback")
    assert (fallback["details"]["from"], fallback["details"]["to"]) == ("scripted", "backup")
    invoked = [e["details"] for e in sample.events() if e["event"] == "subagent_invoked"]
    assert [(d["subagent"], d["attempt"]) for d in invoked] == [
        ("scripted", 1),
        ("scripted", 2),
        ("backup", 3),
    ]
    assert statuses(sample)["P1"] == ("done", None)
    assert sample.cli("audit", "demo").returncode == 0
    assert sample.cli("replay", "demo").returncode == 0


def test_when_every_agent_fails_the_subtask_fails_once(sample: Sample) -> None:
    with_backup(sample, [err("P1", "hard", "no luck either")])
    sample.write_plan([independent("P1", agent=["scripted", "backup"])])
    sample.write_script([FAIL])
    res = sample.cli("run", "demo")
    assert res.returncode == 1 and "no luck either" in res.stderr
    names = [n for n, _ in structure(sample)]
    assert names.count("subagent_fallback") == 1 and names.count("step_failed") == 1
    assert sample.cli("audit", "demo").returncode == 0


def test_a_fallback_missing_from_the_registry_is_refused_before_any_call(sample: Sample) -> None:
    sample.write_plan([independent("P1", agent=["scripted", "nobody"])])
    res = sample.cli("run", "demo")
    assert res.returncode == 1 and "agent 'nobody' is not in the registry" in res.stderr
    assert not (sample.root / "ai/tasks/demo/progress.ndjson").exists()
