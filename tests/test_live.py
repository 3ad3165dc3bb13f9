"""Live progress of `run` and `next`: its lines, and that none of it enters the record."""

from __future__ import annotations

import fcntl
import io
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator

import orjson
import pytest

from harness.importers import demo
from harness.step import live
from harness.step.live import Board, Lines

from .conftest import CLOCK, Sample, calc_patch, err, new_file_patch, ok, scripted, subtask

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


# -- on a terminal: the board ---------------------------------------------------------------

HARNESS = [sys.executable, "-m", "harness.cli"]
# What the board writes to move over its last drawing: up n lines, to the line's start, clear.
ERASE = re.compile(r"\x1b\[(\d+)A\r\x1b\[J")


class Tty(io.StringIO):
    """A terminal in memory (its size comes from $COLUMNS and $LINES, see `tty`)."""

    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def tty(monkeypatch: pytest.MonkeyPatch) -> Tty:
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.setenv("LINES", "20")
    return Tty()


def screen(raw: str) -> list[str]:
    """What a terminal shows after `raw`, which writes whole lines from their start and moves
    only as the board does."""
    shown = [""]
    row = 0
    for piece in re.split(r"(\x1b\[\d+A\r\x1b\[J|\n)", raw):
        erase = ERASE.fullmatch(piece)
        if piece == "\n":
            row += 1
            shown[row:] = shown[row:] or [""]
        elif erase:
            row -= int(erase.group(1))
            shown[row:] = [""]
        else:
            shown[row] += piece
    return shown[:-1] if shown[-1] == "" else shown


def test_the_board_shows_a_row_per_subtask_in_flight_with_its_state_and_time(tty: Tty) -> None:
    clock = Clock()
    board = Board(tty, tty, clock)
    board.started("P1", "claude", "impl", retry=False)
    clock.now = 1.0
    board.started("P2", "codex", "doc-writer", retry=False)
    clock.now = 4.0
    board.returned("P2")
    clock.now = 5.5
    board.ended("P1", "call", ok=True)
    clock.now = 7.25
    board.draw()
    assert screen(tty.getvalue()) == [
        "P1  claude    7.2s  call ok",
        "P2  codex     6.2s  answered, waiting its turn",
    ]
    # Each change was drawn over the drawing before it.
    assert [int(n) for n in ERASE.findall(tty.getvalue())] == [1, 2, 2, 2]


def test_a_failed_phase_stops_the_clock_and_a_retry_starts_it_again(tty: Tty) -> None:
    clock = Clock()
    board = Board(tty, tty, clock)
    board.started("T1", "claude", "impl", retry=False)
    clock.now = 2.0
    board.ended("T1", "call", ok=False)
    clock.now = 9.0
    board.draw()
    assert screen(tty.getvalue()) == ["T1  claude    2.0s  call failed"]
    board.started("T1", "claude", "impl", retry=True)
    clock.now = 75.0
    board.draw()
    assert screen(tty.getvalue()) == ["T1  claude   1m06s  working as impl (retry)"]


