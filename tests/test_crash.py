"""kill -9 of `harness next` / `run` at every phase boundary and at random times (DESIGN §4).

Each crash is followed by plain `harness next` (or `run`) and compared with a fault-free
reference run in a second, fresh sample: one commit per subtask, the same commit, the
same event sequence (nothing lost, nothing twice), a valid hash chain, one worker call.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.importers import demo
from harness.record.progress import GENESIS, line_hash
from harness.repository import repo

from .conftest import CLOCK, Sample, calc_patch, err, new_file_patch, ok, scripted, subtask

PATCHED = demo.SAMPLE["src/calc.py"] + "VALUE = 1\n"

# Every fault point a successful one-subtask step with build and test passes, in order.
SUCCESS_POINTS = [
    "after:task_started",
    "after:subagent_invoked",
    "after:exchange",
    "after:subagent_succeeded",
    "after:build_succeeded",
    "after:test_passed",
    "before:advance",
    "after:advance",
    "after:sync",
    "after:subagent_diffs_applied",
    "after:step_completed",
]


# -- samples and references -------------------------------------------------------------------


def make_sample(base: Path) -> Sample:
    """What the `sample` fixture builds, for module-scoped references."""
    root = base / "repo"
    root.mkdir(parents=True)
    demo.build(root)
    s = Sample(root, base / "script.json")
    reg = s.read_json("ai/agents/registry.json")
    reg["agents"][0]["args"] = ["--script", str(s.script)]
    reg["agents"][0]["read"] = [str(s.script)]
    s.write_json("ai/agents/registry.json", reg)
    s.write_script([])
    return s


def one_subtask(s: Sample) -> None:
    s.write_plan([subtask("T1")])
    s.write_script([ok("T1", ("src/calc.py", calc_patch()))])


FAILING = [err("T1", "retryable", "rate limited", retry=False),
           err("T1", "hard", "cannot do it", retry=True)]  # fmt: skip


def failing_subtask(s: Sample) -> None:
    s.write_plan([subtask("T1")])
    s.write_script(FAILING)


def demo_plan(s: Sample) -> None:
    s.write_script(orjson.loads((s.root / "agents/script.json").read_bytes())["answers"])


def env() -> dict[str, str]:
    return {**os.environ, "HARNESS_CLOCK": CLOCK}


def popen_next(s: Sample) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "next", "demo", "--repo", str(s.root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env(),
        start_new_session=True,
    )  # fmt: skip


@dataclass
class Ref:
    sample: Sample
    base: str  # HEAD before the task
    names: list[str]  # the event names after the first `next` (or `run`)
    complete: list[str]  # ... and once a further `next` completed the task
    duration: float = 0.0


@pytest.fixture(scope="module")
def ref_one(tmp_path_factory: pytest.TempPathFactory) -> Ref:
    s = make_sample(tmp_path_factory.mktemp("ref-one"))
    one_subtask(s)
    base = s.head()
    start = time.monotonic()
    proc = popen_next(s)
    assert proc.wait(timeout=120) == 0
    duration = time.monotonic() - start
    names = s.names()
    done = s.cli("next", "demo")
    assert done.returncode == 0 and "complete" in done.stdout, done.stderr
    return Ref(s, base, names, s.names(), duration)


@pytest.fixture(scope="module")
def ref_failing(tmp_path_factory: pytest.TempPathFactory) -> Ref:
    s = make_sample(tmp_path_factory.mktemp("ref-failing"))
    failing_subtask(s)
    base = s.head()
    assert s.cli("next", "demo").returncode == 1
    return Ref(s, base, s.names(), s.names())


@pytest.fixture(scope="module")
def ref_demo(tmp_path_factory: pytest.TempPathFactory) -> Ref:
    s = make_sample(tmp_path_factory.mktemp("ref-demo"))
    demo_plan(s)
    base = s.head()
    res = s.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    return Ref(s, base, s.names(), s.names())


# -- invariants -------------------------------------------------------------------------------


def log_lines(s: Sample) -> list[bytes]:
    return (s.root / "ai/tasks/demo/progress.ndjson").read_bytes().splitlines()


def assert_chain(s: Sample) -> None:
    prev = GENESIS
    for seq, line in enumerate(log_lines(s)):
        ev = orjson.loads(line)
        assert ev["seq"] == seq, f"line {seq + 1}: seq {ev['seq']}"
        assert ev["prev"] == prev, f"line {seq + 1}: prev does not chain"
        prev = line_hash(line)


def commits_of(s: Sample, sid: str) -> list[str]:
    return s.git("log", "--format=%H", "-F", f"--grep=Harness-Subtask: {sid}").split()


def exchange_count(s: Sample) -> int:
    folder = s.root / "ai/exchanges/demo"
    return len(list(folder.iterdir())) if folder.is_dir() else 0


def tree_outside_ai(s: Sample, rev: str) -> list[str]:
    entries = s.git("ls-tree", "-r", rev).splitlines()
    return [e for e in entries if not e.split("\t", 1)[1].startswith("ai/")]


def commit_info(s: Sample, sha: str) -> dict[str, Any]:
    tree, parent, author, committer, adate, cdate = (
        s.git("log", "-1", "--format=%T|%P|%an <%ae>|%cn <%ce>|%aI|%cI", sha).strip().split("|")
    )
    body = s.git("log", "-1", "--format=%B", sha)
    kept = [line for line in body.splitlines() if not line.startswith("Harness-Log-Head: ")]
    return {"tree": tree, "parent": parent, "who": (author, committer), "dates": (adate, cdate),
            "message": kept, "log_head": repo.trailers(body)["Harness-Log-Head"]}  # fmt: skip


def assert_commit_matches(s: Sample, ref: Sample, sid: str) -> tuple[str, str]:
    """One commit for `sid`, equal to the reference's in tree, identity and message; its
    Log-Head and dates are what the log recorded for it. Returns (sha, reference sha)."""
    mine, theirs = commits_of(s, sid), commits_of(ref, sid)
    assert len(mine) == 1, f"{sid}: {len(mine)} commits"
    assert len(theirs) == 1
    got, want = commit_info(s, mine[0]), commit_info(ref, theirs[0])
    for key in ("tree", "who", "message"):  # the message holds task, subtask and call id
        assert got[key] == want[key], key
    # Rebuildable from the log: Log-Head is the test_passed line just before the commit
    # and the dates are the ts recorded for the call.
    lines = log_lines(s)
    events = [orjson.loads(line) for line in lines]
    applied = next(i for i, e in enumerate(events)
                   if e["event"] == "subagent_diffs_applied" and e.get("step") == sid)  # fmt: skip
    assert events[applied]["details"]["commit"] == mine[0]
    # The commit is made right after the last check is logged, which is the line before.
    assert events[applied - 1]["event"] in ("test_passed", "phase_completed")
    assert got["log_head"] == line_hash(lines[applied - 1])
    invoked = [e for e in events[:applied]
               if e["event"] == "subagent_invoked" and e.get("step") == sid][-1]  # fmt: skip
    when = invoked["ts"].replace("Z", "+00:00")
    assert got["dates"] == (when, when)
    if got["parent"] != want["parent"]:  # only after a differing earlier subtask commit
        assert got["parent"] in [c for x in ("T1", "T2", "T3") for c in commits_of(s, x)]
    return mine[0], theirs[0]


def assert_same_shas(pairs: list[tuple[str, str]]) -> None:
    assert [mine for mine, _ in pairs] == [theirs for _, theirs in pairs]


def swap_recorded_answers(s: Sample, answers: list[dict[str, Any]], poison: str) -> None:
    """Make every answer whose exchange is already recorded unusable, so a second call for it
    shows: 'drop' turns it into a hard error, 'ok' into a success."""
    recorded = exchange_count(s)
    kept = []
    for attempt, answer in enumerate(answers, start=1):
        if attempt > recorded:
            kept.append(answer)
        elif poison == "ok":
            kept.append(ok("T1", ("src/calc.py", calc_patch())) | {"retry": attempt > 1})
    s.write_script(kept)


def finish(s: Sample, tries: int = 3) -> None:
    """`next` until it exits 0 with T1 done, at most `tries` times."""
    for _ in range(tries):
        res = s.cli("next", "demo")
        if res.returncode == 0 and "step_completed" in s.names():
            return
    pytest.fail(f"T1 not done after {tries} runs: exit {res.returncode}: {res.stderr}")


# -- every phase boundary, success path ---------------------------------------------------------


@pytest.mark.parametrize("point", SUCCESS_POINTS)
def test_kill_at_each_phase_boundary_then_next_finishes_the_subtask(
    sample: Sample, ref_one: Ref, point: str
) -> None:
    one_subtask(sample)
    assert sample.head() == ref_one.base
    res = sample.cli("next", "demo", env={"HARNESS_FAULT": point})
    assert res.returncode == -9, res.stderr
    swap_recorded_answers(sample, [ok("T1", ("src/calc.py", calc_patch()))], "drop")
    res = sample.cli("next", "demo")
    assert res.returncode == 0, res.stderr

    # Killed after step_completed, the step was done: this `next` completes the task.
    assert sample.names() == (ref_one.complete if point == "after:step_completed"
                              else ref_one.names)  # fmt: skip
    assert_chain(sample)
    assert sample.names().count("subagent_invoked") == 1 and exchange_count(sample) == 1
    assert sample.status_outside_ai() == ""
    assert (sample.root / "src/calc.py").read_text() == PATCHED
    # Time comes from the log position, so the recovered commit is the reference's.
    assert_same_shas([assert_commit_matches(sample, ref_one.sample, "T1")])


def test_kill_before_tests_passed_still_gives_the_reference_commit_bit_for_bit(
    sample: Sample, ref_one: Ref
) -> None:
    one_subtask(sample)
    assert sample.cli("next", "demo", env={"HARNESS_FAULT": "after:exchange"}).returncode == -9
    assert sample.cli("next", "demo").returncode == 0
    assert_same_shas([assert_commit_matches(sample, ref_one.sample, "T1")])


# -- the failure path -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "point",
    ["after:subagent_failed", "after:subagent_retried", "after:step_failed",
     "after:blocker_encountered"],
)  # fmt: skip
def test_kill_in_the_failure_path_then_next_blocks_once(
    sample: Sample, ref_failing: Ref, point: str
) -> None:
    failing_subtask(sample)
    res = sample.cli("next", "demo", env={"HARNESS_FAULT": point})
    assert res.returncode == -9, res.stderr
    # A second call for a recorded attempt would now succeed and change the outcome.
    swap_recorded_answers(sample, FAILING, "ok")
    res = sample.cli("next", "demo")
    assert res.returncode == 1, res.stderr
    assert "cannot do it" in res.stderr
    again = sample.cli("next", "demo")
    assert again.returncode == 1 and "blocked" in again.stderr

    names = sample.names()
    assert names == ref_failing.names
    assert names.count("blocker_encountered") == 1
    assert names[-2:] == ["step_failed", "blocker_encountered"]
    assert names.count("subagent_invoked") == 2 and exchange_count(sample) == 2
    assert_chain(sample)
    assert commits_of(sample, "T1") == []
    assert sample.status_outside_ai() == ""
    status = orjson.loads(sample.cli("status", "demo", "--json").stdout)
    assert status["blocked"]["step"] == "T1"


# -- random times -----------------------------------------------------------------------------

# Seeded, and stratified so the eight kills spread over the whole run.
_RNG = random.Random(20260101)
FRACTIONS = [(i + _RNG.random()) / 8 for i in range(8)]


@pytest.mark.parametrize("index", range(len(FRACTIONS)))
def test_kill_at_a_random_time_then_next_finishes_the_subtask(
    sample: Sample, ref_one: Ref, index: int
) -> None:
    one_subtask(sample)
    delay = FRACTIONS[index] * ref_one.duration
    proc = popen_next(sample)
    time.sleep(delay)
    os.kill(proc.pid, 9)
    code = proc.wait(timeout=30)
    assert code in (-9, 0)  # it may have finished first
    finish(sample)

    # Killed after step_completed, the second `next` completes the task.
    assert sample.names() in (ref_one.names, ref_one.complete), f"killed at {delay:.3f}s"
    assert_chain(sample)
    assert sample.status_outside_ai() == ""
    assert (sample.root / "src/calc.py").read_text() == PATCHED
    assert_same_shas([assert_commit_matches(sample, ref_one.sample, "T1")])


# -- kills in the middle of `harness run` -------------------------------------------------------


# Each kill lands one phase further: T1 after its call; T1 just completed; T2's commit made
# but the branch not moved; T2 completed and T3 tested; T3 committed and synced.
RUN_FAULTS = ["after:exchange", "after:step_completed", "before:advance", "after:test_passed",
              "after:sync"]  # fmt: skip


def test_kills_during_run_then_run_gives_the_reference_commits(
    sample: Sample, ref_demo: Ref
) -> None:
    demo_plan(sample)
    for point, done in zip(RUN_FAULTS, [0, 1, 1, 2, 2], strict=True):
        res = sample.cli("run", "demo", env={"HARNESS_FAULT": point})
        assert res.returncode == -9, (point, res.stderr)
        assert sample.names().count("step_completed") == done, point
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    assert "task demo complete" in res.stdout

    assert sample.names() == ref_demo.names
    assert_chain(sample)
    assert sample.status_outside_ai() == ""
    assert tree_outside_ai(sample, "HEAD") == tree_outside_ai(ref_demo.sample, "HEAD")
    calls = [e["details"]["call_id"] for e in sample.events() if e["event"] == "subagent_invoked"]
    assert len(calls) == 3 and exchange_count(sample) == 3
    assert_same_shas(
        [assert_commit_matches(sample, ref_demo.sample, sid) for sid in ("T1", "T2", "T3")]
    )
    # In plan order, each on the one before, the record commit on top.
    t1, t2, t3 = (commits_of(sample, sid)[0] for sid in ("T1", "T2", "T3"))
    assert sample.git("rev-parse", "HEAD~1", "HEAD~2", "HEAD~3", "HEAD~4").split() == [
        t3,
        t2,
        t1,
        ref_demo.base,
    ]


# -- kill -9 of a parallel run: plan order under any kill -----------------------------------

PARALLEL_IDS = ["P1", "P2", "P3", "P4"]


def parallel_sample(where: Path) -> Sample:
    """Four independent subtasks, each creating its own file, for three slots: while P1
    lands, P2, P3 and P4 are in flight (P4 launched in P1's freed slot)."""
    where.mkdir()
    s = scripted(where)
    s.write_plan(
        [
            subtask(sid, write_scope="src/**", creates=[f"src/{sid.lower()}.py"])
            for sid in PARALLEL_IDS
        ]
    )
    s.write_script(
        [
            ok(sid, (path, new_file_patch(path, [f"NAME = {sid!r}"]))) | {"sleep_s": 0.2}
            for sid in PARALLEL_IDS
            for path in [f"src/{sid.lower()}.py"]
        ]
    )
    return s


def run_parallel(s: Sample, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    return s.cli("run", "demo", "--max-parallel", "3", env={"HARNESS_FAULT": fault or ""})


def landed(s: Sample) -> list[tuple[str, str]]:
    """(subtask, commit) of each subtask commit on the branch, oldest first."""
    out = s.git("log", "--reverse", "--format=%H %(trailers:key=Harness-Subtask,valueonly)")
    return [(sid, sha) for sha, _, sid in (row.partition(" ") for row in out.split("\n")) if sid]


@pytest.fixture(scope="module")
def ref_parallel(tmp_path_factory: pytest.TempPathFactory) -> Ref:
    s = parallel_sample(tmp_path_factory.mktemp("ref-parallel") / "whole")
    start = time.monotonic()
    res = run_parallel(s)
    assert res.returncode == 0, res.stderr
    return Ref(s, s.head(), s.names(), s.names(), time.monotonic() - start)


# Every fault point a parallel run passes; the first of each is hit (P1's, for a landing).
PARALLEL_POINTS = [*SUCCESS_POINTS, "after:task_completed"]


@pytest.mark.parametrize("point", PARALLEL_POINTS)
def test_a_parallel_run_killed_at_each_fault_point_lands_in_plan_order(
    tmp_path: Path, ref_parallel: Ref, point: str
) -> None:
    s = parallel_sample(tmp_path / "killed")
    res = run_parallel(s, point)
    assert res.returncode == -9, res.stderr
    finished_in_plan_order(s, ref_parallel.sample, tmp_path)


@pytest.mark.parametrize("index", range(4))
def test_a_parallel_run_killed_at_a_random_time_lands_in_plan_order(
    tmp_path: Path, ref_parallel: Ref, index: int
) -> None:
    """Later landings than each fault point's first: P2's, P3's, P4's checks and commits."""
    s = parallel_sample(tmp_path / "killed")
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "demo", "--max-parallel", "3", "--quiet",
         "--repo", str(s.root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env(),
        start_new_session=True,
    )  # fmt: skip
    time.sleep(FRACTIONS[2 * index + 1] * ref_parallel.duration)
    os.kill(proc.pid, 9)
    assert proc.wait(timeout=30) in (-9, 0)  # it may have finished first
    finished_in_plan_order(s, ref_parallel.sample, tmp_path)


def finished_in_plan_order(s: Sample, ref: Sample, tmp_path: Path) -> None:
    """`run` again finishes the killed run as one never killed would have."""
    res = run_parallel(s)
    assert res.returncode == 0, res.stderr
    # One commit per subtask, in plan order, the very commits of a run never killed.
    assert [sid for sid, _ in landed(s)] == PARALLEL_IDS
    assert landed(s) == landed(ref)
    assert s.names().count("subagent_invoked") == len(PARALLEL_IDS)
    assert_chain(s)
    assert s.status_outside_ai() == ""
    res = s.cli("audit", "demo")
    assert res.returncode == 0, res.stdout + res.stderr
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(s.root), str(clone)], check=True)
    res = Sample(clone, s.script).cli("replay", "demo")
    assert res.returncode == 0, res.stdout + res.stderr
