"""Live progress of `run` and `next`: its lines, and that none of it enters the record."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from collections.abc import Iterator

import orjson
import pytest

from harness import demo
from harness.live import Lines

from .conftest import Sample, calc_patch, err, new_file_patch, ok, scripted, subtask

MODES = {"plain": (), "quiet": ("--quiet",), "json": ("--json",)}
PHASES = ["call", "gate", "apply", "build", "test", "acceptance", "commit"]


def ticking(*times: float) -> Iterator[float]:
    return iter(times)


def test_each_line_times_the_phase_since_the_line_before() -> None:
    ticks = ticking(0.0, 10.0, 13.5, 13.75)
    out = io.StringIO()
    lines = Lines(out, as_json=False, clock=lambda: next(ticks))
    lines.started("T1", "claude", "localized-impl", retry=False)
    lines.ended("T1", "call", ok=True)
    lines.ended("T1", "gate", ok=False)
    assert out.getvalue().splitlines() == [
        "T1: claude working as localized-impl",
        "T1: call ok 3.5s",
        "T1: gate failed 0.2s",
    ]


def test_calls_in_flight_at_once_are_timed_each_from_its_own_start() -> None:
    ticks = ticking(0.0, 1.0, 2.0, 5.0, 6.5, 7.0)
    out = io.StringIO()
    lines = Lines(out, as_json=False, clock=lambda: next(ticks))
    lines.started("P1", "a", "impl", retry=False)
    lines.started("P2", "a", "impl", retry=False)
    lines.returned("P2")
    lines.ended("P1", "call", ok=True)
    lines.ended("P2", "call", ok=True)
    assert out.getvalue().splitlines() == [
        "P1: a working as impl",
        "P2: a working as impl",
        "P2: answered after 3.0s; it lands in plan order",
        "P1: call ok 5.5s",
        "P2: call ok 5.0s",
    ]


def test_a_parallel_run_says_when_each_answer_is_in(sample: Sample) -> None:
    plan = [subtask(s, creates=[f"src/{s.lower()}.py"]) for s in ("P1", "P2")]
    sample.write_plan(plan)
    sample.write_script(
        [
            ok(s, (f"src/{s.lower()}.py", new_file_patch(f"src/{s.lower()}.py", ["X = 1"])))
            for s in ("P1", "P2")
        ]
    )
    res = sample.cli("run", "demo", "--max-parallel", "2", "--json", quiet=False)
    assert res.returncode == 0, res.stderr
    docs = [orjson.loads(line) for line in res.stdout.splitlines()]
    returned = sorted(d["subtask"] for d in docs if d["event"] == "call_returned")
    assert returned == ["P1", "P2"]
    # Both calls were started before either answer was taken.
    kinds = [(d["event"], d.get("subtask")) for d in docs if d["event"] != "call_returned"]
    assert kinds[:2] == [("call_started", "P1"), ("call_started", "P2")]


def test_json_lines_carry_the_same_facts_and_text_is_escaped() -> None:
    ticks = ticking(0.0, 1.0, 3.25)
    out = io.StringIO()
    lines = Lines(out, as_json=True, clock=lambda: next(ticks))
    lines.started("T1", "claude", "odd\x1b[31mrole", retry=True)
    lines.ended("T1", "test", ok=False)
    assert [orjson.loads(line) for line in out.getvalue().splitlines()] == [
        {
            "event": "call_started",
            "subtask": "T1",
            "agent": "claude",
            "role": "odd\x1b[31mrole",
            "retry": True,
        },
        {"event": "phase_ended", "subtask": "T1", "phase": "test", "ok": False, "elapsed_s": 2.25},
    ]
    human = io.StringIO()
    Lines(human, as_json=False, clock=lambda: 0.0).started("T1", "c", "odd\x1b[31mrole", True)
    assert human.getvalue() == "T1: c working as odd\\x1b[31mrole (retry)\n"


# -- end to end: the same task run plain, --quiet and --json, each in a fresh copy ----------


def _task(sample: Sample) -> None:
    """T1 fails its first call, then passes on the retry; T2 (another role) passes at once."""
    sample.write_plan(
        [
            subtask("T1"),
            subtask(
                "T2",
                role="doc-writer",
                write_scope="docs/**",
                creates=["docs/*.md"],
                depends_on=["T1"],
            ),
        ]
    )
    sample.write_script(
        [
            err("T1", "retryable", "rate limited", retry=False),
            ok("T1", ("src/calc.py", calc_patch()), retry=True),
            ok("T2", ("docs/calc.md", demo.DOCS)),
        ]
    )


def _recorded(sample: Sample) -> dict[str, bytes]:
    """What the run recorded: the log, the subtask commits, the exchanges (less the verify
    evidence, which holds measured durations by design)."""
    found = {"log": (sample.root / "ai/tasks/demo/progress.ndjson").read_bytes()}
    commits = sample.git("log", "--format=%H %s").splitlines()
    found["commits"] = "\n".join(c for c in commits if not c.endswith("record demo")).encode()
    for path in sorted((sample.root / "ai/exchanges").rglob("*")):
        if path.is_file() and "verify" not in path.parts:
            found[path.relative_to(sample.root).as_posix()] = path.read_bytes()
    return found


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[subprocess.CompletedProcess[str], dict[str, bytes]]]:
    """Each mode in turn at the same path, so no recorded byte differs by where it ran."""
    where = tmp_path_factory.mktemp("live")
    done = {}
    for mode, flags in MODES.items():
        if where.exists():
            shutil.rmtree(where)
        where.mkdir()
        sample = scripted(where)
        _task(sample)
        res = sample.cli("run", "demo", *flags, quiet=False)
        assert res.returncode == 0, res.stderr
        done[mode] = (res, _recorded(sample))
    return done


def test_run_prints_a_line_as_each_call_starts_and_each_phase_ends(
    runs: dict[str, tuple[subprocess.CompletedProcess[str], dict[str, bytes]]],
) -> None:
    res, _ = runs["plain"]
    lines = res.stderr.splitlines()
    assert lines[0] == "T1: scripted working as localized-impl"
    assert re.fullmatch(r"T1: call failed \d+\.\ds", lines[1])
    assert lines[2] == "T1: scripted working as localized-impl (retry)"
    t2 = lines.index("T2: scripted working as doc-writer")
    for sid, ended in (("T1", lines[3:t2]), ("T2", lines[t2 + 1 :])):
        found = [re.fullmatch(rf"{sid}: (\w+) ok \d+\.\ds", line) for line in ended]
        assert all(found), ended
        assert [m.group(1) for m in found if m] == PHASES
    # stdout is the result, as without progress
    assert res.stdout.splitlines()[-1] == "task demo complete"
    assert res.stdout == runs["quiet"][0].stdout


def test_quiet_prints_no_progress(
    runs: dict[str, tuple[subprocess.CompletedProcess[str], dict[str, bytes]]],
) -> None:
    res, _ = runs["quiet"]
    assert res.stderr == ""
    assert [line.split("\t")[:2] for line in res.stdout.splitlines()] == [
        ["T1", "done"],
        ["T2", "done"],
        ["task demo complete"],
    ]


def test_json_prints_progress_and_result_as_json_lines_on_stdout(
    runs: dict[str, tuple[subprocess.CompletedProcess[str], dict[str, bytes]]],
) -> None:
    res, recorded = runs["json"]
    assert res.stderr == ""
    docs = [orjson.loads(line) for line in res.stdout.splitlines()]
    assert docs[0] == {
        "event": "call_started",
        "subtask": "T1",
        "agent": "scripted",
        "role": "localized-impl",
        "retry": False,
    }
    assert {k: docs[1][k] for k in ("event", "subtask", "phase", "ok")} == {
        "event": "phase_ended",
        "subtask": "T1",
        "phase": "call",
        "ok": False,
    }
    assert all(d["elapsed_s"] >= 0 for d in docs if d["event"] == "phase_ended")
    assert [d["event"] for d in docs if d["event"] != "phase_ended"] == [
        "call_started",
        "call_started",
        "subtask_done",
        "call_started",
        "subtask_done",
        "task_complete",
    ]
    log = [orjson.loads(line) for line in recorded["log"].splitlines()]
    completed = [e["details"] for e in log if e["event"] == "step_completed"]
    assert [
        (d["subtask"], d["commit"], d["call_id"]) for d in docs if d["event"] == "subtask_done"
    ] == [(sid, c["commit"], c["call_id"]) for sid, c in zip(("T1", "T2"), completed, strict=True)]
    assert docs[-1] == {"event": "task_complete", "task_id": "demo"}


def test_progress_never_enters_the_record(
    runs: dict[str, tuple[subprocess.CompletedProcess[str], dict[str, bytes]]],
) -> None:
    """Log, commits and exchanges are byte for byte the same whatever was printed."""
    plain = runs["plain"][1]
    assert plain["commits"].count(b"\n") == 2  # the sample and the two subtasks
    assert runs["quiet"][1] == plain
    assert runs["json"][1] == plain


def test_next_prints_progress_too(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    res = sample.cli("next", "demo", quiet=False)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert lines[0] == "T1: scripted working as localized-impl"
    assert [line.split()[1] for line in lines[1:]] == PHASES
    assert res.stdout.startswith("T1\tdone\t")
