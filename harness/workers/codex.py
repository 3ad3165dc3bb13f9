"""The Codex worker: `codex exec` in a sandbox, its JSONL events turned into one answer line.

The prompt goes on stdin (`-` as the prompt argument), never argv, where `ps` and logs would
show it. The final answer is forced into shape with --output-schema, and the diffs are
computed by the shared shim from the sandbox, never taken from the model.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

import orjson

from harness import __version__
from harness.base import metrics
from harness.workers import shim

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

# Failures no retry fixes; checked first because codex words an auth failure after retries as
# "exceeded retry limit, last status: 401 Unauthorized".
HARD_TEXT = re.compile(
    r"\b40[13]\b|unauthori[sz]ed|forbidden|invalid.api.key|not (?:inside )?a (?:trusted|git)"
    r"|unknown model|model .*(?:does not exist|not found|not supported)",
    re.I,
)
# Failures the next call may well not meet: rate limits, dropped streams, a quota that resets,
# a server that says it is busy (codex words a 500 "We're currently experiencing high demand").
RETRYABLE_TEXT = re.compile(
    r"\b429\b|too many requests|stream disconnected|exceeded retry limit"
    r"|usage limit.*try again|\b50[0234]\b|overloaded|high demand|temporar",
    re.I | re.S,
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
# The provider the shim defines when the environment names a base URL: codex ignores
# OPENAI_BASE_URL and reads its endpoint only from a provider.
PROVIDER = "harness"

TAIL = 500


def version() -> str:
    return shim.cli_version("codex", f"codex-cli {__version__}")


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
    return [
        *provider_overrides(
            dict(os.environ), user_config(), (env.payload.get("timeouts") or {}).get("idle_s")
        ),
        # Only what a role needs, whatever the user's config turns on: no web search, no
        # subagents, goals, sleeping, apps, plugins, images, browser or computer use.
        "-c",
        'web_search="disabled"',
        "-c",
        "mcp_servers={}",  # no MCP server the user's config names starts for a role
        "-c",
        "analytics.enabled=false",  # no traffic beside the model's (its proxy would refuse it)
        *(a for name in OFF for a in ("-c", f"features.{name}=false")),
        "--json",
        "--skip-git-repo-check",  # the sandbox is a git repo, but its trust is not configured
    ]


def user_config() -> dict[str, Any]:
    """The user's codex config (bound read-only into the sandbox's home), or {}."""
    home = Path(os.environ.get("CODEX_HOME") or shim.home() / ".codex")
    try:
        doc = tomllib.loads((home / "config.toml").read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    return doc


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
    brief = shim.role_brief(str(env.payload["role"]), Path.cwd(), launch)
    prompt = shim.render(env, brief, launch) + SCHEMA_NOTE
    # Outside the sandbox, so neither file shows up in the diffs.
    side = shim.fresh_folder(box.root.parent, "codex")
    try:
        schema, last = side / "schema.json", side / "last-message.json"
        schema.write_bytes(orjson.dumps(ANSWER_SCHEMA))
        # `--json` prints each event as it happens: silence for idle_s is a stuck codex.
        argv = command(env, box, schema, last, launch)
        ran = shim.run_cli(argv, env, box, prompt, streams=True)
        events = parse_events(ran.stdout)
        check(ran, events)
        check_edits(events)
        check_tools(events)
        check_commands(events, launch)
        check_changes(events, launch, str(box.root))
        text = final_text(events, last)
    finally:
        shutil.rmtree(side, ignore_errors=True)
    answer = answer_of(text)
    answer["metrics"] = metrics.measured(answer.get("metrics"), _metrics(events))
    answer["prompt"] = prompt
    return answer


def parse_events(stdout: bytes) -> list[dict[str, Any]]:
    """The JSONL events; a line that is not a JSON object (a stray log line) is skipped."""
    events = []
    for line in stdout.splitlines():
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            events.append(doc)
    return events


def check(ran: shim.Ran, events: list[dict[str, Any]]) -> None:
    """Raise the error a failed run stands for.

    `error` events also report transient reconnects during a turn that then succeeds, so they
    only count when the run failed: a non-zero exit or a `turn.failed`.
    """
    failed = [e for e in events if e.get("type") == "turn.failed"]
    if ran.code == 0 and not failed:
        return
    messages = [_message(e) for e in events if e.get("type") in ("turn.failed", "error")]
    words = "; ".join(m for m in messages if m)
    if not words:
        tail = ran.stderr.decode("utf-8", "replace").strip()[-TAIL:]
        raise shim.ShimError(f"codex exited {ran.code}: {tail or 'no detail'}", "hard")
    message = f"codex exited {ran.code}: {words}"[:2000]
    if HARD_TEXT.search(words):
        raise shim.ShimError(message, "hard")
    if RETRYABLE_TEXT.search(words):
        raise shim.ShimError(message, "retryable")
    raise shim.ShimError(message, "hard")


def check_edits(events: list[dict[str, Any]]) -> None:
    """A file change codex reports as failed is a lost edit, whatever codex's exit code says
    (it exits 0 with its final message): retryable, as the next attempt may make it."""
    for event in events:
        item = event.get("item")
        if (
            event.get("type") == "item.completed"
            and isinstance(item, dict)
            and item.get("type") == "file_change"
            and item.get("status") != "completed"
        ):
            changes = item.get("changes")
            paths = [
                str(c.get("path"))[:200]
                for c in (changes if isinstance(changes, list) else [])
                if isinstance(c, dict)
            ]
            status = str(item.get("status"))[:40]
            raise shim.ShimError(
                f"codex's edit of {', '.join(paths) or 'a file'} ended {status}", "retryable"
            )


# Items of tools no role may use. codex 0.169 offers its collaboration tools whatever its
# features say: a subagent it started refuses the answer, as a command off the list does.
FORBIDDEN_ITEMS = {
    "collab_tool_call": "a subagent",
    "web_search": "web search",
    "web_search_call": "web search",
    "mcp_tool_call": "an MCP tool",
}


def check_tools(events: list[dict[str, Any]]) -> None:
    """Refuse the whole answer (hard) if codex reports using a tool no role may use."""
    for event in events:
        item = event.get("item")
        kind = item.get("type") if isinstance(item, dict) else None
        if isinstance(kind, str) and kind in FORBIDDEN_ITEMS:
            raise shim.ShimError(f"codex used {FORBIDDEN_ITEMS[kind]} ({kind}), which no role may")


def check_commands(events: list[dict[str, Any]], launch: shim.Launch) -> None:
    """Refuse the whole answer (hard) if codex ran a command the registry does not allow,
    or one the policy denies."""
    for event in events:
        item = event.get("item")
        if isinstance(item, dict) and item.get("type") == "command_execution":
            ran = str(item.get("command", ""))
            why = launch.refusal(ran)
            if why is not None:
                raise shim.ShimError(f"codex ran a command {why}: {ran[:200]}")


# A file codex adds or deletes is written, one it updates edited, as the policy's tools go.
CHANGE_TOOL = {"add": "write", "delete": "write", "update": "edit"}


def check_changes(events: list[dict[str, Any]], launch: shim.Launch, workspace: str) -> None:
    """Under a policy, refuse the whole answer (hard) if codex reports changing a file the
    policy's write or edit rules do not allow."""
    if launch.policy is None:
        return
    for event in events:
        item = event.get("item")
        if not (isinstance(item, dict) and item.get("type") == "file_change"):
            continue
        changes = item.get("changes")
        for change in changes if isinstance(changes, list) else []:
            if not isinstance(change, dict):
                continue
            tool = CHANGE_TOOL.get(str(change.get("kind")), "edit")
            path = str(change.get("path", ""))
            why = launch.policy.path_refusal(tool, path, workspace, str(shim.home()))
            if why is not None:
                raise shim.ShimError(f"codex's {tool} of {path[:200]} is refused: {why}")


