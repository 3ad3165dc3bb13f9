"""`harness mcp` registered in the real Claude Code CLI (tests/clis) through `--mcp-config
FILE --strict-mcp-config`, its model the scripted API of tests/modelapi.py on 127.0.0.1: a
model turn calls a harness tool and the tool's answer reaches the model's next request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLOCK, ROOT, Sample, completed_demo, scripted
from tests.modelapi import ModelAPI, Step, answer, call

CLAUDE = ROOT / "tests" / "clis" / "node_modules" / ".bin" / "claude"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not CLAUDE.exists() and os.environ.get("HARNESS_REQUIRE_CLIS") != "1",
        reason="the agent CLIs are not installed (npm ci --prefix tests/clis)",
    ),
]

SCHEMA = {
    "type": "object",
    "properties": {"notes": {"type": "array", "items": {"type": "string"}}},
    "required": ["notes"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return completed_demo(tmp_path_factory.mktemp("done"))


def claude(where: Path, repo: Path, steps: list[Step], allowed: str) -> tuple[Any, ModelAPI]:
    """`claude -p` with harness's server as its only MCP server, `allowed` its only
    pre-approved tools; its result document and the API it talked to."""
    config = where / "mcp.json"
    server = {"command": sys.executable, "args": ["-m", "harness.cli", "mcp", "--repo", str(repo)]}
    config.write_text(json.dumps({"mcpServers": {"harness": server}}))
    work, home = where / "work", where / "home"
    work.mkdir()
    home.mkdir()
    argv = [
        str(CLAUDE),
        "-p",
        "--output-format",
        "json",
        "--json-schema",
        json.dumps(SCHEMA),
        "--mcp-config",
        str(config),
        "--strict-mcp-config",
        "--allowedTools",
        allowed,
        "--no-session-persistence",
    ]
    with ModelAPI(steps) as api:
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "ANTHROPIC_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": "sk-ant-modelapi",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "HARNESS_CLOCK": CLOCK,
        }
        ran = subprocess.run(
            argv,
            input="What is the status of task demo?\n",
            capture_output=True,
            text=True,
            cwd=work,
            env=env,
            timeout=180,
            check=False,
        )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert api.problems == [] and api.remaining() == []
    return json.loads(ran.stdout), api


def tool_result(api: ModelAPI) -> dict[str, Any]:
    """The tool result the model's second main request carries."""
    second = api.main_requests()[1]["body"]["messages"][-1]
    results = [b for b in second["content"] if b.get("type") == "tool_result"]
    assert len(results) == 1, second
    found: dict[str, Any] = results[0]
    return found


def test_claude_calls_a_harness_tool_and_the_model_reads_its_answer(
    done: Sample, tmp_path: Path
) -> None:
    steps = [call("mcp__harness__status", {"task_id": "demo"}), answer({"notes": ["seen"]})]
    result, api = claude(tmp_path, done.root, steps, "mcp__harness__status")
    assert result["is_error"] is False and result["permission_denials"] == []
    first = json.dumps(api.main_requests()[0]["body"])
    assert "mcp__harness__status" in first and "mcp__harness__run_task" in first
    got = tool_result(api)
    assert not got.get("is_error")
    content = got["content"]
    text = content if isinstance(content, str) else "".join(b["text"] for b in content)
    # The very document the command line prints.
    assert json.loads(text) == json.loads(done.cli("status", "demo", "--json").stdout)
    assert json.loads(text)["complete"] is True


def test_a_harness_tool_not_allowed_is_refused_and_never_runs(tmp_path: Path) -> None:
    fresh = scripted(tmp_path)  # a plan not yet run: next_subtask would log and commit
    before = fresh.head()
    steps = [call("mcp__harness__next_subtask", {"task_id": "demo"}), answer({"notes": ["no"]})]
    result, api = claude(tmp_path, fresh.root, steps, "mcp__harness__status")
    assert [d["tool_name"] for d in result["permission_denials"]] == ["mcp__harness__next_subtask"]
    assert tool_result(api).get("is_error") is True
    assert fresh.head() == before and fresh.events() == []
