"""A call's envelope (harness/step/calling.py): what an agent that resumes is told of the
session it continues, taken from the retried call's answer and held to ids.SESSION first."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from harness.base import ids

from .conftest import Sample, calc_patch, ok, subtask


def prompts(sample: Sample) -> list[dict[str, Any]]:
    """Each call's prompt envelope, in the order the calls were made."""
    calls = [e["details"]["call_id"] for e in sample.events() if e["event"] == "subagent_invoked"]
    folder = sample.root / "ai" / "exchanges" / "demo"
    return [orjson.loads((folder / c / "prompt.ndjson").read_bytes()) for c in calls]


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("named", "resumed"),
    [
        ("3f2a0c1e-6b7d-4e8f-9a0b-1c2d3e4f5a6b", True),  # claude's, codex's, copilot's
        ("ses_2a9bF0c", True),  # opencode's
        ("--dangerously-skip-permissions", False),  # read by claude as its own flag
        ("-x", False),
        ("../../../etc", False),
        ("abc\n", False),
        ("a b", False),
        ("a" * 129, False),
        (7, False),
    ],
)
def test_a_retry_resumes_only_a_session_id_the_retried_answer_names(
    sample: Sample, named: object, resumed: bool
) -> None:
    reg = sample.read_json("ai/agents/registry.json")
    reg["agents"][0]["resume"] = True
    sample.write_json("ai/agents/registry.json", reg)
    sample.set_config("[verify]\ntest = 'grep -q GOOD src/calc.py'\n")
    first = ok("T1", ("src/calc.py", calc_patch("BAD = 1")), retry=False)
    first["result"]["metrics"] = {"session_id": named}
    sample.write_script([first, ok("T1", ("src/calc.py", calc_patch("GOOD = 1")), retry=True)])
    sample.write_plan([subtask("T1")])
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    retry = prompts(sample)[1]["payload"]
    assert retry["session"]["keep"] is True
    if resumed:
        assert retry["session"] == {"keep": True, "resume": named}
    else:
        assert "resume" not in retry["session"]
        assert retry["session"]["dropped"] == "the retried call's answer named no session id"


def test_the_session_pattern_takes_no_option_path_or_line_end() -> None:
    for bad in ("-", "-a", ".", "..", "a/b", "a.b", "a\n", "\na", "a\0", ""):
        assert not ids.whole(ids.SESSION, bad), bad
    assert ids.whole(ids.SESSION, "ses_01J" + "x" * 120)
