"""The run's pre-flight end to end: every problem of the subtasks still to run listed at
once, before any call, with nothing logged; `run --no-human` refused when a person must
approve a change."""

from __future__ import annotations

from .conftest import Sample, calc_patch, new_file_patch, ok, subtask
from .test_supervision import with_auditor


def test_every_problem_is_listed_at_once_and_no_worker_is_called(sample: Sample) -> None:
    with_auditor(sample)
    reg = sample.read_json("ai/agents/registry.json")
    reg["agents"][1]["version"] = ">=99"  # the supervisor cannot run
    sample.write_json("ai/agents/registry.json", reg)
    sample.write_plan(
        [
            subtask("T1", write_scope="lib/**"),  # no token covers lib/**
            subtask("T2", inputs=["src/gone.py"]),  # an input missing at HEAD
            subtask("T3", depends_on=["T1"], inputs=["src/later.py"]),  # may be T1's to make
            subtask("T4", supervised=True),
            subtask("T5", supervised="human"),
        ]
    )
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    head = sample.head()
    res = sample.cli("run", "demo", "--no-human")
    assert res.returncode == 1
    assert res.stderr.startswith(
        "harness: pre-flight of task demo: 4 problem(s), no worker called: "
    )
    for problem in (
        "subtask T1: no usable token covers lib/**",
        "subtask T2: input not found: src/gone.py",
        "subtask T4: its supervisor agent auditor:",
        "subtask T5: a person must approve it (supervised: human), but --no-human says none",
    ):
        assert problem in res.stderr
    assert "T3" not in res.stderr
    assert sample.events() == []
    assert not (sample.root / "ai" / "exchanges").exists()
    assert sample.head() == head and sample.status_outside_ai() == ""
    # `next` pre-flights the same subtasks, a person at hand.
    res = sample.cli("next", "demo")
    assert res.returncode == 1 and "3 problem(s)" in res.stderr and "T5" not in res.stderr


def test_no_human_is_refused_while_a_person_must_approve_and_its_twin_runs(
    sample: Sample,
) -> None:
    sample.write_plan(
        [
            subtask("T1"),
            subtask("T2", depends_on=["T1"], creates=["src/extra.py"], supervised="human"),
        ]
    )
    extra = new_file_patch("src/extra.py", ["B = 2"])
    sample.write_script(
        [ok("T1", ("src/calc.py", calc_patch())), ok("T2", ("src/extra.py", extra))]
    )
    res = sample.cli("run", "demo", "--no-human")
    assert res.returncode == 1 and "subtask T2: a person must approve it" in res.stderr
    assert sample.events() == []
    # Its twin: without --no-human, the run goes as far as the person's approval.
    res = sample.cli("run", "demo")
    assert res.returncode == 1 and "T2 awaits approval" in res.stderr
    assert [e["step"] for e in sample.events() if e["event"] == "step_completed"] == ["T1"]
    # Still awaiting: CI's run is refused, before anything.
    before = sample.events()
    res = sample.cli("run", "demo", "--no-human")
    assert res.returncode == 1 and "a person must approve it" in res.stderr
    assert sample.events() == before
    # A person approves; the next run commits it, and the record holds up.
    sample.git("config", "user.name", "Ada Reviewer")
    sample.git("config", "user.email", "ada@example.org")
    assert sample.cli("approve", "demo", "T2").returncode == 0
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    assert sample.cli("audit", "demo").returncode == 0
    assert sample.cli("replay", "demo").returncode == 0


def test_plan_validate_checks_the_supervisor_too(sample: Sample) -> None:
    sample.write_plan([subtask("T1", supervised=True)])
    res = sample.cli("plan", "validate", "demo")
    assert res.returncode == 1
    assert "subtask T1: supervised, but no agent has the 'audit' capability" in res.stderr
    with_auditor(sample)
    assert sample.cli("plan", "validate", "demo").returncode == 0


