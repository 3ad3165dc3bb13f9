"""The worker verdict: one schema-valid line that agrees with the exit code; and what is
recorded of an agent's output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.boundary import proc, worker
from harness.boundary.registry import Agent
from harness.spec.limits import Limits

LIMITS = (2000, 100)


def answer(**fields: Any) -> dict[str, Any]:
    base = {
        "ts": "2026-01-01T00:00:00Z",
        "task_id": "demo",
        "agent_id": "scripted",
        "status": "ok",
        "result": {"diffs": [], "notes": []},
    }
    return {k: v for k, v in (base | fields).items() if v is not ...}


def line(doc: object) -> bytes:
    return orjson.dumps(doc) + b"\n"


ERROR_R = answer(status="error", result=..., error={"message": "later", "kind": "retryable"})
ERROR_H = answer(status="error", result=..., error={"message": "never", "kind": "hard"})
TWO_ARTIFACTS = answer(
    result={"artifacts": [{"name": "a.md", "content": "1"}, {"name": "a.md", "content": "2"}]}
)


@pytest.mark.parametrize(
    ("stdout", "code", "timed_out", "status", "kind"),
    [
        pytest.param(line(answer()), 0, None, "ok", None, id="ok-exit0"),
        pytest.param(orjson.dumps(answer()), 0, None, "ok", None, id="ok-no-newline"),
        pytest.param(line(answer()), 1, None, "error", "format", id="ok-exit1"),
        pytest.param(line(ERROR_R), 1, None, "error", "retryable", id="retryable-exit1"),
        pytest.param(line(ERROR_R), 2, None, "error", "format", id="retryable-exit2"),
        pytest.param(line(ERROR_H), 2, None, "error", "hard", id="hard-exit2"),
        pytest.param(line(ERROR_H), 1, None, "error", "format", id="hard-exit1"),
        pytest.param(line(ERROR_H), 0, None, "error", "format", id="hard-exit0"),
        pytest.param(line(answer()) * 2, 0, None, "error", "format", id="two-lines"),
        pytest.param(line(answer()) + b"\n", 0, None, "error", "format", id="two-newlines"),
        pytest.param(b"", 0, None, "error", "format", id="empty"),
        pytest.param(b"{not json\n", 0, None, "error", "format", id="invalid-json"),
        pytest.param(line(answer(result=...)), 0, None, "error", "format", id="ok-no-result"),
        pytest.param(
            line(answer(error={"message": "m", "kind": "hard"})),
            0,
            None,
            "error",
            "format",
            id="ok-with-error",
        ),
        pytest.param(
            line(answer(status="error", result=...)),
            1,
            None,
            "error",
            "format",
            id="error-without-error",
        ),
        pytest.param(line(answer(task_id="other")), 0, None, "error", "format", id="task-id"),
        pytest.param(line(answer(agent_id="other")), 0, None, "error", "format", id="agent-id"),
        pytest.param(line(answer(extra=1)), 0, None, "error", "format", id="extra-field"),
        pytest.param(
            line(answer(result={"notes": ["x" * 3000]})), 0, None, "error", "format", id="oversize"
        ),
        pytest.param(
            line(answer(result={"artifacts": [{"name": "a.md", "content": "x" * 101}]})),
            0,
            None,
            "error",
            "format",
            id="artifact-oversize",
        ),
        pytest.param(
            line(answer(result={"artifacts": [{"name": "a.md", "content": "x" * 100}]})),
            0,
            None,
            "ok",
            None,
            id="artifact-at-limit",
        ),
        pytest.param(line(TWO_ARTIFACTS), 0, None, "error", "format", id="duplicate-artifacts"),
        pytest.param(
            line(answer(result={"artifacts": [{"name": "../x", "content": "1"}]})),
            0,
            None,
            "error",
            "format",
            id="artifact-path-name",
        ),
        pytest.param(line(answer()), -9, "hard", "error", "timeout", id="timed-out"),
        pytest.param(b"", -15, "soft", "error", "timeout", id="timed-out-silent"),
    ],
)
def test_judge(
    stdout: bytes, code: int, timed_out: str | None, status: str, kind: str | None
) -> None:
    outcome = worker.judge(stdout, code, timed_out, "demo", "scripted", LIMITS)
    assert (outcome.status, outcome.kind) == (status, kind), outcome.message
    if status == "ok":
        assert outcome.result == orjson.loads(stdout)["result"]
    else:
        assert outcome.message


MAX = 1000


def flooding(tmp_path: Path, script: str) -> Agent:
    exe = tmp_path / "agent"
    exe.write_text(f"#!/bin/sh\n{script}\n")
    exe.chmod(0o755)
    return Agent("flood", str(exe), ">=0", ("codegen",), (), ("HARNESS_TEST_KEY",), None)


def call(tmp_path: Path, agent: Agent) -> tuple[worker.Outcome, Path]:
    folder, home = tmp_path / "call", tmp_path / "home"
    folder.mkdir()
    home.mkdir()
    (folder / "stdin").write_bytes(b"{}\n")
    timeouts = {"soft_s": 30.0, "hard_s": 60.0}
    ran = worker.run(agent, tmp_path, tmp_path, home, folder, timeouts, None, MAX)
    stdout = (folder / "stdout.ndjson").read_bytes()
    outcome = worker.judge(stdout, ran.code, ran.timed_out, "T", agent.id, (MAX, MAX))
    return outcome, folder


def test_a_flooded_answer_is_cut_just_past_the_limit_and_judged_too_long(tmp_path: Path) -> None:
    outcome, folder = call(tmp_path, flooding(tmp_path, "yes '{}' | head -c 50000000"))
    assert (outcome.kind, outcome.message) == ("format", f"output over {MAX} bytes")
    assert (folder / "stdout.ndjson").stat().st_size == MAX + 1


def test_a_cut_stderr_says_so_and_stays_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_TEST_KEY", "sk-canary-123")
    agent = flooding(tmp_path, "echo $HARNESS_TEST_KEY >&2; yes noise | head -c 50000000 >&2")
    _, folder = call(tmp_path, agent)
    log = (folder / "stderr.log").read_bytes()
    assert log.startswith(b"[REDACTED]\nnoise\n") and b"sk-canary" not in log
    assert log.endswith(f"\n[harness: output cut at {MAX + 1} bytes]\n".encode())
    assert len(log) < 2 * MAX


@pytest.mark.parametrize("cut", [True, False], ids=["cut", "whole"])
def test_a_secret_cut_in_half_at_the_end_is_blanked_too(tmp_path: Path, cut: bool) -> None:
    path = tmp_path / "stderr.log"
    path.write_bytes(b"key sk-live-123456 then sk-live-12")
    worker.redact(path, ["sk-live-123456"], cut)
    tail = b"[REDACTED]" if cut else b"sk-live-12"
    assert path.read_bytes() == b"key [REDACTED] then " + tail


def test_a_call_over_a_limit_fails_hard_with_its_line_whatever_it_printed() -> None:
    agent = Agent("big", "x", ">=0", ("codegen",), (), (), None, limits={"memory": 16 << 30})
    ended = proc.Result(code=-9, timed_out=None, duration_s=1.0, over="memory")
    said = worker.over(agent, Limits(), ended)
    assert said is not None and "more than 16GiB" in said and "agent big" in said
    outcome = worker.judge(line(answer()), -9, None, "demo", "scripted", LIMITS, said)
    assert (outcome.status, outcome.kind, outcome.message) == ("error", "hard", said)
    # The twin: a call that went over nothing is judged on its answer.
    fine = proc.Result(code=0, timed_out=None, duration_s=1.0)
    assert worker.over(agent, Limits(), fine) is None
    assert worker.judge(line(answer()), 0, None, "demo", "scripted", LIMITS).status == "ok"