def test_a_row_wider_than_the_terminal_is_cut_short_of_its_last_column(
    tty: Tty, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    board = Board(tty, tty, Clock())
    board.started("T1", "claude", "a-role-with-a-very-long-name", retry=False)
    board.started("T2", "claude", "\u5b9f\u88c5" * 4, retry=False)
    assert screen(tty.getvalue()) == [
        "T1  claude    0.0s  working as a-role-w",
        # Wide characters take two cells each: 31 + 2 * 4 = 39, and a fifth would make 41.
        "T2  claude    0.0s  working as " + "\u5b9f\u88c5" * 2,
    ]


def test_escape_sequences_in_names_reach_the_terminal_printable(tty: Tty) -> None:
    board = Board(tty, tty, Clock())
    board.started("T\x1b[2J", "ag\x1b]0;owned\x07", "role\u202e", retry=False)
    board.ended("T\x1b[2J", "gate", ok=True)
    raw = tty.getvalue()
    assert "\x1b" not in ERASE.sub("", raw)
    assert "\x07" not in raw
    assert "\u202e" not in raw
    assert screen(raw) == ["T\\x1b[2J  ag\\x1b]0;owned\\x07    0.0s  gate ok"]


def test_result_lines_print_above_the_board_and_close_leaves_the_final_state(tty: Tty) -> None:
    clock = Clock()
    with Board(tty, tty, clock) as board:
        assert board.ticker.is_alive()
        board.started("P1", "claude", "impl", retry=False)
        board.started("P2", "claude", "impl", retry=False)
        clock.now = 3.0
        board.ended("P1", "commit", ok=True)
        board.say("P1\tdone\tabc\tdef", "P1")
        clock.now = 4.0
        board.ended("P2", "test", ok=False)
        clock.now = 10.0
    assert not board.ticker.is_alive()
    raw = tty.getvalue()
    assert raw.endswith("\n")
    assert screen(raw) == [
        "P1\tdone\tabc\tdef",
        "P1  claude    3.0s  done",
        "P2  claude    4.0s  test failed",
    ]
    # Closed, it draws no more: a pool thread's last word cannot land under the final state.
    board.returned("P2")
    assert tty.getvalue() == raw


def test_rows_beyond_the_screen_fold_finished_ones_first(
    tty: Tty, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LINES", "4")
    board = Board(tty, tty, Clock())
    for sid in ("T1", "T2", "T3", "T4"):
        board.started(sid, "a", "impl", retry=False)
    board.say("T2\tdone\tabc\tdef", "T2")
    assert screen(tty.getvalue()) == [
        "T2\tdone\tabc\tdef",
        "T3  a    0.0s  working as impl",
        "T4  a    0.0s  working as impl",
        "... and 2 more",
    ]


def test_on_a_terminal_a_notice_on_stderr_prints_above_the_board(
    tty: Tty, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = io.StringIO()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setattr(sys, "stdout", results)
    monkeypatch.setenv("TERM", "xterm")
    with live.shown(quiet=False, as_json=False) as (progress, say):
        progress.started("T1", "a", "impl", retry=False)
        print("harness: kept your change to src/calc.py", file=sys.stderr)
        say("T1\tdone\tabc\tdef", "T1")
    assert sys.stderr is tty
    assert results.getvalue() == "T1\tdone\tabc\tdef\n"
    assert [re.sub(r"\d+\.\ds", "Ns", line) for line in screen(tty.getvalue())] == [
        "harness: kept your change to src/calc.py",
        "T1  a    Ns  done",
    ]


def test_a_terminal_that_cannot_move_the_cursor_gets_lines(
    tty: Tty, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setenv("TERM", "dumb")
    with live.shown(quiet=False, as_json=False) as (progress, _):
        assert isinstance(progress, Lines)


def on_a_terminal(
    sample: Sample, *args: str, interrupt_once: str | None = None
) -> tuple[int, str, str]:
    """`harness *args` with stderr on a pseudo-terminal of 100 x 30 and stdout on a pipe, sent
    SIGINT once `interrupt_once` is drawn: its exit code, stdout and what reached the terminal
    (whose \r\n is \n again)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    drawn = bytearray()
    seen = threading.Event()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the last process holding the terminal is gone
                return
            if not chunk:
                return
            drawn.extend(chunk)
            if interrupt_once is not None and interrupt_once.encode() in drawn:
                seen.set()

    reader = threading.Thread(target=read)
    reader.start()
    proc = subprocess.Popen(
        [*HARNESS, *args, "--repo", str(sample.root)],
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
        env={**os.environ, "HARNESS_CLOCK": CLOCK, "TERM": "xterm"},
    )
    os.close(slave)  # the child's copy is the terminal's last: when it exits, reading ends
    try:
        if interrupt_once is not None:
            assert seen.wait(60), drawn
            time.sleep(1)  # the worker is asleep in its sandbox
            proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
        reader.join(timeout=10)
        os.close(master)
    return proc.returncode, out, drawn.decode().replace("\r\n", "\n")


def test_a_run_on_a_terminal_draws_the_board_and_keeps_its_results_whole(
    sample: Sample,
) -> None:
    """Two calls in flight at once, and the result lines on stdout as without a board."""
    plan = [subtask(s, creates=[f"src/{s.lower()}.py"]) for s in ("P1", "P2")]
    sample.write_plan(plan)
    sample.write_script(
        [
            ok(s, (f"src/{s.lower()}.py", new_file_patch(f"src/{s.lower()}.py", ["X = 1"])))
            for s in ("P1", "P2")
        ]
    )
    code, out, raw = on_a_terminal(sample, "run", "demo", "--max-parallel", "2")
    assert code == 0, raw
    lines = out.splitlines()
    assert len(lines) == 3, out
    assert re.fullmatch(r"P1\tdone\t\w+\t\w+", lines[0]), lines
    assert re.fullmatch(r"P2\tdone\t\w+\t\w+", lines[1]), lines
    assert lines[2] == "task demo complete"
    assert ERASE.search(raw), raw
    assert [re.sub(r" +\d+\.\ds ", " Ns ", line) for line in screen(raw)] == [
        "P1  scripted Ns  done",
        "P2  scripted Ns  done",
    ]


def test_ctrl_c_leaves_the_board_then_says_so_below_it(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch())) | {"sleep_s": 60}])
    code, out, raw = on_a_terminal(sample, "next", "demo", interrupt_once="working as")
    assert code == 130
    assert out == ""
    row, said = screen(raw)
    assert said == "harness: interrupted; run the command again to go on"
    took = re.fullmatch(r"T1  scripted +(\d+\.\d)s  working as localized-impl", row)
    assert took, row
    # Redrawn as the call ran, with nothing else to tell: the time ticked.
    assert float(took.group(1)) >= 1.0
    assert raw.count("working as") > 2
