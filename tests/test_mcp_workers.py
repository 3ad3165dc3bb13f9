"""Workers never get MCP tools: each real agent CLI (tests/clis), run by harness in its sandbox
against the scripted model API, for a user whose own config names an MCP server (`mine`) and
on a repository whose committed files name one for that CLI (`probe`): neither server's tool
reaches the model: the claude shim passes `--strict-mcp-config` with no `--mcp-config`, the
codex shim turns each server of the user's config.toml off by name, gemini's writes settings
without `mcpServers`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.modelapi import ModelAPI, answer, edit
from tests.test_real_clis import (
    ANSWER,
    CLIS,
    EDIT,
    NAMES,
    make_user_home,
    new_repository,
    plan_for,
    user_env,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not (CLIS / ".bin").is_dir() and os.environ.get("HARNESS_REQUIRE_CLIS") != "1",
        reason="the agent CLIs are not installed (npm ci --prefix tests/clis)",
    ),
]

# An MCP server of the standard library alone (a sandbox shows the system's python3, not
# harness's), given inline so that only the config decides whether it starts: it lists one
# tool, `hello`, so a model request shows whether it was started.
PROBE = """import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "probe", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "hello", "description": "probe",
                        "inputSchema": {"type": "object", "properties": {}}}]}
    else:
        r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"""
# `trust`: gemini offers a headless model only the MCP tools nobody must confirm.
SERVER = {"command": "/usr/bin/python3", "args": ["-c", PROBE], "trust": True}


def toml_server(name: str) -> str:
    return (
        f"[mcp_servers.{name}]\n"
        f"command = {json.dumps(SERVER['command'])}\n"
        f"args = {json.dumps(SERVER['args'])}\n"
    )


def user_configs(home: Path) -> None:
    """Each CLI's own user config, naming the server `mine`."""
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"mine": SERVER}}))
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(toml_server("mine"))
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps({"mcpServers": {"mine": SERVER}}))


def repository_configs(root: Path) -> None:
    """Each CLI's project config, committed in the repository, naming the server `probe`."""
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"probe": SERVER}}))
    (root / ".codex").mkdir()
    (root / ".codex" / "config.toml").write_text(toml_server("probe"))
    (root / ".gemini").mkdir()
    (root / ".gemini" / "settings.json").write_text(json.dumps({"mcpServers": {"probe": SERVER}}))


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Per CLI, every model request its worker made, as one JSON text."""
    where = tmp_path_factory.mktemp("workers")
    home = make_user_home(where / "user" / "home")
    user_configs(home)
    found = {}
    for cli in NAMES:
        with ModelAPI([edit(*EDIT), answer(ANSWER)]) as api:
            env = user_env(home, api.url)
            (where / cli).mkdir()
            s = new_repository(where / cli, env)
            repository_configs(s.root)
            plan_for(s, cli)  # commits the configs with the plan
            done = s.cli("run", "demo", env=env, timeout=300)
            assert done.returncode == 0, done.stderr
            found[cli] = json.dumps([r["body"] for r in api.main_requests()])
    return found


def offered(requests: str, server: str) -> bool:
    """Whether a tool of `server` was named to the model: claude's and codex's
    `mcp__<server>__...` (codex's deferred namespace `mcp__<server>`), gemini's
    `mcp_<server>_...`."""
    return f"mcp__{server}" in requests or f"mcp_{server}_" in requests


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini"])
def test_a_worker_gets_no_mcp_server_of_the_users_config(cli: str, seen: dict[str, str]) -> None:
    assert not offered(seen[cli], "mine")


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini"])
def test_a_worker_gets_no_mcp_server_the_repository_names(cli: str, seen: dict[str, str]) -> None:
    assert not offered(seen[cli], "probe")
