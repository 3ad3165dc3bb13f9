"""Supervised subtasks end to end through the real CLI: a supervisor's verdicts (CONTINUE,
REORIENT, PAUSE), a person's (approve, reject), each recorded, replayed and audited."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import orjson
import pytest

from harness.gate.diffgate import Change
from harness.record import envelope
from harness.spec.plan import Subtask
from harness.step import supervision

from .conftest import Sample, calc_patch, new_file_patch, ok, subtask

# The second subtask adds a file of its own, so it lands on whatever the first one did.
T2 = subtask("T2", depends_on=["T1"], creates=["src/extra.py"])
T2_OK = ok("T2", ("src/extra.py", new_file_patch("src/extra.py", ["B = 2"])))


def with_auditor(sample: Sample) -> None:
    """A second scripted agent, with the audit capability, answering from the same script."""
    reg = sample.read_json("ai/agents/registry.json")
    worker = reg["agents"][0]
    auditor = worker | {
        "id": "auditor",
        "capabilities": ["audit"],
        "args": [*worker["args"], "--agent-id", "auditor"],
    }
    reg["agents"].append(auditor)
    sample.write_json("ai/agents/registry.json", reg)


def verdict(
    sid: str, action: str, reason: str = "looks right", retry: bool | None = None, **more: Any
) -> dict[str, Any]:
    """A scripted supervisor's answer."""
    answer: dict[str, Any] = {
        "subtask": sid,
        "role": "audit",
        "result": {"verdict": {"action": action, "reason": reason, **more}, "notes": []},
    }
    if retry is not None:
        answer["retry"] = retry
    return answer


