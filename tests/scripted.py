"""An in-process worker for fast orchestrator tests: it answers from a script, and a call
the script does not expect, or an answer the run leaves unused, fails the test."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from harness.base import folders
from harness.base.clock import SteppingClock
from harness.base.errors import Halted
from harness.boundary import proc
from harness.boundary.registry import Agent
from harness.importers import demo
from harness.repository.layout import Layout
from harness.repository.repo import Repo
from harness.step import orchestrator, units
from harness.step.task import Task

CLOCK = "2026-01-01T00:00:00Z"

# What a scripted answer may be: a result with diffs, a result without, a failure kind.
DIFF, NO_DIFF, TIMEOUT = "diff", "no-diff", "timeout"


class Scripted:
    """Answers per subtask, played in order: a dict result, or one of DIFF (a new file named
    for the subtask and which of its calls this is), NO_DIFF, TIMEOUT, or a failure kind
    ("retryable", "hard"). Calls may come from several pool threads at once: the script is
    taken under a lock, and nothing an answer holds depends on the order calls arrive in
    (a subtask's own calls are one after another). `delays` holds each subtask's seconds
    before it answers, so a test can make calls end in an order of its choosing. `again`:
    a call made again under its call_id (a run halted or killed with it in flight) gets
    the answer it got before, as a deterministic worker would give."""

    def __init__(
        self,
        answers: Mapping[str, Iterable[str | dict[str, Any]]],
        delays: Mapping[str, float] | None = None,
        again: bool = False,
    ) -> None:
        self.answers = {sid: list(queue) for sid, queue in answers.items()}
        self.delays = dict(delays or {})
        self.calls: list[str] = []  # in the order they arrived: timing's, with several slots
        self.asked: dict[str, int] = {}  # subtask -> its calls so far
        self.lock = threading.Lock()
        self.again = again
        self.given: dict[str, tuple[str | dict[str, Any], int]] = {}  # call_id -> answer, n

    def probe(self, agent: Agent, scratch: Path) -> str:
        return "scripted 1.0.0"

    def call(
        self,
        agent: Agent,
        git: Repo,
        base: str,
        staging: Path,
        timeouts: dict[str, float],
        scratch: Path,
    ) -> proc.Result:
        context, prompt = (
            orjson.loads(line) for line in (staging / "stdin").read_bytes().splitlines()
        )
        sid, call_id = prompt["payload"]["subtask"], context["payload"]["call_id"]
        with self.lock:
            if self.again and call_id in self.given:
                answer, n = self.given[call_id]
            else:
                queue = self.answers.get(sid)
                assert queue, f"unexpected call for {sid}"
                answer = queue.pop(0)
                n = self.asked[sid] = self.asked.get(sid, 0) + 1
                self.given[call_id] = answer, n
            self.calls.append(sid)
        if self.delays.get(sid):
            time.sleep(self.delays[sid])
        head = {"ts": prompt["ts"], "task_id": prompt["task_id"], "agent_id": agent.id}
        code, timed_out, line = 0, None, b""
        if answer == TIMEOUT:
            code, timed_out = -15, "soft"
        elif isinstance(answer, dict) or answer in (DIFF, NO_DIFF):
            result = answer if isinstance(answer, dict) else _result(answer, sid, n)
            line = orjson.dumps({**head, "status": "ok", "result": result})
        else:
            error = {"message": f"scripted {answer}", "kind": answer}
            code = 1 if answer == "retryable" else 2
            line = orjson.dumps({**head, "status": "error", "error": error})
        (staging / "stdout.ndjson").write_bytes(line + b"\n" if line else b"")
        return proc.Result(code, timed_out, 0.0)

    def assert_used(self) -> None:
        left = {sid: queue for sid, queue in self.answers.items() if queue}
        assert not left, f"answers never asked for: {left}"


def _result(kind: str, sid: str, n: int) -> dict[str, Any]:
    """A result; with DIFF, a new file named for the subtask and its `n`th call."""
    diffs = []
    if kind == DIFF:
        path = f"src/made_{sid.lower()}_{n}.py"
        patch = (
            f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1 @@\n+VALUE = {n}\n"
        )
        diffs.append({"file": path, "patch": patch})
    return {"diffs": diffs, "artifacts": [], "notes": []}


def repository(where: Path, subtasks: list[dict[str, Any]]) -> Path:
    """The demo's repository with checks off (these tests are about the step's decisions,
    not verification) and this plan for task demo."""
    root = where / "repo"
    folders.remove(root)
    root.mkdir(parents=True)
    demo.build(root)
    layout = Layout(root)
    layout.config.write_text('[identity]\nname = "harness"\nemail = "harness@example.invalid"\n')
    doc = {"task_id": "demo", "created": "2026-01-01T00:00:00Z", "subtasks": subtasks}
    layout.plan("demo").write_bytes(orjson.dumps(doc))
    return root


def load(root: Path, worker: Scripted, task_id: str = "demo") -> Task:
    task = Task.load(Layout(root), task_id, SteppingClock(CLOCK))
    task.worker = worker
    return task


def run(
    root: Path,
    worker: Scripted,
    task_id: str = "demo",
    resumes: int = 10,
    slots: int = 1,
    ahead: bool = True,
) -> list[str]:
    """Step the task in-process to completion, `slots` calls in flight at once, resuming
    each blocker as a person would (`harness resume`), at most `resumes` times; the subtask
    ids each step did. `ahead` False: `run --serial-checks`."""
    task = load(root, worker, task_id)
    task.ahead = ahead
    done: list[str] = []
    try:
        while True:
            try:
                for finished in orchestrator.steps(task, once=False, slots=slots):
                    if finished is None:
                        return done
                    done.append(finished.subtask)
            except Halted:
                if task.model.blocker is None or resumes == 0:
                    raise
                resumes -= 1
                units.resume(task, "test")
    finally:
        task.git.close()
