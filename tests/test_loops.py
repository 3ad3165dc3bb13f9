"""Looped subtasks end to end through the real CLI: each round its own call, exchange and
commit on the head the last one left, until no diff, acceptance or the bound."""

from __future__ import annotations

from typing import Any

import orjson

from .conftest import CALC_TAIL, Sample, append_line_patch, err, new_file_patch, subtask
from .test_supervision import clean, events, verdict, with_auditor


def looped(until: str, rounds: int, **fields: Any) -> dict[str, Any]:
    return subtask(
        "L1",
        creates=["src/r*.py"],
        loop={"max": rounds, "until": until},
        **fields,
    )


def round_answer(n: int, change: bool = True) -> dict[str, Any]:
    """Round n's answer: a new file src/r<n>.py, or nothing left to do."""
    diffs = [{"file": f"src/r{n}.py", "patch": new_file_patch(f"src/r{n}.py", [f"R = {n}"])}]
    return {
        "subtask": "L1",
        "round": n,
        "result": {"diffs": diffs if change else [], "notes": [f"round {n}"]},
    }


def prompt_of(sample: Sample, call_id: str) -> dict[str, Any]:
    path = sample.root / "ai" / "exchanges" / "demo" / call_id / "prompt.ndjson"
    found: dict[str, Any] = orjson.loads(path.read_bytes())
    return found


def test_a_no_diff_loop_runs_until_the_worker_has_nothing_left(sample: Sample) -> None:
    sample.write_plan([looped("no_diff", 5)])
    sample.write_script([round_answer(1), round_answer(2), round_answer(3, change=False)])
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    assert (sample.root / "src/r1.py").exists() and (sample.root / "src/r2.py").exists()
    rounds = events(sample, "loop_continued")
    assert [r["details"]["round"] for r in rounds] == [1, 2]
    applied = events(sample, "subagent_diffs_applied")
    assert [r["details"]["commit"] for r in rounds] == [a["details"]["commit"] for a in applied]
    done = events(sample, "step_completed")[0]["details"]
    assert done["loop"] == {"rounds": 3, "stopped": "no_diff"} and done["commit"] is None
    # The last round changed nothing: the run names the rounds' last commit.
    assert res.stdout.startswith(f"L1\tdone\t{applied[-1]['details']['commit'][:12]}\t")
    # Each round is its own call, on the head the round before left.
    calls = [e["details"] for e in events(sample, "subagent_invoked")]
    assert len({c["call_id"] for c in calls}) == 3
    assert calls[1]["base"] == applied[0]["details"]["commit"]
    assert calls[2]["base"] == applied[1]["details"]["commit"]
    blobs = {
        b["name"]: b["text"]
        for b in prompt_of(sample, calls[1]["call_id"])["payload"]["inputs"]["blobs"]
    }
    assert blobs["harness/loop.txt"].startswith("Round 2 of at most 5")
    status = sample.cli("status", "demo", "--json")
    assert orjson.loads(status.stdout)["subtasks"][0]["status"] == "done"
    clean(sample)


def test_a_loop_that_hits_its_bound_stops_there(sample: Sample) -> None:
    sample.write_plan([looped("no_diff", 2)])
    sample.write_script([round_answer(1), round_answer(2), round_answer(3)])
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    assert events(sample, "step_completed")[0]["details"]["loop"] == {"rounds": 2, "stopped": "max"}
    assert len(events(sample, "subagent_invoked")) == 2
    assert not (sample.root / "src/r3.py").exists()
    clean(sample)


def test_an_acceptance_loop_stops_once_its_criteria_hold(sample: Sample) -> None:
    sample.write_plan([looped("acceptance", 4, acceptance=["cmd: test -f src/r2.py"])])
    sample.write_script([round_answer(1), round_answer(2), round_answer(3)])
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    first = events(sample, "loop_continued")[0]["details"]
    assert first["round"] == 1 and first["unmet"]
    assert events(sample, "step_completed")[0]["details"]["loop"] == {
        "rounds": 2,
        "stopped": "acceptance",
    }
    assert not (sample.root / "src/r3.py").exists()
    clean(sample)