def test_a_registry_command_the_policy_refuses_is_a_preflight_problem(sample: Sample) -> None:
    reg = sample.read_json("ai/agents/registry.json")
    reg["agents"][0]["commands"] = ["make test", "git push"]
    sample.write_json("ai/agents/registry.json", reg)
    (sample.root / "ai" / "policy.toml").write_text('[bash]\ndenylist = ["git push *"]\n')
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    res = sample.cli("run", "demo")
    assert res.returncode == 1
    assert "1 problem(s)" in res.stderr
    assert "agent scripted: ai/policy.toml refuses its registry command 'git push'" in res.stderr
    assert sample.events() == []
    # Its twin: the registry asks only for what the policy allows.
    reg["agents"][0]["commands"] = ["make test"]
    sample.write_json("ai/agents/registry.json", reg)
    assert sample.cli("run", "demo").returncode == 0
    # plan validate says the same.
    reg["agents"][0]["commands"] = ["git push"]
    sample.write_json("ai/agents/registry.json", reg)
    res = sample.cli("plan", "validate", "demo")
    assert res.returncode == 1 and "refuses its registry command 'git push'" in res.stderr


def test_an_agent_whose_tools_write_nothing_is_given_no_subtask_that_writes(
    sample: Sample,
) -> None:
    reg = sample.read_json("ai/agents/registry.json")
    reg["agents"][0]["tools"] = ["read", "grep"]
    sample.write_json("ai/agents/registry.json", reg)
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    res = sample.cli("run", "demo")
    assert res.returncode == 1 and "1 problem(s)" in res.stderr
    assert (
        "subtask T1: agent scripted may not write (its tools: read, grep), so it cannot be "
        "given a write scope" in res.stderr
    )
    assert sample.events() == []
    # Nor may it run commands its tools leave no shell for.
    reg["agents"][0]["commands"] = ["make test"]
    sample.write_json("ai/agents/registry.json", reg)
    res = sample.cli("plan", "validate", "demo")
    assert res.returncode == 1
    assert "agent scripted: its registry tools leave out bash, yet it lists commands" in res.stderr
    # Its twin: the same agent with an edit tool, and bash for its command.
    reg["agents"][0]["tools"] = ["read", "grep", "edit", "bash"]
    sample.write_json("ai/agents/registry.json", reg)
    assert sample.cli("run", "demo").returncode == 0


def test_an_unknown_agent_is_told_with_every_other_problem_and_its_twin_runs(
    sample: Sample,
) -> None:
    sample.write_plan(
        [
            subtask("T1", inputs=["src/gone.py"]),
            subtask("T2", inputs=["src/lost.py"]),
            subtask("T3", agent="ghost", inputs=["src/none.py"]),
        ]
    )
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    problems = [
        "subtask T1: input not found: src/gone.py",
        "subtask T2: input not found: src/lost.py",
        "subtask T3: agent 'ghost' is not in the registry",
        "subtask T3: input not found: src/none.py",
    ]
    for command in ("run", "next"):
        res = sample.cli(command, "demo")
        assert res.returncode == 1
        assert res.stderr == (
            "harness: pre-flight of task demo: 4 problem(s), no worker called: "
            + "; ".join(problems)
            + "\n"
        )
    res = sample.cli("plan", "validate", "demo")
    assert res.returncode == 1
    assert res.stderr == "".join(f"ai/tasks/demo/plan.json: {p}\n" for p in problems)
    assert sample.events() == [] and sample.status_outside_ai() == ""
    # Its twin: the inputs there, the agent one the registry has.
    sample.write_plan([subtask("T3", agent="scripted")])
    sample.write_script([ok("T3", ("src/calc.py", calc_patch()))])
    assert sample.cli("plan", "validate", "demo").returncode == 0
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr


def test_a_named_agent_must_take_the_role_and_its_twin_runs(sample: Sample) -> None:
    sample.write_plan([subtask("T1", role="micro-refactor", agent="scripted")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    why = "subtask T1: agent 'scripted' does not take role 'micro-refactor'"
    res = sample.cli("plan", "validate", "demo")
    assert res.returncode == 1 and res.stderr == f"ai/tasks/demo/plan.json: {why}\n"
    res = sample.cli("run", "demo")
    assert res.returncode == 1 and why in res.stderr and sample.events() == []
    # Its twin: the agent given the role.
    reg = sample.read_json("ai/agents/registry.json")
    reg["agents"][0]["capabilities"].append("micro-refactor")
    sample.write_json("ai/agents/registry.json", reg)
    assert sample.cli("plan", "validate", "demo").returncode == 0
