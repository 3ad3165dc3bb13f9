"""`harness mcp` registered in the real Gemini CLI (tests/clis) as README shows it, `mcpServers`
in settings.json, its model the scripted API of tests/modelapi.py on 127.0.0.1: headless
gemini offers a harness tool only when `--allowed-tools` names it, and a call's answer
reaches the model's next request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLOCK, ROOT, Sample, completed_demo
from tests.modelapi import ModelAPI, Step, answer, call

GEMINI = ROOT / "tests" / "clis" / "node_modules" / ".bin" / "gemini"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not GEMINI.exists() and os.environ.get("HARNESS_REQUIRE_CLIS") != "1",
        reason="the agent CLIs are not installed (npm ci --prefix tests/clis)",
    ),
]


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return completed_demo(tmp_path_factory.mktemp("done"))


def gemini(where: Path, repo: Path, steps: list[Step], *flags: str) -> ModelAPI:
    """`gemini -p` with harness's server in the user's settings.json; the API it talked to."""
    home, work, tmp = where / "home", where / "work", where / "tmp"
    for folder in (home / ".gemini", work, tmp):
        folder.mkdir(parents=True)
    server = {"command": sys.executable, "args": ["-m", "harness.cli", "mcp", "--repo", str(repo)]}
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"maxAttempts": 1},
        "mcpServers": {"harness": server},
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    with ModelAPI(steps) as api:
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(home),
            "TMPDIR": str(tmp),
            "LANG": "C.UTF-8",
            "GOOGLE_GEMINI_BASE_URL": api.url,
            "GEMINI_API_KEY": "modelapi",
            "HARNESS_CLOCK": CLOCK,
        }
        argv = [str(GEMINI), "-p", "What is the status of task demo?", "--skip-trust"]
        ran = subprocess.run(
            [*argv, "--output-format", "json", "--approval-mode", "auto_edit", *flags],
            capture_output=True,
            text=True,
            cwd=work,
            env=env,
            timeout=180,
            check=False,
        )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert api.problems == [] and api.remaining() == []
    return api


def test_gemini_calls_a_harness_tool_that_allowed_tools_names(done: Sample, tmp_path: Path) -> None:
    steps = [call("mcp_harness_status", {"task_id": "demo"}), answer({"notes": ["seen"]})]
    api = gemini(tmp_path, done.root, steps, "--allowed-tools", "mcp_harness_status")
    first, second = api.main_requests()
    assert "mcp_harness_status" in json.dumps(first["body"]["tools"])
    parts = second["body"]["contents"][-1]["parts"]
    said = parts[0]["functionResponse"]["response"]["output"]
    document = said[said.index("{") : said.rindex("}") + 1]  # gemini wraps it as untrusted
    assert json.loads(document) == json.loads(done.cli("status", "demo", "--json").stdout)


def test_headless_gemini_offers_no_harness_tool_it_was_not_allowed(
    done: Sample, tmp_path: Path
) -> None:
    api = gemini(tmp_path, done.root, [answer({"notes": ["none"]})])
    assert not [name for name in api.tools_offered() if name.startswith("mcp_harness")]
