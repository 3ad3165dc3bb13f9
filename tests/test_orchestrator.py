"""The step in-process, with a scripted worker: fast checks of the orchestrator's decisions
(the same steps run end to end through the CLI in test_step.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.layout import Layout

from .conftest import subtask
from .scripted import DIFF, NO_DIFF, Scripted, repository, run


def plan(*ids: str) -> list[dict[str, object]]:
    return [subtask(sid, creates=["src/made_*.py"]) for sid in ids]


def test_a_retryable_failure_is_retried_once_then_the_step_completes(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("T1"))
    worker = Scripted({"T1": ["retryable", DIFF]})
    assert run(root, worker) == ["T1"]
    worker.assert_used()
    log = Layout(root).log("demo").read_text()
    assert log.count('"event":"subagent_retried"') == 1


def test_a_hard_failure_blocks_and_a_resume_calls_afresh(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("T1", "T2"))
    worker = Scripted({"T1": ["hard", NO_DIFF], "T2": [DIFF]})
    assert run(root, worker, resumes=1) == ["T1", "T2"]
    assert worker.calls == ["T1", "T1", "T2"]


def test_the_fake_fails_on_a_call_it_does_not_expect(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("T1"))
    with pytest.raises(AssertionError, match="unexpected call for T1"):
        run(root, Scripted({}))


def test_the_fake_fails_on_an_answer_left_unused(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("T1"))
    worker = Scripted({"T1": [DIFF, DIFF]})
    run(root, worker)
    with pytest.raises(AssertionError, match="answers never asked for"):
        worker.assert_used()
