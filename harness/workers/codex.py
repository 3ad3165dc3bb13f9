"""The Codex worker: `codex exec` in a sandbox, its JSONL events turned into one answer line.

The prompt goes on stdin (`-` as the prompt argument), never argv, where `ps` and logs would
show it. The final answer is forced into shape with --output-schema, and the diffs are
computed by the shared shim from the sandbox, never taken from the model.
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import suppress
from pathlib import Path
from typing import Any

import orjson

from harness import __version__
from harness.base import files, folders, metrics
from harness.base.errors import InvalidInput
from harness.workers import cliprocess, codex_events, prompts, shim

# --output-schema is strict: every property required, additionalProperties false, and no
# object with free keys. So `metrics` travels as a list of {name, value} pairs that the shim
# folds back into the object the harness expects; this keeps metric names open (coverage_delta
# and friends) without asking the model to hand-escape JSON inside a string.
# Optional fields become required-but-nullable (`why`, `type`) for the same reason.
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["plan", "risks", "notes", "metrics", "artifacts"],
    "properties": {
        "plan": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["step", "why"],
                "properties": {"step": {"type": "string"}, "why": {"type": ["string", "null"]}},
            },
        },
        "risks": {"type": "array", "items": {"type": "string"}},
        "notes": {"type": "array", "items": {"type": "string"}},
        "metrics": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "value"],
                "properties": {
                    "name": {"type": "string"},
                    "value": {"type": ["number", "string", "boolean", "null"]},
                },
            },
        },
        "artifacts": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "type", "content"],
                "properties": {
                    "name": {"type": "string"},
                    "type": {"type": ["string", "null"]},
                    "content": {"type": "string"},
                },
            },
        },
    },
}

# Told to the model because the rendered prompt describes metrics as an object.
SCHEMA_NOTE = (
    "\nGive metrics as a list of {name, value} pairs; use null for an absent why or type.\n"
)

# How often codex itself retries a request or a dropped stream before it gives up: harness
# owns retries and time, so a rate-limited call fails in seconds, not minutes.
OWN_RETRIES = 1
# codex's features that offer the model tools no role needs.
OFF = (
    "multi_agent",
    "goals",
    "sleep_tool",
    "apps",
    "plugins",
    "image_generation",
    "computer_use",
    "browser_use",
    "tool_suggest",
)
# An MCP server name `-c mcp_servers.<name>.enabled=false` spells as one key.
_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]+")
# The provider the shim defines when the environment names a base URL: codex ignores
# OPENAI_BASE_URL and reads its endpoint only from a provider.
PROVIDER = "harness"


# Where a repository configures codex 0.169.0 (docs/agent-sandboxes.md, "What a repository
# could configure"): `.codex` (config.toml with notify, sandbox_mode, MCP servers and
# hooks; hooks.json, agents, skills, rules) and `.agents` (skills, plugin marketplaces),
# wherever codex would look for them. Never in the sandbox (nor is the project trusted,
# so codex would skip a project config anyway); AGENTS.md stays, as instructions only.
WITHHELD = ("**/.codex", "**/.agents")


def version() -> str:
    return cliprocess.cli_version("codex", f"codex-cli {__version__}")


def command(
    env: shim.Envelope, box: shim.Sandbox, schema: Path, last: Path, launch: shim.Launch
) -> list[str]:
    """The `codex exec` invocation; `-` makes it read the prompt from stdin.

    Both sandbox modes keep the network off. Codex cannot limit its shell to a list of
    commands, so the shell tool is off unless the registry allows some, and then every
    command codex reports having run is checked against the list afterwards (check_commands).
    Nor can it take path rules: under a policy that turns both write and edit off it runs
    read-only, and the files it reports changing are checked afterwards (check_changes).
    """
    shell = [] if launch.commands else ["-c", "features.shell_tool=false"]
    model = ["-c", f"model={_toml(launch.model)}"] if launch.model else []
    writes = launch.policy is None or bool({"write", "edit"} & set(launch.policy.tools))
    # codex's own sandbox backs up the harness's: a read-only role cannot write at all.
    mode = "workspace-write" if env.writable and writes else "read-only"
    if env.resumes is not None:
        # `exec resume` continues the retried call's thread; it takes neither -s nor -C: the
        # mode goes as config, and the CLI runs in the sandbox already.
        return [
            "codex",
            "exec",
            "resume",
            env.resumes,
            *shell,
            *model,
            *_common(env),
            "-c",
            f"sandbox_mode={_toml(mode)}",
            "--output-schema",
            str(schema),
            "-o",
            str(last),
            "-",
        ]
    return [
        "codex",
        "exec",
        *shell,
        *model,
        *_common(env),
        *([] if env.keeps_session else ["--ephemeral"]),  # else no session files are left
        "-s",
        mode,
        "-C",
        str(box.root),
        "--output-schema",
        str(schema),
        "-o",
        str(last),
        "-",
    ]


def _common(env: shim.Envelope) -> list[str]:
    """What a new and a resumed `codex exec` both take: its model provider, the tools no
    role needs off, JSONL events, and no trust check on the shim's own git sandbox."""
    config = user_config()
    return [
        *provider_overrides(
            dict(os.environ), config, (env.payload.get("timeouts") or {}).get("idle_s")
        ),
        # Only what a role needs, whatever the user's config turns on: no web search, no
        # subagents, goals, sleeping, apps, plugins, images, browser or computer use.
        "-c",
        'web_search="disabled"',
        *mcp_off(config),
        "-c",
        "analytics.enabled=false",  # no traffic beside the model's (its proxy would refuse it)
        *(a for name in OFF for a in ("-c", f"features.{name}=false")),
        "--json",
        "--skip-git-repo-check",  # the sandbox is a git repo, but its trust is not configured
    ]


