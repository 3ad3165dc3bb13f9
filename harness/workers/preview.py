"""`harness policy show`: what an agent is launched with, and the argv its shim gives its CLI,
built by the shim's own code so what is shown is what runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.base.errors import InvalidInput
from harness.boundary import launchers, policy, registry, sandbox
from harness.repository.layout import Layout
from harness.spec import config
from harness.workers import claude, codex, copilot, gemini, opencode, shim
from harness.workers.shim import Launch

# Where a call's throw-away copy lies in the sandbox: a fresh folder under its home each time.
SHOWN_WORKSPACE = sandbox.HOME / "sandbox-XXXXXXXX"


def show(layout: Layout, agent_id: str) -> dict[str, Any]:
    """What `agent_id` is launched with, and the argv its shim gives its CLI for a subtask
    that writes and for one that does not, as the shim builds them."""
    found = policy.load(layout)
    agents = policy.apply(registry.load(layout.registry, layout.root), found, layout.root)
    agent = next((a for a in agents if a.id == agent_id), None)
    if agent is None:
        raise InvalidInput(f"ai/agents/registry.json: no agent {agent_id!r}")
    launch_argv = [agent.cmd, *agent.argv(layout.root)[1:]]
    cli = launchers.shim_of(agent.executable(layout.root))
    argv: dict[str, list[str] | None] = {"writable": None, "read_only": None}
    if cli is not None:
        try:
            launch = shim.parse_launch(launch_argv[1:])
        except shim.ShimError as exc:
            raise InvalidInput(f"ai/agents/registry.json: agent {agent_id}: {exc}") from None
        budgets = dict(config.load(layout.config).budgets)
        for key, scope in (("writable", "token:any"), ("read_only", "none")):
            argv[key] = _cli_argv(cli, launch, scope, budgets)
    return {
        "agent": agent.id,
        "cli": cli,
        "policy": policy.LABEL if found is not None else None,
        "tools": list(agent.tools) if agent.tools is not None else None,
        "model": agent.model,
        "launch": launch_argv,
        "workspace": str(SHOWN_WORKSPACE),
        "home": str(sandbox.HOME),
        **argv,
    }


def _cli_argv(cli: str, launch: Launch, scope: str, budgets: dict[str, Any]) -> list[str]:
    """The argv the shim gives `cli` for a subtask of that write scope."""
    env = shim.Envelope({}, {"payload": {"write_scope": scope, "budgets": budgets}})
    box = shim.Sandbox(SHOWN_WORKSPACE)
    if cli == "claude":
        return claude.command(env, box, "<role brief>", launch, sandbox.HOME)
    if cli == "codex":
        return codex.command(env, box, Path("<schema file>"), Path("<last message file>"), launch)
    if cli == "opencode":
        try:
            model = opencode.model_of(launch, dict(os.environ))
        except shim.ShimError as exc:
            raise InvalidInput(f"opencode: {exc}") from None
        return opencode.command(env, box, model)
    if cli == "copilot":
        return copilot.command(env, box, launch, Path("<usage file>"))
    return gemini.command(env, launch)
