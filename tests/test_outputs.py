"""Hostile or broken worker answers, through the real CLI: a hard format failure, blocked,
nothing applied; and the well-formed twins that pass."""

from __future__ import annotations

import pytest

from .conftest import Sample, calc_patch, ok, subtask

GOOD = (
    '{"agent_id":"scripted","result":{"diffs":[]},"status":"ok",'
    '"task_id":"demo","ts":"2026-01-01T00:00:00Z"}'
)

HOSTILE = [
    pytest.param({"raw": ""}, id="silent"),
    pytest.param({"raw": "Sure! Here is the change.\n"}, id="prose"),
    pytest.param({"raw": GOOD + "\n" + GOOD + "\n"}, id="two-lines"),
    pytest.param({"raw": "note\n" + GOOD + "\n"}, id="chatter-before"),
    pytest.param({"raw": GOOD[:-1] + "\n"}, id="truncated-json"),
    pytest.param({"raw": GOOD + "\n", "exit": 1}, id="ok-with-exit-1"),
    pytest.param({"raw": GOOD + "\n", "exit": 3}, id="unknown-exit-code"),
    pytest.param({"raw": GOOD.replace('"demo"', '"other"') + "\n"}, id="other-task"),
    pytest.param({"raw": GOOD.replace('"scripted"', '"impostor"') + "\n"}, id="other-agent"),
    pytest.param({"raw": GOOD.replace('"ok"', '"done"') + "\n"}, id="bad-status"),
    pytest.param({"raw": GOOD.replace(',"result":{"diffs":[]}', "") + "\n"}, id="ok-no-result"),
    pytest.param(
        {"raw": GOOD.replace('"diffs":[]', '"diffs":[{"file":"x"}]') + "\n"},
        id="diff-without-patch",
    ),
    pytest.param({"raw": GOOD.replace('"diffs":[]', '"evil":1') + "\n"}, id="unknown-field"),
    pytest.param(
        {"raw": GOOD.replace('"diffs":[]', '"artifacts":[{"name":"../x","content":"1"}]') + "\n"},
        id="artifact-path-name",
    ),
    pytest.param({"raw": "\ufeff" + GOOD + "\n"}, id="bom"),
    pytest.param({"error": {"message": "m", "kind": "hard"}, "exit": 1}, id="hard-with-exit-1"),
    pytest.param({"raw": GOOD + " " * 9_000_000 + "\n"}, id="oversize"),
]


@pytest.mark.parametrize("answer", HOSTILE)
def test_broken_answer_is_a_hard_format_failure(sample: Sample, answer: dict[str, object]) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([{"subtask": "T1", **answer}])
    base = sample.head()
    res = sample.cli("next", "demo")
    assert res.returncode == 1, res.stderr
    failed = next(e for e in sample.events() if e["event"] == "subagent_failed")
    assert failed["details"]["kind"] == "format"
    assert sample.names()[-2:] == ["step_failed", "blocker_encountered"]
    assert sample.names().count("subagent_invoked") == 1  # a format failure is not retried
    assert sample.git("diff", "--name-only", base, "HEAD", "--", ".", ":(exclude)ai") == ""
    assert sample.status_outside_ai() == ""


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param({"raw": GOOD + "\n"}, id="one-line"),
        pytest.param({"raw": GOOD}, id="no-final-newline"),
        pytest.param(ok("T1", ("src/calc.py", calc_patch())), id="with-diff"),
    ],
)
def test_well_formed_answer_passes(sample: Sample, answer: dict[str, object]) -> None:
    sample.write_plan([subtask("T1", no_change_ok=True)])
    sample.write_script([{"subtask": "T1", **answer}])
    res = sample.cli("next", "demo")
    assert res.returncode == 0, res.stderr
    assert sample.names()[-1] == "step_completed"
