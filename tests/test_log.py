"""`harness log`: the pure formatting of harness.logview, and the command on a real record."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.base import clock
from harness.readers import logview

from .conftest import CLOCK, Sample, completed_demo

Event = dict[str, Any]
CALL = "dc09d7dba04f8477060dc292b5ec21fc748d01df40b530b92e9ef45090e80149"


def ev(seq: int, event: str, status: str = "ok", step: str | None = "T1", **rest: Any) -> Event:
    ts = (clock.parse(CLOCK) + timedelta(seconds=seq)).strftime(clock.FORMAT)
    found: Event = {"seq": seq, "ts": ts}
    found |= {"event": event, "status": status, **rest}
    if step is not None:
        found["step"] = step
    return found


# -- logview ---------------------------------------------------------------------------------


def test_spans_close_at_outcomes_step_ends_and_task_completion() -> None:
    events = [
        ev(0, "task_started", step=None),
        ev(3, "subagent_invoked", "pending", details={"call_id": CALL}),
        ev(7, "subagent_succeeded", details={"call_id": CALL}),
        ev(8, "test_passed", details={"check": "test"}),
        ev(75, "step_completed", details={"call_id": CALL}),
        ev(76, "subagent_invoked", "pending", step="T2", details={"call_id": "b" * 64}),
        ev(80, "subagent_failed", "error", step="T2", details={"call_id": "b" * 64}),
        ev(81, "step_failed", "error", step="T2"),
        ev(3700, "task_completed", step=None),
    ]
    spans = [row.duration for row in logview.rows(events)]
    assert spans == [None, None, 4, None, 72, None, 4, 5, 3700]


def test_an_outcome_without_its_invocation_has_no_span() -> None:
    rows = list(logview.rows([ev(5, "subagent_succeeded", details={"call_id": CALL})]))
    assert rows[0].duration is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, ""), (0, "0s"), (59, "59s"), (60, "1m00s"), (3599, "59m59s"), (3661, "1h01m")],
)
def test_span_text(seconds: int | None, text: str) -> None:
    assert logview.span(seconds) == text


def test_details_shortens_ids_and_keeps_a_fixed_order() -> None:
    event = ev(6, "subagent_diffs_applied")
    event["details"] = {"token": "W1", "commit": "0cc18c1b7e46ded66f98b8cb0ae4773958bfcea5"}
    event["details"] |= {"call_id": CALL, "files": ["src/calc.py"]}
    assert logview.details(event) == "call_id=dc09d7dba04f commit=0cc18c1b7e46 token=W1"


def test_details_cuts_the_error_to_one_short_line() -> None:
    event = ev(9, "test_failed", "error", details={"check": "test"}, error="line\n" * 40)
    text = logview.details(event)
    assert text.startswith("check=test error: line line")
    assert text.endswith("...") and "\n" not in text
    assert len(text) == len("check=test error: ") + logview.ERROR_WIDTH


def test_control_characters_never_reach_the_terminal() -> None:
    event = ev(
        9,
        "subagent_failed",
        "error",
        step="T\u202e1",
        details={"kind": "hard\x1b[2J"},
        error="a\x1b]0;x\x07b",
    )
    text = logview.render(logview.Row(event, None), color=False)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "kind=hard\\x1b[2J" in text and "error: a\\x1b]0;x\\x07b" in text
    assert " T\\u202e1 " in text


def test_failures_are_marked_and_red_only_with_color() -> None:
    bad = logview.Row(ev(9, "step_failed", "error", error="boom"), 12)
    good = logview.Row(ev(4, "test_passed", details={"check": "test"}), None)
    plain = logview.render(bad, color=False)
    assert plain.startswith("!      9 2026-01-01T00:00:09Z T1 ")
    assert "step_failed" in plain and "12s" in plain and plain.endswith("error: boom")
    assert logview.render(bad, color=True) == f"{logview.RED}{plain}{logview.RESET}"
    assert logview.render(good, color=True) == logview.render(good, color=False)
    assert logview.render(good, color=False).startswith("       4 ")
    blocked = logview.Row(ev(10, "blocker_encountered", "blocked"), None)
    assert logview.render(blocked, color=False).startswith("!")


def test_selected_filters_by_event_and_subtask() -> None:
    event = ev(1, "subagent_invoked", "pending")
    assert logview.selected(event, None, None)
    assert logview.selected(event, "subagent_invoked", "T1")
    assert not logview.selected(event, "step_completed", None)
    assert not logview.selected(event, None, "T2")
    assert not logview.selected(ev(0, "task_started", step=None), None, "T1")


# -- the command -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return completed_demo(tmp_path_factory.mktemp("log"))


def test_log_prints_a_line_per_event_in_order(recorded: Sample) -> None:
    res = recorded.cli("log", "demo")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 23
    assert lines[0].split() == ["0", "2026-01-01T00:00:00Z", "-", "task_started", "ok"]
    assert lines[2].split()[1:6] == ["2026-01-01T00:00:02Z", "T1", "subagent_succeeded", "ok", "1s"]
    assert lines[7].split()[5] == "6s"  # step_completed: since T1's first event
    assert lines[-1].split()[3:] == ["task_completed", "ok", "22s"]
    assert "\x1b" not in res.stdout  # not a terminal: no colour


def test_log_filters(recorded: Sample) -> None:
    res = recorded.cli("log", "demo", "--event", "step_completed", "--subtask", "T2")
    lines = res.stdout.splitlines()
    assert len(lines) == 1 and lines[0].split()[2:4] == ["T2", "step_completed"]
    assert lines[0].split()[5] == "6s"  # spans are measured over the whole log
    assert len(recorded.cli("log", "demo", "--subtask", "T3").stdout.splitlines()) == 7


def test_log_json_prints_the_selected_events_as_they_are(recorded: Sample) -> None:
    res = recorded.cli("log", "demo", "--json", "--event", "subagent_invoked")
    got = [orjson.loads(line) for line in res.stdout.splitlines()]
    assert [e["seq"] for e in got] == [1, 8, 15]
    assert got == [e for e in recorded.events() if e["event"] == "subagent_invoked"]


def test_log_refuses_an_unknown_event_name(recorded: Sample) -> None:
    res = recorded.cli("log", "demo", "--event", "nope")
    assert res.returncode == 2 and "invalid choice" in res.stderr


def test_log_of_a_damaged_log_is_a_one_line_error(recorded: Sample, tmp_path: Path) -> None:
    broken = tmp_path / "repo"
    shutil.copytree(recorded.root, broken, symlinks=True)
    path = broken / "ai/tasks/demo/progress.ndjson"
    path.write_bytes(path.read_bytes().replace(b'"seq":3', b'"seq":4'))
    res = Sample(broken, recorded.script).cli("log", "demo")
    assert res.returncode == 2
    assert res.stderr == (
        "harness: ai/tasks/demo/progress.ndjson:4: hash chain broken: seq is 4, expected 3\n"
    )


def test_log_of_no_such_task(recorded: Sample) -> None:
    res = recorded.cli("log", "nope")
    assert res.returncode == 2
    assert res.stderr == "harness: ai/tasks/nope: no such task\n"