def mcp_off(config: dict[str, Any]) -> list[str]:
    """`-c` overrides turning off each MCP server the user's config names: no server starts
    for a role, so no tool of one (harness's own `harness mcp` among them) reaches a worker.
    codex merges `-c mcp_servers={}` into the user's table instead of replacing it, so each
    server is turned off by name; a name `-c` cannot spell fails the call rather than leave
    its server on."""
    servers = config.get("mcp_servers")
    names = sorted(servers) if isinstance(servers, dict) else []
    for name in names:
        if not _SERVER_NAME.fullmatch(name):
            raise shim.ShimError(
                f"the codex config names MCP server {name!r}, which harness cannot turn off "
                "for a worker: rename it to letters, digits, '_' and '-'"
            )
    return [a for name in names for a in ("-c", f"mcp_servers.{name}.enabled=false")]


def user_config() -> dict[str, Any]:
    """The user's codex config (bound read-only into the sandbox's home), or {}."""
    home = Path(os.environ.get("CODEX_HOME") or shim.home() / ".codex")
    try:
        return files.load_toml((home / "config.toml").read_bytes(), "config.toml", finite=False)
    except (OSError, InvalidInput):
        return {}


def provider_overrides(
    environ: dict[str, str], config: dict[str, Any], idle_s: float | None = None
) -> list[str]:
    """`-c` overrides for the model provider: one defined from OPENAI_BASE_URL when the
    environment sets it (a gateway user's only way to point codex elsewhere without editing
    its config), else the user's own; either with codex's own retries capped and, given the
    call's idle_s, its wait for the next event of a streaming answer."""
    url = environ.get("OPENAI_BASE_URL")
    caps: dict[str, Any] = {"request_max_retries": OWN_RETRIES, "stream_max_retries": OWN_RETRIES}
    if idle_s is not None:
        caps["stream_idle_timeout_ms"] = int(idle_s * 1000)
    if url:
        key = next((k for k in ("CODEX_API_KEY", "OPENAI_API_KEY") if environ.get(k)), None)
        fields: dict[str, Any] = {
            "name": PROVIDER,
            "base_url": url,
            "wire_api": "responses",
            **({"env_key": key} if key else {}),
            **caps,
        }
        return [
            "-c",
            f"model_provider={_toml(PROVIDER)}",
            *(
                a
                for k, v in fields.items()
                for a in ("-c", f"model_providers.{PROVIDER}.{k}={_toml(v)}")
            ),
        ]
    name = config.get("model_provider")
    providers = config.get("model_providers")
    if isinstance(name, str) and isinstance(providers, dict) and name in providers:
        return [a for k, v in caps.items() for a in ("-c", f"model_providers.{name}.{k}={v}")]
    return []


def _toml(value: object) -> str:
    """A value as TOML reads it on a `-c` line: a string quoted, a number as it is."""
    return orjson.dumps(value).decode() if isinstance(value, str) else str(value)


def work(env: shim.Envelope, box: shim.Sandbox, launch: shim.Launch) -> dict[str, Any]:
    brief = prompts.role_brief(str(env.payload["role"]), Path.cwd(), launch)
    prompt = prompts.render(env, brief, launch) + SCHEMA_NOTE
    # Outside the sandbox, so neither file shows up in the diffs.
    side = shim.fresh_folder(box.root.parent, "codex")
    try:
        schema, last = side / "schema.json", side / "last-message.json"
        schema.write_bytes(orjson.dumps(ANSWER_SCHEMA))
        # `--json` prints each event as it happens: silence for idle_s is a stuck codex.
        argv = command(env, box, schema, last, launch)
        ran = cliprocess.run_cli(argv, env, box, prompt, streams=True)
        events = codex_events.parse_events(ran.stdout)
        codex_events.check(ran, events)
        codex_events.check_edits(events)
        codex_events.check_tools(events)
        codex_events.check_commands(events, launch)
        codex_events.check_changes(events, launch, str(box.root))
        text = codex_events.final_text(events, last)
    finally:
        with suppress(OSError):
            folders.remove(side)
    answer = codex_events.answer_of(text)
    answer["metrics"] = metrics.measured(answer.get("metrics"), codex_events.event_metrics(events))
    answer["prompt"] = prompt
    return answer


def main(argv: list[str] | None = None) -> int:
    return shim.main("codex", work, version, argv, WITHHELD)


if __name__ == "__main__":
    sys.exit(main())