def final_text(events: list[dict[str, Any]], last: Path) -> str:
    """The last agent_message of the run, else what codex wrote to the -o file."""
    for event in reversed(events):
        item = event.get("item")
        if (
            event.get("type") == "item.completed"
            and isinstance(item, dict)
            and item.get("type") == "agent_message"
            and isinstance(item.get("text"), str)
        ):
            return str(item["text"])
    if last.is_file():
        return last.read_text("utf-8", "replace")
    raise shim.ShimError("codex gave no final message")


def answer_of(text: str) -> dict[str, Any]:
    """The schema-shaped final message, back in the shape of the worker-output schema."""
    try:
        doc = orjson.loads(text.strip())
    except orjson.JSONDecodeError:
        raise shim.ShimError("codex's final message is not JSON") from None
    answer = shim.structured(doc)
    if isinstance(answer.get("metrics"), list):
        answer["metrics"] = {
            str(m["name"]): m.get("value")
            for m in answer["metrics"]
            if isinstance(m, dict) and "name" in m
        }
    elif not isinstance(answer.get("metrics"), dict):
        answer.pop("metrics", None)
    # Drop the nulls the strict schema made the model write; the output schema wants strings.
    for key, fields in (("plan", ("why",)), ("artifacts", ("type",))):
        items = answer.get(key)
        if isinstance(items, list):
            answer[key] = [
                {k: v for k, v in i.items() if not (k in fields and v is None)}
                if isinstance(i, dict)
                else i
                for i in items
            ]
    return answer


def _message(event: dict[str, Any]) -> str:
    err = event.get("error")
    if isinstance(err, dict) and err.get("message") is not None:
        return str(err["message"])
    if event.get("message") is not None:
        return str(event["message"])
    return ""


def _metrics(events: list[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for event in events:
        if event.get("type") == "thread.started" and event.get("thread_id") is not None:
            found["session_id"] = str(event["thread_id"])
    # One turn per exec call as a rule, but sum in case codex ever reports several.
    tokens = metrics.total(
        usage.get(key)
        for event in events
        if event.get("type") == "turn.completed" and isinstance(usage := event.get("usage"), dict)
        for key in ("input_tokens", "output_tokens")
    )
    if tokens is not None:
        found["tokens"] = tokens
    return found


def main(argv: list[str] | None = None) -> int:
    return shim.main("codex", work, version, argv)


if __name__ == "__main__":
    sys.exit(main())
