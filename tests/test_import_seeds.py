"""The seeds' own example Agentfiles, taken out of the seed files at test time, imported with
the real CLI into the sample repository and run to completion with the scripted worker: seed
001's deploy-service (SUPERVISED, then SUPERVISED HUMAN), seed 003's TDD workflow (AGENT and
GOAL ... FROM files, a GOAL USING two agents, RUN, LOOP ... WITHIN $input). Seed 000's Glee
example is test_importing.py's.

Each runs as imported: a subtask given a --write-scope may create files there too (its
`creates`), since a goal names no files to edit."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from .conftest import Sample, new_file_patch, ok
from .test_supervision import verdict, with_auditor

SEEDS = Path("/work/shared/seeds")
SEED_001 = SEEDS / "001_e6d128ad4b121d10.txt"
SEED_003 = SEEDS / "003_023f22503ea29e9b.txt"

SCOPE = "docs/**"  # inside the sample's write token W1 (src/**, tests/**, docs/**)

# -- the seeds' text ---------------------------------------------------------------------------

_FENCE = re.compile(rb"^```[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)


def fenced(seed: Path) -> list[bytes]:
    """The body of each fenced block of a seed file, byte for byte."""
    if not seed.is_file():
        pytest.fail(f"{seed}: the seed file is not there")
    return [m.group(1) for m in _FENCE.finditer(seed.read_bytes())]


def seed_001_deploy() -> bytes:
    """Seed 001's `NAME deploy-service` example, as the seed writes it."""
    found = [b for b in fenced(SEED_001) if b.startswith(b"NAME deploy-service\n")]
    if len(found) != 1:
        pytest.fail(f"{SEED_001}: {len(found)} blocks start `NAME deploy-service`, not 1")
    text = found[0]
    for part in (b"INPUT version, environment", b"SUPERVISED HUMAN", b"{environment}"):
        if part not in text:
            pytest.fail(f"{SEED_001}: the deploy-service example has no {part!r}")
    return text


def seed_003_example_lines() -> dict[bytes, list[bytes]]:
    """Seed 003's concrete AGENT and GOAL example lines (not the `<name>` templates), by
    statement and name, byte for byte."""
    lines: dict[bytes, list[bytes]] = {}
    for block in fenced(SEED_003):
        for line in block.splitlines():
            if re.match(rb"(AGENT|GOAL) [A-Za-z]", line) and b"<" not in line:
                lines.setdefault(b" ".join(line.split()[:2]), []).append(line)
    return lines


def seed_003_layout() -> list[str]:
    """The goals/*.md files of seed 003's recommended layout."""
    trees = [b for b in fenced(SEED_003) if b.startswith(b"my-workflow/\n")]
    if len(trees) != 1:
        pytest.fail(f"{SEED_003}: no single `my-workflow/` layout block")
    return re.findall(r"([a-z_]+\.md)", trees[0].decode().split("goals/")[1])


def seed_003_tdd() -> bytes:
    """Seed 003's TDD workflow. The seed names it ("See `Agentfile` and `agents/`, `goals/`
    directories for a complete TDD workflow example") without printing it, so it is built
    here: the seed's own AGENT lines and GOAL lines, byte for byte (of its two `analyze`
    lines, the FROM one, since a name is defined once), and, in its grammar, NAME, INPUT,
    GOALs FROM the other files of its layout, a RUN and a LOOP ... WITHIN $variable."""
    lines = seed_003_example_lines()

    def one(key: bytes, has: bytes = b"") -> bytes:
        found = [line for line in lines.get(key, []) if has in line]
        if len(found) != 1:
            pytest.fail(f"{SEED_003}: {len(found)} example lines `{key.decode()} ...{has!r}`")
        return found[0]

    return b"\n".join(
        [
            b"# TDD, after seed 003: its AGENT and GOAL example lines as it writes them",
            b"NAME tdd",
            b"INPUT feature_request",
            b"INPUT max_iterations DEFAULT 5",
            b"",
            one(b"AGENT creative"),
            one(b"AGENT devils_advocate"),
            b"",
            one(b"GOAL analyze", b"FROM goals/analyze.md"),
            b"GOAL system_tests FROM goals/system_tests.md",
            b"GOAL unit_tests FROM goals/unit_tests.md",
            b"RUN design USING analyze, system_tests, unit_tests",
            b"",
            one(b"GOAL run_tests"),
            b"GOAL analyze_failures FROM goals/analyze_failures.md",
            one(b"GOAL fix"),
            b"LOOP implement USING run_tests, analyze_failures, fix WITHIN $max_iterations",
            b"",
        ]
    )