def exchange(sample: Sample, call_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (context, prompt) a recorded call was given."""
    folder = sample.root / "ai" / "exchanges" / "demo" / call_id
    return (
        orjson.loads((folder / "context.ndjson").read_bytes()),
        orjson.loads((folder / "prompt.ndjson").read_bytes()),
    )


def events(sample: Sample, name: str) -> list[dict[str, Any]]:
    return [ev for ev in sample.events() if ev["event"] == name]


def clean(sample: Sample) -> None:
    """What every test ends on: the record audits and replays clean."""
    audit = sample.cli("audit", "demo")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    replay = sample.cli("replay", "demo")
    assert replay.returncode == 0, replay.stdout + replay.stderr


@pytest.fixture
def supervised(sample: Sample) -> Sample:
    with_auditor(sample)
    sample.write_plan([subtask("T1", supervised=True), T2])
    return sample


def test_continue_commits_after_the_supervisor_saw_the_checked_change(supervised: Sample) -> None:
    s = supervised
    s.write_script(
        [
            ok("T1", ("src/calc.py", calc_patch("A = 1"))),
            verdict("T1", "CONTINUE"),
            T2_OK,
        ]
    )
    res = s.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    names = [ev["event"] for ev in s.events() if ev.get("step") == "T1"]
    # The verdict comes after every check and before the commit.
    assert names.index("test_passed") < names.index("supervisor_invoked")
    assert names.index("step_approved") < names.index("subagent_diffs_applied")
    # T2 is not supervised: no verdict is asked of it.
    assert not [ev for ev in events(s, "supervisor_invoked") if ev["step"] == "T2"]
    asked = events(s, "supervisor_invoked")[0]["details"]
    assert asked["subagent"] == "auditor"
    _, prompt = exchange(s, asked["call_id"])
    payload = prompt["payload"]
    assert payload["role"] == "audit" and payload["write_scope"] == "none"
    assert payload["expected"]["fields"] == supervision.EXPECTED
    blobs = {b["name"]: b["text"] for b in payload["inputs"]["blobs"]}
    assert "+A = 1" in blobs["checkpoint/diff.patch"]
    assert orjson.loads(blobs["checkpoint/subtask.json"])["call_id"] == asked["of"]
    checks = orjson.loads(blobs["checkpoint/checks.json"])
    assert [c["event"] for c in checks] == ["build_succeeded", "test_passed"]
    assert orjson.loads(blobs["checkpoint/flags.json"]) == []  # nothing here to reconcile
    approved = events(s, "step_approved")[0]["details"]
    assert approved == {"call_id": asked["call_id"], "by": "auditor", "reason": "looks right"}
    clean(s)


def test_a_check_that_passed_with_warnings_is_flagged_to_the_supervisor(
    supervised: Sample,
) -> None:
    s = supervised
    config = (s.root / "ai/harness.toml").read_text()
    line = next(x for x in config.splitlines() if x.startswith("build = "))
    build = tomllib.loads(line)["build"]
    warned = json.dumps(f"echo 'warning: old API'; {build}")
    s.set_config(config.replace(line, f"build = {warned}"))
    s.write_script(
        [ok("T1", ("src/calc.py", calc_patch("A = 1"))), verdict("T1", "CONTINUE"), T2_OK]
    )
    assert s.cli("run", "demo").returncode == 0
    built = events(s, "build_succeeded")[0]["details"]
    assert built["warnings"] == 1
    asked = events(s, "supervisor_invoked")[0]["details"]
    _, prompt = exchange(s, asked["call_id"])
    blobs = {b["name"]: b["text"] for b in prompt["payload"]["inputs"]["blobs"]}
    assert orjson.loads(blobs["checkpoint/flags.json"]) == [
        "check build passed with 1 warning line(s)"
    ]
    clean(s)


def test_reorient_runs_the_subtask_again_with_the_correction(supervised: Sample) -> None:
    s = supervised
    s.write_script(
        [
            ok("T1", ("src/calc.py", calc_patch("A = 1")), retry=False),
            verdict("T1", "REORIENT", "wrong name", retry=False, correction="call it ANSWER"),
            ok("T1", ("src/calc.py", calc_patch("ANSWER = 1")), retry=True),
            verdict("T1", "CONTINUE", retry=True),
            T2_OK,
        ]
    )
    res = s.cli("run", "demo", quiet=False)
    assert res.returncode == 0, res.stderr
    # The supervisor's word shown as what it is, not as a failure.
    assert "T1: supervise reoriented " in res.stderr and "supervise failed" not in res.stderr
    assert "T1: supervise ok " in res.stderr
    assert "ANSWER = 1" in (s.root / "src/calc.py").read_text()
    assert "A = 1\n" not in (s.root / "src/calc.py").read_text()
    reoriented = events(s, "step_reoriented")[0]
    assert reoriented["error"] == "reoriented by auditor: wrong name"
    retry = [ev for ev in events(s, "subagent_invoked") if ev["step"] == "T1"][1]
    _, prompt = exchange(s, retry["details"]["call_id"])
    blobs = {b["name"]: b["text"] for b in prompt["payload"]["inputs"]["blobs"]}
    assert blobs["harness/correction.txt"] == "call it ANSWER"
    assert envelope.CORRECTION_CONSTRAINT in prompt["payload"]["constraints"]
    # One commit for T1: the reoriented change never landed.
    assert len([ev for ev in events(s, "subagent_diffs_applied") if ev["step"] == "T1"]) == 1
    clean(s)


def test_a_second_reorient_ends_the_subtask_as_a_retry_would(supervised: Sample) -> None:
    s = supervised
    base = s.head()
    s.write_script(
        [
            ok("T1", ("src/calc.py", calc_patch("A = 1"))),
            verdict("T1", "REORIENT", "no", correction="try harder"),
        ]
    )
    res = s.cli("run", "demo")
    assert res.returncode == 1
    assert "T1 blocked: reoriented by auditor: no" in res.stderr
    assert s.names().count("step_reoriented") == 2
    assert s.git("diff", "--name-only", base, "HEAD").split() == [
        p for p in s.git("diff", "--name-only", base, "HEAD").split() if p.startswith("ai/")
    ]
    assert s.status_outside_ai() == ""
    clean(s)


def test_pause_stops_the_task_for_a_person_whatever_on_error_says(sample: Sample) -> None:
    with_auditor(sample)
    sample.write_plan(
        [subtask("T1", supervised=True, on_error="continue"), subtask("T2")],
    )
    base = sample.head()
    sample.write_script(
        [ok("T1", ("src/calc.py", calc_patch())), verdict("T1", "PAUSE", "touches billing")]
    )
    res = sample.cli("run", "demo")
    assert res.returncode == 1
    assert "paused by auditor: touches billing" in res.stderr
    failed = events(sample, "step_failed")[0]
    assert failed["details"] == {"phase": "supervisor"}
    assert events(sample, "blocker_encountered")[0]["step"] == "T1"
    assert "T2" not in {ev.get("step") for ev in sample.events()}  # nothing ran past it
    changed = sample.git("diff", "--name-only", base, "HEAD").split()
    assert all(p.startswith("ai/") for p in changed)
    status = sample.cli("status", "demo")
    assert "T1\tlocalized-impl\tblocked" in status.stdout
    clean(sample)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (
            {"subtask": "T1", "role": "audit", "result": {"notes": ["fine"]}},
            "the answer holds no verdict",
        ),
        (
            {
                "subtask": "T1",
                "role": "audit",
                "result": {
                    "verdict": {"action": "CONTINUE", "reason": "ok"},
                    "diffs": [{"file": "src/calc.py", "patch": calc_patch("X = 9")}],
                },
            },
            "a supervisor never writes",
        ),
        (
            {
                "subtask": "T1",
                "role": "audit",
                "result": {"verdict": {"action": "SHIP IT", "reason": "ok"}},
            },
            "violates the schema",
        ),
    ],
    ids=["no-verdict", "writes", "unknown-action"],
)
def test_a_supervisor_answer_that_is_no_verdict_fails_closed(
    supervised: Sample, answer: dict[str, Any], why: str
) -> None:
    s = supervised
    base = s.head()
    s.write_script([ok("T1", ("src/calc.py", calc_patch())), answer])
    res = s.cli("run", "demo")
    assert res.returncode == 1
    failed = events(s, "supervisor_failed")[0]
    assert why in failed["error"]
    assert not events(s, "subagent_diffs_applied")
    assert all(p.startswith("ai/") for p in s.git("diff", "--name-only", base, "HEAD").split())
    assert s.status_outside_ai() == ""
    assert s.cli("audit", "demo").returncode == 0


def test_a_supervised_plan_needs_an_agent_with_the_audit_capability(sample: Sample) -> None:
    sample.write_plan([subtask("T1", supervised=True)])
    res = sample.cli("run", "demo")
    assert res.returncode == 1
    assert "subtask T1: supervised, but no agent has the 'audit' capability" in res.stderr
    assert sample.events() == []
    # Its twin: the same plan unsupervised runs.
    sample.write_plan([subtask("T1", supervised=False)])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("run", "demo").returncode == 0


def test_plan_wide_supervision_and_a_subtask_that_opts_out(sample: Sample) -> None:
    with_auditor(sample)
    plan = {
        "task_id": "demo",
        "created": "2026-01-01T00:00:00Z",
        "supervised": True,
        "subtasks": [subtask("T1"), T2 | {"supervised": False}],
    }
    sample.write_json("ai/tasks/demo/plan.json", plan)
    sample.write_script(
        [
            ok("T1", ("src/calc.py", calc_patch("A = 1"))),
            verdict("T1", "CONTINUE"),
            T2_OK,
        ]
    )
    assert sample.cli("run", "demo").returncode == 0
    assert [ev["step"] for ev in events(sample, "step_approved")] == ["T1"]
    clean(sample)


def test_an_answer_without_a_change_is_supervised_too(sample: Sample) -> None:
    with_auditor(sample)
    sample.write_plan([subtask("R1", write_scope="none", role="localized-impl", supervised=True)])
    sample.write_script(
        [
            {"subtask": "R1", "result": {"notes": ["nothing to change"]}},
            verdict("R1", "CONTINUE"),
        ]
    )
    assert sample.cli("run", "demo").returncode == 0
    asked = events(sample, "supervisor_invoked")[0]["details"]
    assert asked["tree"] is None
    _, prompt = exchange(sample, asked["call_id"])
    blobs = {b["name"]: b["text"] for b in prompt["payload"]["inputs"]["blobs"]}
    assert blobs["checkpoint/diff.patch"] == "(no change)\n"
    clean(sample)


# -- a person's verdict -----------------------------------------------------------------------


@pytest.fixture
def human(sample: Sample) -> Sample:
    sample.git("config", "user.name", "Ada Reviewer")
    sample.git("config", "user.email", "ada@example.org")
    sample.write_plan([subtask("T1", supervised="human"), T2])
    return sample


def test_a_human_step_waits_then_approve_commits_it(human: Sample) -> None:
    s = human
    s.write_script(
        [
            ok("T1", ("src/calc.py", calc_patch("A = 1"))),
            T2_OK,
        ]
    )
    base = s.head()
    res = s.cli("run", "demo")
    assert res.returncode == 1
    assert "T1 awaits approval: review `git diff" in res.stderr
    assert "harness approve demo T1" in res.stderr
    assert all(p.startswith("ai/") for p in s.git("diff", "--name-only", base, "HEAD").split())
    asked = events(s, "approval_requested")[0]["details"]
    # What the person is told to look at is the very change.
    shown = s.git("diff", asked["base"], asked["tree"])
    assert "+A = 1" in shown
    status = s.cli("status", "demo")
    assert "T1\tlocalized-impl\tawaiting approval" in status.stdout
    assert "harness approve" in status.stdout
    # Running again asks nobody and changes nothing: it still waits.
    again = s.cli("run", "demo")
    assert again.returncode == 1 and "awaits approval" in again.stderr
    assert s.names().count("approval_requested") == 1
    approved = s.cli("approve", "demo", "T1", "--reason", "read it")
    assert approved.returncode == 0, approved.stderr
    assert "T1 approved by Ada Reviewer <ada@example.org>" in approved.stdout
    res = s.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    verdict_ev = events(s, "step_approved")[0]["details"]
    assert verdict_ev["by"] == "human" and verdict_ev["who"] == "Ada Reviewer <ada@example.org>"
    assert verdict_ev["reason"] == "read it"
    # The approval stood on the tree checked: the checks were not run again.
    assert s.names().count("test_passed") == 2
    assert "A = 1" in (s.root / "src/calc.py").read_text()
    clean(s)


def test_reject_runs_it_again_told_why(human: Sample) -> None:
    s = human
    s.write_script(
        [
            ok("T1", ("src/calc.py", calc_patch("A = 1")), retry=False),
            ok("T1", ("src/calc.py", calc_patch("ANSWER = 1")), retry=True),
            T2_OK,
        ]
    )
    assert s.cli("run", "demo").returncode == 1
    rejected = s.cli("reject", "demo", "T1", "--reason", "name it ANSWER")
    assert rejected.returncode == 0, rejected.stderr
    res = s.cli("run", "demo")
    assert res.returncode == 1 and "T1 awaits approval" in res.stderr
    retry = [ev for ev in events(s, "subagent_invoked") if ev["step"] == "T1"][1]
    _, prompt = exchange(s, retry["details"]["call_id"])
    blobs = {b["name"]: b["text"] for b in prompt["payload"]["inputs"]["blobs"]}
    assert blobs["harness/correction.txt"] == "name it ANSWER"
    assert s.cli("approve", "demo", "T1").returncode == 0
    assert s.cli("run", "demo").returncode == 0
    assert "ANSWER = 1" in (s.root / "src/calc.py").read_text()
    assert events(s, "step_reoriented")[0]["error"] == (
        "reoriented by Ada Reviewer <ada@example.org>: name it ANSWER"
    )
    clean(s)


def test_approve_and_reject_refuse_what_awaits_nothing(human: Sample) -> None:
    s = human
    s.write_script([ok("T1", ("src/calc.py", calc_patch("A = 1")))])
    before = s.names()
    res = s.cli("approve", "demo", "T1")
    assert res.returncode == 2 and "T1 awaits no approval (status: pending)" in res.stderr
    res = s.cli("approve", "demo", "T9")
    assert res.returncode == 2 and "task demo has no subtask T9" in res.stderr
    res = s.cli("reject", "demo", "T1")
    assert res.returncode == 2  # a rejection must say why
    assert s.names() == before
    assert s.cli("run", "demo").returncode == 1
    res = s.cli("reject", "demo", "T1", "--reason", " ")
    assert res.returncode == 2 and "--reason: say why" in res.stderr
    s.git("config", "--unset", "user.name")
    s.git("config", "--unset", "user.email")
    res = s.cli("approve", "demo", "T1", env={"HOME": "/nonexistent", "EMAIL": ""})
    assert res.returncode == 2 and "git knows no user.name" in res.stderr
    s.git("config", "user.name", "Ada Reviewer")
    s.git("config", "user.email", "ada@example.org")
    assert s.names().count("step_approved") == 0
    assert s.cli("approve", "demo", "T1").returncode == 0
    res = s.cli("approve", "demo", "T1")
    assert res.returncode == 2 and "awaits no approval" in res.stderr


def test_flags_name_what_a_reviewer_should_reconcile() -> None:
    sub = Subtask(
        id="T1",
        role="localized-impl",
        goal="g",
        inputs=("src/a.py",),
        acceptance=(),
        write_scope=("src/**",),
        depends_on=(),
        creates=("src/new.py",),
        agents=(),
        token=None,
        allow_new_deps=False,
        allow_mode_change=False,
        allow_api_change=False,
    )
    changes = [
        Change("add", "src/new.py", None, "x" * 900),
        Change("modify", "src/a.py", None, "y"),
    ]
    checks = [{"event": "test_passed", "details": {"check": "test", "warnings": 3}}]
    result = {"metrics": {"coverage_delta": 2.5}, "risks": ["see src/a.py:3", "trust me"]}
    found = supervision.flags(sub, result, changes, checks, (1000, 10))
    assert found == [
        "check test passed with 3 warning line(s)",
        "the worker claims coverage_delta 2.5",
        "risk cites no input: trust me",
        "the diff adds src/new.py",
        "the diff is near the gate's limits: 2 of 10 files, 901 of 1000 bytes",
    ]
    # Its twin: a plain change within limits, cited risks, no claims, flags nothing.
    quiet = supervision.flags(
        sub, {"risks": ["src/a.py:1 may be slow"]}, changes[1:], [], (1000, 10)
    )
    assert quiet == []


def test_audit_finds_a_supervised_subtask_committed_without_a_verdict(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("run", "demo").returncode == 0
    assert sample.cli("audit", "demo").returncode == 0
    # The plan now says a verdict was needed: the log shows none was given.
    sample.write_plan([subtask("T1", supervised="human")])
    res = sample.cli("audit", "demo")
    assert res.returncode == 1
    assert "subagent_diffs_applied of supervised T1 (call" in res.stdout
    assert "step_completed of supervised T1 (call" in res.stdout


@pytest.mark.parametrize(
    "point",
    ["after:supervisor_invoked", "after:step_approved", "before:advance", "after:approval"],
)
def test_a_kill_inside_supervision_is_finished_once_by_the_next_run(
    supervised: Sample, point: str
) -> None:
    s = supervised
    if point == "after:approval":  # a person's verdict, then the run that commits it killed
        s.write_plan([subtask("T1", supervised="human"), T2])
        s.git("config", "user.name", "Ada Reviewer")
        s.git("config", "user.email", "ada@example.org")
    s.write_script(
        [ok("T1", ("src/calc.py", calc_patch("A = 1"))), verdict("T1", "CONTINUE"), T2_OK]
    )
    if point == "after:approval":
        assert s.cli("run", "demo").returncode == 1
        assert s.cli("approve", "demo", "T1").returncode == 0
        point = "before:advance"
    assert s.cli("run", "demo", env={"HARNESS_FAULT": point}).returncode == -9
    res = s.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    t1 = [ev["event"] for ev in s.events() if ev.get("step") == "T1"]
    for name in ("subagent_invoked", "subagent_diffs_applied", "step_completed"):
        assert t1.count(name) == 1, (name, t1)
    assert t1.count("step_approved") == 1
    assert t1.count("supervisor_invoked") + t1.count("approval_requested") == 1
    assert (s.root / "src/calc.py").read_text().count("A = 1") == 1
    clean(s)
