"""One subtask's step as its phases share it (phases.py runs them in order): the task, the
plan's subtask, the base the run fixed and the account asked before each call; how a phase
logs a failure and tells its end; what the log says of the attempt's history.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.boundary import proc
from harness.boundary.registry import Agent
from harness.checks.sequence import Verdict, Work
from harness.record import envelope, exchanges, protocol
from harness.spec import plan as plan_mod
from harness.step import budgets
from harness.step.task import Task

Event = dict[str, Any]

# The longest a retry waits for the model API's retry-after: harness owns time.
MAX_BACKOFF_S = 60.0


@dataclass
class Flight:
    """A call launched and not yet taken: its process runs in a pool thread, or, when the
    exchange holds its answer already (a resumed or replayed call), nothing runs."""

    att: protocol.Attempt
    agent: Agent
    call: envelope.Call
    slot: int  # which worker folder it uses
    recorded: exchanges.Exchange | None = None  # its answer, when the exchange holds it
    future: Future[proc.Result] | None = None
    staging: Path | None = None
    # Its subagent_invoked logged by this process: no earlier run can have committed it.
    new: bool = False


class Ahead(Protocol):
    """Checks run ahead of their turn (ahead.py): a change's verdict, taken from a run
    already made on exactly its trees, or run now."""

    def checked(self, work: Work) -> Verdict: ...


class Subtask:
    """One subtask's step as its phases share it, and the attempt's history as its log says."""

    def __init__(
        self,
        task: Task,
        sub: plan_mod.Subtask,
        base: str | None,
        account: budgets.Account,
        several: bool = False,
        ahead: Ahead | None = None,
    ) -> None:
        self.task = task
        self.sub = sub
        self.log = task.log
        self.base = base  # fixed by the run (Run.base); None: the head at launch
        self.account = account  # asked before each new call
        self.several = several  # other calls may be in flight beside this one
        self.ahead = ahead  # where its checks run, when the run checks ahead

    def agent_id(self) -> str | None:
        """The agent this subtask calls now: the plan's, or its fallback after a failure."""
        return self.sub.agent_at(self.task.model.fallbacks(self.sub.id))

    def fail(self, reason: str, phase: str) -> None:
        details = {"phase": phase}
        if self.sub.on_error != "stop":  # the task goes on without this subtask
            details["on_error"] = self.sub.on_error
        self.error("step_failed", details, reason)

    def error(self, event: str, details: dict[str, Any], reason: str | None) -> None:
        self.log.append(event, "error", step=self.sub.id, details=details, error=reason)

    def phase(self, name: str, ok: bool, outcome: str | None = None) -> bool:
        """Tell the live reporter a phase ended; `ok` back, so a check stays one line."""
        self.task.live.ended(self.sub.id, name, ok, outcome)
        self.task.trace.phase(self.sub.id, name, ok, outcome)
        return ok

    def backoff(self, att: protocol.Attempt) -> float:
        """Seconds to wait before this attempt's call: what the model API asked of the call
        it retries (its retry-after), at most MAX_BACKOFF_S; nothing otherwise."""
        failed = self.previous_failure(att)
        asked = failed.get("details", {}).get("retry_after_s") if failed is not None else None
        return min(float(asked), MAX_BACKOFF_S) if isinstance(asked, int | float) else 0.0

    def retried_call(self, att: protocol.Attempt) -> str | None:
        """The call this attempt retries (the same agent's, after a failure), or None."""
        if self.previous_failure(att) is None:
            return None
        for ev in reversed(self.task.log.events):
            if ev.get("step") == self.sub.id and ev["event"] == "subagent_retried":
                found = ev.get("details", {}).get("call_id")
                return found if isinstance(found, str) else None
        return None

    def session_store(self, call_id: str) -> Path:
        """Where harness keeps the session store a call of a resuming agent left."""
        return self.task.layout.state / "sessions" / self.task.task_id / call_id

    def previous_failure(self, att: protocol.Attempt) -> Event | None:
        """The failure this attempt retries; None for a first attempt (a fallback agent's,
        or a loop round's, too: the failure was another agent's or round's)."""
        mine = self.task.model.step(self.sub.id)
        return None if mine is None or att.number == mine.first else mine.last_failure


def slot_folder(slot: int) -> str:
    """One folder per slot: a worker's copy is moved between bases, not made afresh."""
    return "worker" if slot == 0 else f"worker-{slot}"


def token_of(call: envelope.Call) -> str | None:
    scope_value: str = call.prompt["payload"]["write_scope"]
    return scope_value.removeprefix("token:") if scope_value.startswith("token:") else None