# Short texts of our own for the files the TDD workflow names.
TDD_FILES = {
    "agents/creative.md": "You propose bold designs.\n",
    "agents/devils_advocate.md": "You look for what breaks.\n",
    "goals/analyze.md": "Understand $feature_request\n  and what it asks of the code.\n",
    "goals/system_tests.md": "Write system tests for $feature_request.\n",
    "goals/unit_tests.md": "Write unit tests that fail for $analyze.\n",
    "goals/analyze_failures.md": "Find why the failing tests fail.\n",
    "goals/fix.md": "Fix the code\n  until the tests pass.\n",
}

# -- helpers -----------------------------------------------------------------------------------


def plan_of(s: Sample, task: str) -> list[dict[str, Any]]:
    doc = orjson.loads((s.root / f"ai/tasks/{task}/plan.json").read_bytes())
    subtasks: list[dict[str, Any]] = doc["subtasks"]
    return subtasks


def import_(s: Sample, source: Path, task: str, *extra: str) -> None:
    res = s.cli("plan", "import", str(source), "--task", task, "--write-scope", SCOPE, *extra)
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"wrote ai/tasks/{task}/plan.json\n"


def commit_and_validate(s: Sample, task: str) -> None:
    """Inputs are read at the base: the workflow's files are committed before the run."""
    s.commit_all(f"the {task} workflow and its files")
    res = s.cli("plan", "validate", task)
    assert res.returncode == 0, res.stdout + res.stderr


def new_doc(sid: str, name: str | None = None) -> tuple[str, str]:
    path = f"docs/{name or sid}.md"
    return path, new_file_patch(path, [f"# {name or sid}"])


def events(s: Sample, task: str, name: str) -> list[dict[str, Any]]:
    return [ev for ev in s.events(task) if ev["event"] == name]


def clean(s: Sample, task: str) -> None:
    audit = s.cli("audit", task)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    replay = s.cli("replay", task)
    assert replay.returncode == 0, replay.stdout + replay.stderr


# -- seed 001 ----------------------------------------------------------------------------------


def test_seed_001_deploy_service_is_audited_then_waits_for_a_person(sample: Sample) -> None:
    s = sample
    s.git("config", "user.name", "Ada Reviewer")
    s.git("config", "user.email", "ada@example.org")
    with_auditor(s)
    source = s.root / "workflows/deploy-service/Agentfile"
    source.parent.mkdir(parents=True)
    source.write_bytes(seed_001_deploy())
    import_(s, source, "deploy", "--input", "version=1.2.3", "--input", "environment=staging")

    subs = plan_of(s, "deploy")
    assert len(subs) == 2
    build, deploy = subs
    assert build["supervised"] is True and deploy["supervised"] == "human"
    assert build["goal"].startswith("Build and test run tests")
    assert deploy["goal"].startswith("Deploy to staging ")
    assert "{environment}" not in deploy["goal"]
    assert deploy["depends_on"] == [build["id"]]
    assert all(sub["write_scope"] == [SCOPE] == sub["creates"] for sub in subs)
    commit_and_validate(s, "deploy")

    # Each subtask adds a file of its own; the supervised one is seen by the auditor.
    answers = [ok(sub["id"], new_doc(sub["id"])) for sub in subs]
    answers += [verdict(sub["id"], "CONTINUE") for sub in subs if sub["supervised"] is True]
    s.write_script(answers)

    res = s.cli("run", "deploy")
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"{deploy['id']} awaits approval" in res.stderr
    assert f"harness approve deploy {deploy['id']}" in res.stderr
    approved = events(s, "deploy", "step_approved")
    assert [(ev["step"], ev["details"]["by"]) for ev in approved] == [(build["id"], "auditor")]
    assert (s.root / f"docs/{build['id']}.md").exists()
    assert not (s.root / f"docs/{deploy['id']}.md").exists()
    status = s.cli("status", "deploy")
    assert f"{deploy['id']}\tlocalized-impl\tawaiting approval" in status.stdout

    res = s.cli("approve", "deploy", deploy["id"], "--reason", "staging only")
    assert res.returncode == 0, res.stderr
    assert f"{deploy['id']} approved by Ada Reviewer <ada@example.org>" in res.stdout
    res = s.cli("run", "deploy")
    assert res.returncode == 0, res.stdout + res.stderr
    assert s.names("deploy")[-1] == "task_completed"
    human = events(s, "deploy", "step_approved")[-1]
    assert human["step"] == deploy["id"] and human["details"]["by"] == "human"
    assert (s.root / f"docs/{deploy['id']}.md").exists()
    clean(s, "deploy")


