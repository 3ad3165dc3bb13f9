"""The legal order of a task's events, written down once (DESIGN §4, §9).

Every command that needs to know what a log says asks this model: the orchestrator what
already happened (so a killed step is finished, never redone), audit whether the order is
legal, status, log and report how to describe it. It is fed one event at a time and keeps
state per subtask, never per event, so a log of any length is judged in one pass.
Model feeds itself here; what it keeps and answers is state.py, the rule for each of a
subtask's events rules.py, the parts they speak of (Attempt, Step, Finding) attempts.py.

The words, defined here and nowhere else:
- epoch: the events since the last blocker_resolved. A person cleared a blocker, so every
  subtask not yet done starts afresh: attempt 1, a new call.
- attempt: within an epoch, a subtask's events from its first (or from a subagent_retried
  or subagent_fallback) up to the next of those. One call at most; two attempts at most per
  agent per epoch. A fallback hands the subtask to the next agent its plan lists once the
  current one failed for good.
- outcome: how an attempt ended: "completed" (step_completed), "failed" (the failure that
  ended it, or the step_failed of a refusal), or "in progress".
- verdict: a supervisor's (an audit agent's call, or a person's) word on an attempt's checked
  change before it counts: step_approved, step_reoriented (a retry with its correction) or
  step_paused (the task stops for a person).
- round: a looped subtask's calls, one after another on the head the last one left, each
  ended by loop_continued or, the last, by step_completed; each round has its own attempts.
  Rounds outlive an epoch: a loop resumed goes on at the round that failed, its bound the
  plan's, never counted afresh, and its earlier rounds' files stay its own to change.
- end: how a subtask left the epoch: done (step_completed), failed (step_failed; with
  on_error "continue" or "skip_dependents" the task goes on without it), or skipped
  (step_skipped: a dependency failed or was skipped under "skip_dependents").
"""

from __future__ import annotations

from typing import Any

from harness.record.attempts import (
    CHECK_FAILED,
    CHECK_PASSED,
    CONTINUE,
    FAILURES,
    HUMAN,
    MAX_ATTEMPTS,
    NO_DETAILS,
    NO_VERDICT,
    RETRYABLE_KINDS,
    SKIP_DEPENDENTS,
    STEP_EVENTS,
    VERDICTS,
    Attempt,
    Event,
    Finding,
    Findings,
    Step,
    retryable,
    short,
)
from harness.record.rules import RULES
from harness.record.state import State
from harness.record.tables import Completed

# The words are used from here, where they are defined.
__all__ = [
    "CHECK_FAILED",
    "CHECK_PASSED",
    "CONTINUE",
    "FAILURES",
    "HUMAN",
    "MAX_ATTEMPTS",
    "NO_VERDICT",
    "RETRYABLE_KINDS",
    "SKIP_DEPENDENTS",
    "STEP_EVENTS",
    "VERDICTS",
    "Attempt",
    "Completed",
    "Event",
    "Finding",
    "Model",
    "retryable",
    "short",
]

_RUNNING: tuple[str, str | None] = ("running", None)


class Model(State):
    """A task's log as far as it has been fed: what happened, and what broke the order."""

    def feed(self, seq: int, ev: Event) -> list[Finding]:
        """Take the next event; return what about it breaks the order (empty when legal).

        The model goes on after a finding, so one broken line is one finding."""
        out = Findings()
        name = ev["event"]
        if self.fed == 0 and name != "task_started":
            out.order("the log does not begin with task_started")
        self.fed += 1
        details = ev.get("details", NO_DETAILS)
        if details.get("contained") is False:
            self.uncontained += 1
        if self.completed is not None:
            out.order(f"{name} after task_completed (seq {self.completed})")
        if self.blocked_at is not None and name != "blocker_resolved":
            out.order(f"{name} while the task is blocked (seq {self.blocked_at})")
        if name not in STEP_EVENTS:
            self._task_event(seq, ev, name, out)
            return out
        step = ev.get("step")
        if step is None:
            out.order(f"{name} names no step")
            return out
        if self.subtasks is not None and step not in self.subtasks:
            out.append(Finding("plan", f"step {step} is not a subtask of the plan"))
        if step in self.done:
            seen = self.done[step].at
            out.order(f"{name} for {step} after its step_completed (seq {seen})")
            return out
        self.seen[step] = _RUNNING
        st = self.steps.get(step)
        if st is None:
            rounds, made = self.carried.pop(step, (1, frozenset()))
            st = self.steps[step] = Step(self.new_attempt(step, 1), rounds=rounds, made=made)
        elif st.failed_at is not None:
            out.order(f"{name} for {step} after its step_failed (seq {st.failed_at})")
        elif st.skipped is not None:
            out.order(f"{name} for {step} after its step_skipped")
        RULES[name](self, seq, ev, step, st, details, out)
        return out

    def _task_event(self, seq: int, ev: Event, name: str, out: Findings) -> None:
        if name == "task_started":
            if self.started is not None:
                out.order(f"task_started again (first at seq {self.started})")
            else:
                self.started = seq
        elif name == "task_completed":
            missing = [s for s in self.subtasks or () if s not in self.done]
            if missing:
                shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
                out.order(f"task_completed before {len(missing)} subtask(s): {shown}")
            if self.completed is None:
                self.completed = seq
        elif name == "blocker_encountered":
            step = ev.get("step")
            st = self.steps.get(step) if isinstance(step, str) else None
            if step is None and "budget" in ev.get("details", NO_DETAILS):
                # A run out of budget takes its calls first, and ends the plan it runs.
                for waiting, _ in self.unanswered():
                    out.order(f"blocker_encountered for a budget while {waiting} awaits its call")
                for running, st in self.steps.items():
                    if st.attempt.unit is not None and st.failed is None:
                        out.order(f"blocker_encountered for a budget while {running} runs a plan")
            else:
                self._halt(step, st, out)
            self.blocker, self.blocked_at = ev, seq
        elif name == "blocker_resolved":
            if self.blocker is None:
                out.order("blocker_resolved while the task is not blocked")
            self.blocker = self.blocked_at = None
            for step, att in self.unanswered():
                out.order(
                    f"call {short(att.call_id)} of {step} has no outcome", self.invoked_at(att)
                )
            self.epoch += 1
            # A loop goes on where it stopped: a person cleared the failure, not the rounds.
            self.carried.update(
                (step, (st.rounds, st.made)) for step, st in self.steps.items() if st.rounds > 1
            )
            self.steps.clear()

    def _halt(self, step: Any, st: Step | None, out: Findings) -> None:
        """A blocker for failures: at the subtask that failed under "stop", or for the task
        (no step) once nothing can run; either way every subtask of the epoch settled. One
        finding at most: one line wrong is one finding."""
        stopped = [s for s in self.steps if self.stops(s)]
        left = [s for s in self.subtasks or () if not self.resolved(s)]
        if step is None and stopped:
            found = f"blocker_encountered for the task while {stopped[0]} stops it"
        elif step is None and not self.ended():
            found = "blocker_encountered for the task while no subtask failed"
        elif step is None and left:
            found = f"blocker_encountered for the task while {left[0]} may still run"
        elif step is not None and (st is None or st.failed is None):
            found = f"blocker_encountered for {step} without its step_failed"
        else:
            unsettled = self.unsettled()
            if unsettled is None:
                return
            found = f"blocker_encountered while {unsettled}"
        out.order(found)
