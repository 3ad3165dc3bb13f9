"""What a task's log says so far: the state protocol.Model keeps per subtask, never per event,
and every query a reader or the orchestrator asks of it."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from harness.record.attempts import (
    CONTINUE,
    FAILURES,
    MAX_ATTEMPTS,
    SKIP_DEPENDENTS,
    Attempt,
    Event,
    Step,
    detail,
    short,
)
from harness.record.tables import Calls, Done, compact


class State:
    """What a task's log says as far as it has been fed, per subtask, and the queries on it
    (protocol.Model feeds it, the rules in rules.py change it)."""

    def __init__(
        self, subtasks: Mapping[str, Collection[str]] | None = None, history: bool = False
    ) -> None:
        self.subtasks = subtasks  # the plan's ids and what each depends on, when known
        self.fed = 0
        self.epoch = 0
        self.started: int | None = None  # seq of task_started
        self.completed: int | None = None  # seq of task_completed
        self.blocker: Event | None = None  # the blocker_encountered in force
        self.blocked_at: int | None = None
        # Per subtask, never per event: what a later query needs of its events, not them.
        self.done = Done()
        self.steps: dict[str, Step] = {}  # the current epoch's subtasks not done
        # a looped subtask an earlier epoch left mid-loop -> its round and Step.made, until
        # it runs again
        self.carried: dict[str, tuple[int, frozenset[str]]] = {}
        # subtask not done -> (its status, why) as its latest event says: running, failed
        # (its step_failed's error) or skipped (the dependency it was skipped for)
        self.seen: dict[str, tuple[str, str | None]] = {}
        # call_id -> (seq of its subagent_invoked, "ok" | the failure's kind | "" while none),
        # the id compact (tables.compact): one per call of a log of any length
        self.calls = Calls()
        self.uncontained = 0  # events that ran with the sandbox off
        self.history: dict[str, list[Attempt]] | None = {} if history else None

    # -- queries -----------------------------------------------------------------------------

    def attempt(self, step: str) -> Attempt:
        """The subtask's attempt in progress (a fresh one when it has none this epoch)."""
        found = self.steps.get(step)
        return found.attempt if found is not None else Attempt(1, self.epoch)

    def step(self, step: str) -> Step | None:
        return self.steps.get(step)

    def status(self, step: str) -> str:
        """pending, running, done, failed, skipped or blocked."""
        if step in self.done:
            return "done"
        if step not in self.seen:
            return "pending"
        if self.blocker is not None and self.blocker.get("step") == step:
            return "blocked"
        st = self.steps.get(step)
        if st is not None and st.attempt.awaiting:
            return "awaiting approval"
        return self.seen[step][0]

    def reason(self, step: str) -> str | None:
        """Why the subtask is blocked, failed or skipped, as the log says."""
        status = self.status(step)
        if status == "blocked" and self.blocker is not None:
            return str(self.blocker.get("error", "see the log"))
        if status == "awaiting approval":
            asked = self.steps[step].attempt.last("approval_requested")
            base, tree = (short(detail(asked, k)) for k in ("base", "tree"))
            what = (
                f"`git diff {base} {tree}`"
                if detail(asked, "tree") is not None
                else f"the answer of call {short(detail(asked, 'call_id'))} (it changes no file)"
            )
            return f"review {what}, then `harness approve` or `harness reject`"
        return self.seen[step][1] if status in ("failed", "skipped") else None

    def goes_on(self, step: str) -> bool:
        """Whether the subtask's dependents may run: it is done, or it failed this epoch
        under on_error "continue"."""
        if step in self.done:
            return True
        st = self.steps.get(step)
        return st is not None and detail(st.failed, "on_error") == CONTINUE

    def resolved(self, step: str) -> bool:
        """Done, or failed or skipped in the current epoch: nothing more runs of it."""
        st = self.steps.get(step)
        return step in self.done or (st is not None and (st.failed or st.skipped) is not None)

    def stops(self, step: str) -> bool:
        """Failed this epoch under on_error "stop" (the default): the task halts for it."""
        st = self.steps.get(step)
        return (
            st is not None
            and st.failed is not None
            and detail(st.failed, "on_error") not in (CONTINUE, SKIP_DEPENDENTS)
        )

    def skips_dependents(self, step: str) -> bool:
        """Skipped, or failed under "skip_dependents", this epoch: its dependents are skipped."""
        st = self.steps.get(step)
        return st is not None and (
            st.skipped is not None or detail(st.failed, "on_error") == SKIP_DEPENDENTS
        )

    def may_retry(self, step: str) -> bool:
        """Whether the current agent has an attempt left this epoch."""
        st = self.steps.get(step)
        return st is None or st.attempt.number - st.first + 1 < MAX_ATTEMPTS

    def rounds(self, step: str) -> int:
        return self._loop(step)[0]

    def made(self, step: str) -> frozenset[str]:
        """The paths a looped subtask's earlier rounds committed."""
        return self._loop(step)[1]

    def _loop(self, step: str) -> tuple[int, frozenset[str]]:
        st = self.steps.get(step)
        return self.carried.get(step, (1, frozenset())) if st is None else (st.rounds, st.made)

    def fallbacks(self, step: str) -> int:
        st = self.steps.get(step)
        return 0 if st is None else st.fallbacks

    def ended(self) -> list[str]:
        """The current epoch's subtasks that failed or were skipped, in the order fed."""
        return [s for s, st in self.steps.items() if st.failed is not None or st.skipped]

    def summary(self, step: str) -> dict[str, Any]:
        """The subtask as `harness status` shows it: its status and why, its latest call and
        commit, and the acceptance criteria its last judged attempt left unverified."""
        attempts = self.attempts(step)
        calls = [a.call_id for a in attempts if a.call_id is not None]
        applied = [a.last("subagent_diffs_applied") for a in attempts]
        commits = [detail(ev, "commit") for ev in applied if ev is not None]
        judged = [
            ev
            for a in attempts
            for ev in a.events
            if ev["event"] in ("phase_completed", "acceptance_failed")
        ]
        unverified = detail(judged[-1], "unverified") if judged else None
        # What harness writes there, else nothing: a reader prints these as text.
        return {
            "status": self.status(step),
            "reason": self.reason(step),
            "commit": _text(commits[-1]) if commits else None,
            "call_id": _text(calls[-1]) if calls else None,
            "unverified": (
                [t for t in unverified if isinstance(t, str)]
                if isinstance(unverified, list)
                else []
            ),
        }

    def attempts(self, step: str) -> list[Attempt]:
        """Every attempt of the subtask, oldest first (a model built with history=True)."""
        assert self.history is not None, "attempts() needs Model(history=True)"
        return self.history.get(step, [])

    def invoked_at(self, att: Attempt) -> int | None:
        """The seq of the attempt's subagent_invoked as it was fed."""
        entry = self.calls.get(compact(att.call_id or ""))
        return None if entry is None else entry[0]

    def unanswered(self) -> list[tuple[str, Attempt]]:
        """The current epoch's calls that have no outcome, by subtask."""
        return [(s, st.attempt) for s, st in sorted(self.steps.items()) if st.attempt.open]

    def new_attempt(self, step: str, number: int) -> Attempt:
        att = Attempt(number, self.epoch)
        if self.history is not None:
            self.history.setdefault(step, []).append(att)
        return att

    def unsettled(self) -> str | None:
        """What in the epoch has not ended as a run ends it before halting: a call with no
        outcome, a failure followed by no retry, fallback or step_failed, a dependent of a
        skip not skipped."""
        for step, st in self.steps.items():
            if st.failed is not None or st.skipped is not None:
                continue
            att = st.attempt
            if att.open:
                return f"call {short(att.call_id)} of {step} has no outcome"
            if att.unit is not None:
                return f"the plan {step} runs has not ended"
            if att.judging:
                return f"the supervisor's call of {step} has no verdict"
            last = att.events[-1] if att.events else None
            if last is not None and last["event"] in FAILURES:
                return f"{step}'s {last['event']} is followed by no retry or step_failed"
        for step, deps in (self.subtasks or {}).items():
            cause = next((d for d in deps if self.skips_dependents(d)), None)
            if cause is not None and not self.resolved(step):
                return f"{step} is not skipped though {cause} skips its dependents"
        return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
