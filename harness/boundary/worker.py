"""Running a registry agent on one envelope, and judging what it printed."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from harness.base import schemas
from harness.boundary import proc, sandbox
from harness.boundary.registry import Agent
from harness.spec.limits import Limits, message

EXIT_KIND = {1: "retryable", 2: "hard"}


@dataclass(frozen=True)
class Outcome:
    """The verdict on one call: ok with a result, or an error of a kind."""

    status: str  # "ok" | "error"
    kind: str | None = None  # retryable | hard | format | timeout
    message: str | None = None
    result: dict[str, Any] = field(default_factory=dict)
    cli_argv: tuple[str, ...] | None = None  # the command line a shim ran its CLI with
    retry_after_s: float | None = None  # how long the model API asked a retry to wait


def env_for(agent: Agent, home: Path) -> dict[str, str]:
    """The small base plus the agent's allowlisted names."""
    return proc.base_env(home, agent.env)


def run(
    agent: Agent,
    root: Path,
    cwd: Path,
    home: Path,
    folder: Path,
    timeouts: dict[str, float],
    box: sandbox.Box | None,
    max_output: int | None = None,
    held: proc.Ready | None = None,
) -> proc.Result:
    """Start the agent in its sandbox with `folder/stdin` as its stdin; output goes to
    files in `folder`.

    Each file keeps at most `max_output` + 1 bytes (proc's default cap without it): one
    byte more than an answer may have, so an answer that was cut is still judged too long.
    The values of the variables the agent was allowed to see are then blanked out of both
    output files, so a key the agent echoes is never recorded. `held` is its sandbox started
    ahead (held.Held).
    """
    cap = proc.CAP if max_output is None else max_output + 1
    result = proc.run(
        agent.argv(root),
        cwd=cwd,
        env=env_for(agent, home),
        stdin=folder / "stdin",
        stdout=folder / "stdout.ndjson",
        stderr=folder / "stderr.log",
        soft_s=timeouts["soft_s"],
        hard_s=timeouts["hard_s"],
        box=box,
        cap=cap,
        held=held,
    )
    secrets = [os.environ[name] for name in agent.env if len(os.environ.get(name, "")) >= 6]
    for name, stream in (("stdout.ndjson", "stdout"), ("stderr.log", "stderr")):
        redact(folder / name, secrets, stream in result.truncated)
    # The answer stays as the agent wrote it; its length already tells the judge.
    if "stderr" in result.truncated:
        proc.mark_cut(folder / "stderr.log", cap)
    return result


def redact(path: Path, secrets: list[str], cut: bool = False) -> None:
    """Blank every secret out of the file; when its end was cut, a secret's first part
    left at the very end too."""
    data = path.read_bytes()
    cleaned = data
    for secret in sorted(secrets, key=len, reverse=True):
        cleaned = cleaned.replace(secret.encode(), b"[REDACTED]")
    if cut:
        for secret in sorted(secrets, key=len, reverse=True):
            raw = secret.encode()
            kept = next((k for k in range(len(raw) - 1, 0, -1) if cleaned.endswith(raw[:k])), 0)
            if kept:
                cleaned = cleaned[:-kept] + b"[REDACTED]"
                break
    if cleaned != data:
        path.write_bytes(cleaned)


def over(agent: Agent, limits: Limits, result: proc.Result) -> str | None:
    """The line a call that went over a limit of its sandbox fails with (`limits`, the
    config's, under the agent's own), or None."""
    if result.over is None:
        return None
    return message(result.over, limits.merged(agent.limits), agent.id)


def judge(
    stdout: bytes,
    code: int,
    timed_out: str | None,
    task_id: str,
    agent_id: str,
    limits: tuple[int, int],
    over: str | None = None,
) -> Outcome:
    """Exactly one schema-valid JSON line whose status agrees with the exit code, or a
    failure. A call `over` a limit of its sandbox (over()) failed hard: the same call would
    go over again, and the line says which setting raises it."""
    max_bytes, max_artifact = limits
    if over is not None:
        return Outcome("error", "hard", over)
    if timed_out is not None:
        return Outcome("error", "timeout", f"killed after the {timed_out} timeout")
    if len(stdout) > max_bytes:
        return Outcome("error", "format", f"output over {max_bytes} bytes")
    lines = stdout.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) != 1:
        return Outcome("error", "format", f"expected exactly one output line, got {len(lines)}")
    try:
        answer = orjson.loads(lines[0])
    except orjson.JSONDecodeError as exc:
        return Outcome("error", "format", f"output is not JSON: {exc}")
    problem = schemas.problem("worker-output", answer)
    if problem is not None:
        return Outcome("error", "format", f"output violates the schema: {problem}")
    if answer["task_id"] != task_id or answer["agent_id"] != agent_id:
        return Outcome("error", "format", "output names another task or agent")
    cli_argv = tuple(answer["cli_argv"]) if "cli_argv" in answer else None
    if answer["status"] == "ok":
        if code != 0:
            return Outcome("error", "format", f"status ok with exit code {code}")
        names = [a["name"] for a in answer["result"].get("artifacts", [])]
        if len(set(names)) != len(names):
            return Outcome("error", "format", "two artifacts share a name")
        sizes = [len(a["content"].encode()) for a in answer["result"].get("artifacts", [])]
        if any(size > max_artifact for size in sizes):
            return Outcome("error", "format", f"an artifact is over {max_artifact} bytes")
        return Outcome("ok", result=answer["result"], cli_argv=cli_argv)
    kind, message = answer["error"]["kind"], answer["error"]["message"]
    if EXIT_KIND.get(code) != kind:
        return Outcome("error", "format", f"error kind {kind} with exit code {code}")
    wait = answer["error"].get("retry_after_s") if kind == "retryable" else None
    return Outcome("error", kind, message, cli_argv=cli_argv, retry_after_s=wait)
