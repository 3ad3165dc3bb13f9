"""A worker that answers from a script file: for the demo, tests and benchmarks.

Usage: scripted-cli --script FILE [--agent-id ID]. The script holds
{"answers": [{"subtask": "T1", "retry": false, "exit": 0, "result": {...}}, ...]}; the
first answer whose subtask (and, if given, retry flag and loop round) matches the prompt is
played. An answer with "role": "audit" answers only a supervisor's call on that subtask.
An answer may instead carry "error" {message, kind}, or "raw" text printed verbatim, plus
"stderr", "sleep_s" (seconds from the worker's start to its answer) and "ignore_term" to
act out slow or stubborn agents. A call with no matching answer is a hard error, as is an
envelope that is not exactly two valid lines.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from harness import __version__
from harness.workers.envelopes import ShimError, read_envelope

RETRY = "constrained-retry"
AUDIT = "audit"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripted-cli")
    parser.add_argument("--version", action="store_true")
    parser.add_argument("--script", type=Path)
    parser.add_argument("--agent-id", default="scripted")
    # What harness gives any protocol worker the registry lets run commands; it runs none.
    parser.add_argument("--allow-command", action="append", default=[])
    args = parser.parse_args(argv)
    if args.version:
        print(f"scripted-cli {__version__}")
        return 0
    try:
        envelope = read_envelope(sys.stdin.buffer.read())
    except ShimError as exc:
        return _error(args.agent_id, "unknown", "1970-01-01T00:00:00Z", str(exc), "hard")
    task_id, ts, prompt = envelope.task_id, envelope.ts, envelope.prompt
    if args.script is None:
        return _error(args.agent_id, task_id, ts, "no --script given", "hard")
    answer = _match(orjson.loads(args.script.read_bytes())["answers"], prompt["payload"])
    if answer is None:
        sub = prompt["payload"].get("subtask")
        return _error(args.agent_id, task_id, ts, f"unexpected call for {sub}", "hard")
    return _play(answer, args.agent_id, task_id, ts)


def _match(answers: list[dict[str, Any]], payload: dict[str, Any]) -> dict[str, Any] | None:
    """The first answer for the prompt's subtask and retry flag; a supervisor's call (role
    audit) takes only an answer marked "role": "audit", and a worker's only one not."""
    retry = RETRY in payload["constraints"]
    audit = payload["role"] == AUDIT
    blobs = {b["name"]: b["text"] for b in payload["inputs"]["blobs"]}
    # A looped subtask's round: "Round N of ..." from harness, 1 before it says.
    loop = blobs.get("harness/loop.txt", "Round 1 ").split()
    round_ = int(loop[1]) if len(loop) > 1 and loop[1].isdigit() else 1
    for answer in answers:
        if (
            answer["subtask"] == payload.get("subtask")
            and answer.get("retry", retry) == retry
            and answer.get("round", round_) == round_
            and (answer.get("role") == AUDIT) == audit
        ):
            return answer
    return None


def _play(answer: dict[str, Any], agent_id: str, task_id: str, ts: str) -> int:
    if answer.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if answer.get("stderr"):
        sys.stderr.write(answer["stderr"])
        sys.stderr.flush()
    # An agent that takes sleep_s seconds to answer takes them from its start, imports and
    # all: a call of 2 s lasts 2 s, as the benchmarks' ideal times assume.
    time.sleep(max(0.0, float(answer.get("sleep_s", 0)) - _age()))
    code = int(answer.get("exit", 0))
    if "raw" in answer:
        sys.stdout.write(answer["raw"])
        return code
    out: dict[str, Any] = {"ts": ts, "task_id": task_id, "agent_id": agent_id}
    if "error" in answer:
        out |= {"status": "error", "error": answer["error"]}
        code = int(answer.get("exit", 1 if answer["error"]["kind"] == "retryable" else 2))
    else:
        out |= {"status": "ok", "result": answer.get("result", {})}
    sys.stdout.buffer.write(orjson.dumps(out, option=orjson.OPT_SORT_KEYS) + b"\n")
    return code


def _age() -> float:
    """Seconds since this process started (its launcher's fork), or 0 when /proc cannot
    tell."""
    try:
        # The fields after the command's name, whose closing parenthesis is the last one;
        # the start time, in clock ticks since boot, is the 22nd field of the line.
        fields = Path("/proc/self/stat").read_bytes().rpartition(b")")[2].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)


def _error(agent_id: str, task_id: str, ts: str, message: str, kind: str) -> int:
    out = {
        "ts": ts,
        "task_id": task_id,
        "agent_id": agent_id,
        "status": "error",
        "error": {"message": message, "kind": kind},
    }
    sys.stdout.buffer.write(orjson.dumps(out, option=orjson.OPT_SORT_KEYS) + b"\n")
    return 2 if kind == "hard" else 1


if __name__ == "__main__":
    sys.exit(main())
