"""`harness mcp` registered in the real Codex CLI (tests/clis) as README shows it, an
`[mcp_servers.harness]` table in config.toml, its model the scripted API of tests/modelapi.py
on 127.0.0.1: `codex exec` calls a harness tool from its `exec` tool, the variables
`env_vars` names reach harness, and the answer reaches the model's next request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLOCK, ROOT, Sample, completed_demo
from tests.modelapi import ModelAPI, answer, call

CODEX = ROOT / "tests" / "clis" / "node_modules" / ".bin" / "codex"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not CODEX.exists() and os.environ.get("HARNESS_REQUIRE_CLIS") != "1",
        reason="the agent CLIs are not installed (npm ci --prefix tests/clis)",
    ),
]

SCHEMA = {
    "type": "object",
    "properties": {"notes": {"type": "array", "items": {"type": "string"}}},
    "required": ["notes"],
    "additionalProperties": False,
}
# codex starts its first turn without waiting for its MCP servers, and a script sees the tools
# there were as it began: each of the model's scripts calls harness's tool if it is there,
# else waits a second, so the last one finds it however slowly the server started.
TRY = (
    "if (typeof tools.mcp__harness__validate !== 'function') {\n"
    "  await new Promise(r => setTimeout(r, 1000));\n"
    "  text('not yet');\n"
    "} else {\n"
    "  const r = await tools.mcp__harness__validate({task_id: 'demo'});\n"
    "  text(r.content.map(c => c.text).join(''));\n"
    "}\n"
)
TRIES = 8


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return completed_demo(tmp_path_factory.mktemp("done"))


def codex(where: Path, repo: Path, forwarded: bool) -> str:
    """What the `validate` tool answered `codex exec`, registered as README shows (with
    `env_vars` naming HARNESS_CLOCK if `forwarded`), as the model's last request holds it."""
    home, work = where / "codex-home", where / "work"
    home.mkdir()
    work.mkdir()
    schema = where / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    steps = [*(call("exec", TRY) for _ in range(TRIES)), answer({"notes": ["seen"]})]
    with ModelAPI(steps) as api:
        (home / "config.toml").write_text(
            'model_provider = "local"\n'
            "[model_providers.local]\n"
            'name = "local"\n'
            f'base_url = "{api.url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "CODEX_API_KEY"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
            "[mcp_servers.harness]\n"
            f"command = {json.dumps(sys.executable)}\n"
            f"args = {json.dumps(['-m', 'harness.cli', 'mcp', '--repo', str(repo)])}\n"
            "startup_timeout_sec = 30\n"
            'default_tools_approval_mode = "approve"\n'
            "tool_timeout_sec = 3600\n" + ('env_vars = ["HARNESS_CLOCK"]\n' if forwarded else "")
        )
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(where),
            "CODEX_HOME": str(home),
            "CODEX_API_KEY": "sk-modelapi",
            "HARNESS_CLOCK": CLOCK,
        }
        argv = [str(CODEX), "exec", "--json", "--skip-git-repo-check", "-C", str(work)]
        ran = subprocess.run(
            [*argv, "--output-schema", str(schema), "-"],
            input="Is the plan of task demo valid?\n",
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
            check=False,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert api.problems == [] and api.remaining() == []
        last = api.main_requests()[-1]["body"]["input"]
    outputs = [i for i in last if i.get("type") == "custom_tool_call_output"]
    said = "".join(part["text"] for part in outputs[-1]["output"])
    assert "Script completed" in said, said
    return said


def test_codex_exec_calls_a_harness_tool_registered_as_readme_shows(
    done: Sample, tmp_path: Path
) -> None:
    said = codex(tmp_path, done.root, forwarded=True)
    # The very document the command line prints: the demo's token is valid on its clock.
    document = json.loads(said[said.index("{") :])
    assert document == json.loads(done.cli("plan", "validate", "demo", "--json").stdout)
    assert document["valid"] is True


def test_without_env_vars_codex_keeps_the_variables_from_harness(
    done: Sample, tmp_path: Path
) -> None:
    said = codex(tmp_path, done.root, forwarded=False)
    # No HARNESS_CLOCK: today's clock, past the demo's token.
    assert "(exit 1: problems found)" in said and "no usable token covers src/**" in said