# -- seed 003 ----------------------------------------------------------------------------------


def loop_answers(sid: str, rounds: int, changing: int) -> list[dict[str, Any]]:
    """Rounds 1..rounds of a looped subtask: a new file in each of the first `changing`,
    nothing left to do in the rest."""
    answers = []
    for n in range(1, rounds + 1):
        answer = ok(sid, new_doc(sid, f"{sid}-r{n}")) if n <= changing else ok(sid)
        answers.append(answer | {"round": n})
    return answers


def test_seed_003_tdd_workflow_designs_then_loops_until_done_or_bound(sample: Sample) -> None:
    s = sample
    assert set(seed_003_layout()) >= {p.removeprefix("goals/") for p in TDD_FILES if "goals" in p}
    folder = s.root / "workflows/tdd"
    for rel, text in TDD_FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    (folder / "Agentfile").write_bytes(seed_003_tdd())
    import_(
        s,
        folder / "Agentfile",
        "tdd",
        "--input",
        "feature_request=password reset",
        "--input",
        "max_iterations=2",
    )

    subs = plan_of(s, "tdd")
    ids = [sub["id"] for sub in subs]
    assert ids == [
        "analyze-creative",
        "analyze-devils_advocate",
        "analyze",
        "system_tests",
        "unit_tests",
        "run_tests",
        "analyze_failures",
        "fix",
    ]
    by_id = {sub["id"]: sub for sub in subs}
    assert by_id["analyze-creative"]["inputs"] == ["workflows/tdd/agents/creative.md"]
    assert "password reset" in by_id["analyze"]["goal"]
    assert by_id["analyze"]["depends_on"] == ["analyze-creative", "analyze-devils_advocate"]
    looped = [sub for sub in subs if "loop" in sub]
    assert [sub["id"] for sub in looped] == ["run_tests", "analyze_failures", "fix"]
    assert all(sub["loop"] == {"max": 2, "until": "no_diff"} for sub in looped)
    assert all(sub["creates"] == [SCOPE] for sub in subs)
    commit_and_validate(s, "tdd")

    # Every plain subtask adds a file. Of the loops: the first changes something every round
    # and stops at its bound; the middle has nothing to do at once; the last changes a file
    # in round 1 and nothing in round 2, and so converges.
    bound = looped[0]["loop"]["max"]
    answers = [ok(sub["id"], new_doc(sub["id"])) for sub in subs if "loop" not in sub]
    answers += loop_answers(looped[0]["id"], bound + 1, changing=bound + 1)
    answers += loop_answers(looped[1]["id"], 1, changing=0)
    answers += loop_answers(looped[2]["id"], 2, changing=1)
    s.write_script(answers)

    res = s.cli("run", "tdd")
    assert res.returncode == 0, res.stdout + res.stderr
    assert s.names("tdd")[-1] == "task_completed"
    stopped = {ev["step"]: ev["details"].get("loop") for ev in events(s, "tdd", "step_completed")}
    assert stopped == {
        **{sub["id"]: None for sub in subs if "loop" not in sub},
        looped[0]["id"]: {"rounds": bound, "stopped": "max"},
        looped[1]["id"]: {"rounds": 1, "stopped": "no_diff"},
        looped[2]["id"]: {"rounds": 2, "stopped": "no_diff"},
    }
    first, last = looped[0]["id"], looped[2]["id"]
    assert [(s.root / f"docs/{first}-r{n}.md").exists() for n in (1, 2, 3)] == [
        True,
        True,
        False,
    ]
    assert (s.root / f"docs/{last}-r1.md").exists()
    calls = [ev["step"] for ev in events(s, "tdd", "subagent_invoked")]
    assert calls.count(first) == bound and calls.count(last) == 2
    clean(s, "tdd")