def test_an_acceptance_loop_never_met_fails_at_its_bound(sample: Sample) -> None:
    sample.write_plan([looped("acceptance", 2, acceptance=["cmd: test -f src/never.py"])])
    sample.write_script([round_answer(1), round_answer(2)])
    res = sample.cli("run", "demo")
    assert res.returncode == 1
    assert "L1 blocked" in res.stderr
    # Round 1 landed (its criteria were the next round's to meet); round 2's did not.
    assert (sample.root / "src/r1.py").exists() and not (sample.root / "src/r2.py").exists()
    assert events(sample, "acceptance_failed")
    clean(sample)


def test_an_acceptance_loop_cannot_end_unmet_on_an_answer_without_a_change(
    sample: Sample,
) -> None:
    sample.write_plan([looped("acceptance", 3, acceptance=["cmd: test -f src/never.py"])])
    sample.write_script([round_answer(1), round_answer(2, change=False)])
    res = sample.cli("run", "demo")
    assert res.returncode == 1
    failed = events(sample, "acceptance_failed")[-1]
    assert failed["error"].startswith("the loop ended unmet")
    clean(sample)


def test_a_supervised_loop_asks_a_verdict_each_round(sample: Sample) -> None:
    with_auditor(sample)
    sample.write_plan([looped("no_diff", 3, supervised=True)])
    sample.write_script([round_answer(1), round_answer(2, change=False), verdict("L1", "CONTINUE")])
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    assert len(events(sample, "step_approved")) == 2
    clean(sample)


def refining(n: int, lines: list[str]) -> dict[str, Any]:
    """Round n's answer: one more line in src/r1.py, the file round 1 created."""
    patch = append_line_patch("src/r1.py", lines[-3:], max(1, len(lines) - 2), f"R{n} = {n}")
    return changing(n, "src/r1.py", patch)


def changing(n: int, path: str, patch: str) -> dict[str, Any]:
    return {"subtask": "L1", "round": n, "result": {"diffs": [{"file": path, "patch": patch}]}}


def test_a_round_may_change_the_files_earlier_rounds_created(sample: Sample) -> None:
    sample.write_plan([looped("no_diff", 4)])
    sample.write_script(
        [
            round_answer(1),
            refining(2, ["R = 1"]),
            refining(3, ["R = 1", "R2 = 2"]),
            round_answer(4, change=False),
        ]
    )
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    assert (sample.root / "src/r1.py").read_text() == "R = 1\nR2 = 2\nR3 = 3\n"
    assert events(sample, "step_completed")[0]["details"]["loop"] == {
        "rounds": 4,
        "stopped": "no_diff",
    }
    clean(sample)


def test_a_round_still_may_not_change_a_file_nobody_cited(sample: Sample) -> None:
    # The twin: src/calc.py is in scope, but neither cited nor made by an earlier round.
    sample.write_plan([looped("no_diff", 3, inputs=["README.md"])])
    calc = append_line_patch("src/calc.py", CALC_TAIL, 3, "X = 1")
    sample.write_script([round_answer(1), changing(2, "src/calc.py", calc)])
    res = sample.cli("run", "demo")
    assert res.returncode == 1
    assert "uncited path" in res.stderr
    assert "X = 1" not in (sample.root / "src/calc.py").read_text()
    clean(sample)


def test_resume_goes_on_at_the_round_that_failed_with_its_bound_intact(sample: Sample) -> None:
    sample.write_plan([looped("no_diff", 3)])
    sample.write_script([round_answer(1), err("L1", "hard", "cannot do it")])
    res = sample.cli("run", "demo")
    assert res.returncode == 1 and "L1 blocked" in res.stderr
    assert (sample.root / "src/r1.py").exists()
    assert sample.cli("resume", "demo", "--reason", "try again").returncode == 0
    # Round 2 runs again on the head round 1 left, then round 3, the last the bound allows.
    sample.write_script([refining(2, ["R = 1"]), round_answer(3), round_answer(4)])
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    assert (sample.root / "src/r1.py").read_text() == "R = 1\nR2 = 2\n"
    assert (sample.root / "src/r3.py").exists() and not (sample.root / "src/r4.py").exists()
    assert [e["details"]["round"] for e in events(sample, "loop_continued")] == [1, 2]
    assert events(sample, "step_completed")[0]["details"]["loop"] == {"rounds": 3, "stopped": "max"}
    # One commit a round that changed files: round 1's is not made again.
    assert len(events(sample, "subagent_diffs_applied")) == 3
    clean(sample)
