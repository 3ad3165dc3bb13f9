"""The legal order of a task's events, written down once (DESIGN §4, §9).

Every command that needs to know what a log says asks this model: the orchestrator what
already happened (so a killed step is finished, never redone), audit whether the order is
legal, status, log and report how to describe it. It is fed one event at a time and keeps
state per subtask, never per event, so a log of any length is judged in one pass.

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

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

Event = dict[str, Any]

VERDICTS = ("step_approved", "step_reoriented", "step_paused")
FAILURES = (
    "subagent_failed",
    "build_failed",
    "test_failed",
    "acceptance_failed",
    "supervisor_failed",
    "step_reoriented",
    "step_paused",
)
HUMAN = "human"  # a verdict's `by` when a person gave it
# A supervisor_failed's kind when the call succeeded but its answer was no verdict.
NO_VERDICT = "no-verdict"
RETRYABLE_KINDS = ("retryable", "timeout")
CHECK_PASSED = frozenset({"build_succeeded", "test_passed", "phase_completed"})
CHECK_FAILED = frozenset({"build_failed", "test_failed", "acceptance_failed"})
STEP_EVENTS = frozenset(
    {
        "subagent_invoked",
        "subagent_succeeded",
        "subagent_failed",
        "subagent_retried",
        "subagent_fallback",
        "subagent_diffs_applied",
        "step_completed",
        "step_failed",
        "step_skipped",
        "plan_started",
        "supervisor_invoked",
        "supervisor_failed",
        "approval_requested",
        "loop_continued",
        *VERDICTS,
        *CHECK_PASSED,
        *CHECK_FAILED,
    }
)
MAX_ATTEMPTS = 2
# A failed subtask's dependents may still run (DESIGN §10): the task goes on without its work.
CONTINUE = "continue"
SKIP_DEPENDENTS = "skip_dependents"
_SHORT = 12
_NO_DETAILS: dict[str, Any] = {}
_RUNNING: tuple[str, str | None] = ("running", None)


def short(value: object) -> str:
    return value[:_SHORT] if isinstance(value, str) else repr(value)


def retryable(ev: Event) -> bool:
    """A failure worth a second attempt: a transient worker (or supervisor) failure, a
    failed check, or a supervisor's correction."""
    if ev["event"] in ("subagent_failed", "supervisor_failed"):
        return ev.get("details", {}).get("kind") in RETRYABLE_KINDS
    return ev["event"] in ("build_failed", "test_failed", "step_reoriented")


@dataclass
class Attempt:
    number: int
    epoch: int
    events: list[Event] = field(default_factory=list)
    # Indexes of `events`, which every rule asks of the attempt on every event it is fed.
    latest: dict[str, Event] = field(default_factory=dict, repr=False)  # name -> its last
    failure: Event | None = field(default=None, repr=False)  # the failure that ended it

    def __post_init__(self) -> None:
        given, self.events = self.events, []
        for ev in given:
            self.add(ev)

    def add(self, ev: Event) -> None:
        self.events.append(ev)
        self.latest[ev["event"]] = ev
        if ev["event"] in FAILURES:
            self.failure = ev

    def has(self, name: str) -> bool:
        return name in self.latest

    def last(self, name: str) -> Event | None:
        return self.latest.get(name)

    @property
    def invoked(self) -> Event | None:
        return self.last("subagent_invoked")

    @property
    def call_id(self) -> str | None:
        found = _detail(self.invoked, "call_id")
        return found if isinstance(found, str) else None

    @property
    def unit(self) -> Event | None:
        """The plan_started of a subtask that runs another task's plan (nesting.py)."""
        return self.last("plan_started")

    @property
    def asked(self) -> Event | None:
        """The request for a verdict on its change: the supervisor's call or a person's."""
        return self.last("supervisor_invoked") or self.last("approval_requested")

    @property
    def judged(self) -> Any:
        """The tree a verdict was asked on (None: none asked, or an answer with no change)."""
        return _detail(self.asked, "tree")

    @property
    def verdict(self) -> Event | None:
        return next((self.latest[v] for v in VERDICTS if v in self.latest), None)

    @property
    def awaiting(self) -> bool:
        """Its change waits for a person's approve or reject."""
        return self.has("approval_requested") and self.verdict is None

    @property
    def judging(self) -> bool:
        """The supervisor was called and neither its verdict nor its failure is logged."""
        return (
            self.has("supervisor_invoked")
            and self.verdict is None
            and not self.has("supervisor_failed")
        )

    @property
    def open(self) -> bool:
        """A call was made and its outcome is not logged yet."""
        return self.invoked is not None and not (
            self.has("subagent_succeeded") or self.has("subagent_failed")
        )

    def outcome(self) -> tuple[str, str | None]:
        """("completed" | "failed (<event>)" | "in progress", the error it logged)."""
        if self.has("step_completed"):
            return "completed", None
        # The check that failed names the cause; a bare step_failed is a refusal.
        failed = self.failure or self.last("step_failed")
        if failed is not None:
            return f"failed ({failed['event']})", failed.get("error")
        return "in progress", None


def _detail(ev: Event | None, key: str) -> Any:
    return None if ev is None else ev.get("details", _NO_DETAILS).get(key)


class Completed(NamedTuple):
    """What a subtask's step_completed names, and where it was fed."""

    call_id: Any
    commit: Any
    at: int


@dataclass
class Step:
    """One subtask in the current epoch."""

    attempt: Attempt
    failed: Event | None = None  # its step_failed
    failed_at: int | None = None
    skipped: Event | None = None  # its step_skipped
    last_failure: Event | None = None  # the latest failure event, whichever attempt
    fallbacks: int = 0  # agents given up on this epoch: the plan's next one is current
    first: int = 1  # the number of the current agent's (or round's) first attempt
    rounds: int = 1  # a looped subtask's round in progress
    made: frozenset[str] = frozenset()  # paths its earlier rounds committed, its own to change


@dataclass(frozen=True)
class Finding:
    kind: str  # "order", "plan" (a step the plan lacks); a reader adds "line" and "chain"
    reason: str | Callable[[], str]  # a callable where wording it is costly
    at: int | None = None  # the line it concerns, when not the one being read

    @property
    def text(self) -> str:
        return self.reason if isinstance(self.reason, str) else self.reason()


class _Findings(list[Finding]):
    def order(self, reason: str, at: int | None = None) -> None:
        self.append(Finding("order", reason, at))


class Model:
    """A task's log as far as it has been fed: what happened, and what broke the order."""

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
        self.done: dict[str, Completed] = {}
        self.steps: dict[str, Step] = {}  # the current epoch's subtasks not done
        # a looped subtask an earlier epoch left mid-loop -> its round and Step.made, until
        # it runs again
        self.carried: dict[str, tuple[int, frozenset[str]]] = {}
        # subtask not done -> (its status, why) as its latest event says: running, failed
        # (its step_failed's error) or skipped (the dependency it was skipped for)
        self.seen: dict[str, tuple[str, str | None]] = {}
        # call_id -> (seq of its subagent_invoked, "ok" | the failure's kind | "" while none)
        self.calls: dict[str, tuple[int, str]] = {}
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
            base, tree = (short(_detail(asked, k)) for k in ("base", "tree"))
            what = (
                f"`git diff {base} {tree}`"
                if _detail(asked, "tree") is not None
                else f"the answer of call {short(_detail(asked, 'call_id'))} (it changes no file)"
            )
            return f"review {what}, then `harness approve` or `harness reject`"
        return self.seen[step][1] if status in ("failed", "skipped") else None

    def goes_on(self, step: str) -> bool:
        """Whether the subtask's dependents may run: it is done, or it failed this epoch
        under on_error "continue"."""
        if step in self.done:
            return True
        st = self.steps.get(step)
        return st is not None and _detail(st.failed, "on_error") == CONTINUE

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
            and _detail(st.failed, "on_error") not in (CONTINUE, SKIP_DEPENDENTS)
        )

    def skips_dependents(self, step: str) -> bool:
        """Skipped, or failed under "skip_dependents", this epoch: its dependents are skipped."""
        st = self.steps.get(step)
        return st is not None and (
            st.skipped is not None or _detail(st.failed, "on_error") == SKIP_DEPENDENTS
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
        commits = [_detail(ev, "commit") for ev in applied if ev is not None]
        judged = [
            ev
            for a in attempts
            for ev in a.events
            if ev["event"] in ("phase_completed", "acceptance_failed")
        ]
        return {
            "status": self.status(step),
            "reason": self.reason(step),
            "commit": commits[-1] if commits else None,
            "call_id": calls[-1] if calls else None,
            "unverified": _detail(judged[-1], "unverified") or [] if judged else [],
        }

    def attempts(self, step: str) -> list[Attempt]:
        """Every attempt of the subtask, oldest first (a model built with history=True)."""
        assert self.history is not None, "attempts() needs Model(history=True)"
        return self.history.get(step, [])

    def invoked_at(self, att: Attempt) -> int | None:
        """The seq of the attempt's subagent_invoked as it was fed."""
        entry = self.calls.get(att.call_id or "")
        return None if entry is None else entry[0]

    def unanswered(self) -> list[tuple[str, Attempt]]:
        """The current epoch's calls that have no outcome, by subtask."""
        return [(s, st.attempt) for s, st in sorted(self.steps.items()) if st.attempt.open]

    # -- feeding -----------------------------------------------------------------------------

    def feed(self, seq: int, ev: Event) -> list[Finding]:
        """Take the next event; return what about it breaks the order (empty when legal).

        The model goes on after a finding, so one broken line is one finding."""
        out = _Findings()
        name = ev["event"]
        if self.fed == 0 and name != "task_started":
            out.order("the log does not begin with task_started")
        self.fed += 1
        details = ev.get("details", _NO_DETAILS)
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
            st = self.steps[step] = Step(self._new_attempt(step, 1), rounds=rounds, made=made)
        elif st.failed_at is not None:
            out.order(f"{name} for {step} after its step_failed (seq {st.failed_at})")
        elif st.skipped is not None:
            out.order(f"{name} for {step} after its step_skipped")
        _RULES[name](self, seq, ev, step, st, details, out)
        return out

    def _new_attempt(self, step: str, number: int) -> Attempt:
        att = Attempt(number, self.epoch)
        if self.history is not None:
            self.history.setdefault(step, []).append(att)
        return att

    def _task_event(self, seq: int, ev: Event, name: str, out: _Findings) -> None:
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
            if step is None and "budget" in ev.get("details", _NO_DETAILS):
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

    def _halt(self, step: Any, st: Step | None, out: _Findings) -> None:
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


# -- the rules for a subtask's events ---------------------------------------------------------
# Each takes (model, seq, event, step, its state, details, findings) and appends findings.


def _invoked(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    att = st.attempt
    call = d.get("call_id")
    if not isinstance(call, str):
        out.order("subagent_invoked names no details.call_id")
        return
    if att.unit is not None:
        out.order(f"subagent_invoked for {step}, which runs a plan")
    elif att.open:
        out.order(f"subagent_invoked while call {short(att.call_id)} has no outcome")
    elif att.invoked is not None:
        out.order(f"a second subagent_invoked in attempt {att.number}")
    if d.get("attempt") != att.number:
        out.order(f"details.attempt is {d.get('attempt')!r}, not {att.number}")
    waiting = [dep for dep in (m.subtasks or {}).get(step, ()) if not m.goes_on(dep)]
    if waiting:
        out.order(f"subagent_invoked for {step} before {', '.join(waiting)} completed")
    if att.events:  # what came before the call is the attempt's no longer
        att = st.attempt = m._new_attempt(step, att.number)
    att.add(ev)
    _call(m, seq, call, out)


def _call(m: Model, seq: int, call: str, out: _Findings) -> None:
    """A call made (a worker's or a supervisor's): its id is never made twice."""
    if call in m.calls:
        out.order(f"call {call[:_SHORT]} was invoked before (seq {m.calls[call][0]})")
    else:
        m.calls[call] = (seq, "")


def _unit(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    """A subtask starts running another task's plan: one unit, ended by its step_completed
    or step_failed, which name the nested log's head."""
    att = st.attempt
    if not isinstance(d.get("plan"), str):
        out.order("plan_started names no details.plan")
    elif att.unit is not None or att.invoked is not None:
        out.order(f"plan_started for {step} in an attempt that began already")
    waiting = [dep for dep in (m.subtasks or {}).get(step, ()) if not m.goes_on(dep)]
    if waiting:
        out.order(f"plan_started for {step} before {', '.join(waiting)} completed")
    att.add(ev)


def _outcome(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    att, name = st.attempt, ev["event"]
    if not att.open or d.get("call_id") != att.call_id:
        out.order(f"{name} for call {short(d.get('call_id'))}, which awaits no outcome")
        return
    _after_call(st, ev)
    said = "ok" if name == "subagent_succeeded" else str(d.get("kind"))
    m.calls[str(att.call_id)] = (m.calls[str(att.call_id)][0], said)


def _after_call(st: Step, ev: Event) -> None:
    st.attempt.add(ev)
    if ev["event"] in FAILURES:
        st.last_failure = ev


def _legal_after_success(name: str, att: Attempt, out: _Findings) -> bool:
    """Checks, commits and completion need the attempt's call to have succeeded."""
    if not att.has("subagent_succeeded"):
        out.order(f"{name} before a subagent_succeeded in attempt {att.number}")
        return False
    failed = att.failure
    if failed is not None:
        what = failed["event"]
        if what == "subagent_failed":
            what += f" ({_detail(failed, 'kind')})"
        out.order(f"{name} after {what} in the same attempt")
        return False
    return True


def _check(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    name = ev["event"]
    _legal_after_success(name, st.attempt, out)
    if any(e["event"] == name and e.get("details") == d for e in st.attempt.events):
        # harness logs a check's result once per attempt (checks.py)
        out.order(f"{name} repeats an earlier one in attempt {st.attempt.number}")
    _after_call(st, ev)


def _retried(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    att = st.attempt
    previous = att.events[-1] if att.events else None
    if not m.may_retry(step):
        out.order(
            "a second subagent_retried for one agent since the last blocker_resolved "
            f"(attempt {MAX_ATTEMPTS} is its last)"
        )
    elif previous is None or previous["event"] not in FAILURES or not retryable(previous):
        after = "nothing" if previous is None else _failure_words(previous)
        out.order(f"subagent_retried after {after}, not a retryable failure")
    att.add(ev)
    st.attempt = m._new_attempt(step, att.number + 1)


def _fallback(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    att = st.attempt
    previous = att.events[-1] if att.events else None
    if previous is None or previous["event"] not in FAILURES:
        after = "nothing" if previous is None else str(previous["event"])
        out.order(f"subagent_fallback after {after}, not a failure")
    elif previous["event"] == "step_paused":
        out.order("subagent_fallback after step_paused, which stops the task for a person")
    elif retryable(previous) and m.may_retry(step):
        out.order(f"subagent_fallback after {_failure_words(previous)}, which had a retry left")
    att.add(ev)
    st.fallbacks += 1
    st.attempt = m._new_attempt(step, att.number + 1)
    st.first = st.attempt.number


def _failure_words(failed: Event) -> str:
    if failed["event"] in ("subagent_failed", "supervisor_failed"):
        return f"{failed['event']} ({_detail(failed, 'kind')})"
    return str(failed["event"])


def _applied(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    att = st.attempt
    if d.get("call_id") != att.call_id or not att.has("subagent_succeeded"):
        out.order(
            f"subagent_diffs_applied without subagent_succeeded of call {short(d.get('call_id'))}"
        )
    elif _legal_after_success("subagent_diffs_applied", att, out):
        _unapproved("subagent_diffs_applied", att, out)
    if att.has("subagent_diffs_applied"):
        out.order(f"a second subagent_diffs_applied in attempt {att.number}")
    att.add(ev)


def _completed(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    att = st.attempt
    if "plan" in d or att.unit is not None:
        if _other_plan(att, d):
            out.order(f"step_completed for {step} names a plan its plan_started does not")
    elif att.open:
        out.order(f"step_completed while call {short(att.call_id)} has no outcome")
    elif _legal_after_success("step_completed", att, out):
        _unapproved("step_completed", att, out)
        if d.get("call_id") != att.call_id:
            out.order(
                f"step_completed names call {short(d.get('call_id'))}, not {short(att.call_id)}"
            )
        applied = _detail(att.last("subagent_diffs_applied"), "commit")
        if d.get("commit") != applied:
            out.order(
                f"step_completed names commit {short(d.get('commit'))}, "
                f"but the attempt applied {short(applied)}"
            )
    att.add(ev)
    call = d.get("call_id")
    # The call's own id object when they agree: the calls table holds it already.
    m.done[step] = Completed(att.call_id if call == att.call_id else call, d.get("commit"), seq)
    del m.steps[step]
    del m.seen[step]  # a done subtask's status is "done" whatever else was seen


def _failed(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    if st.attempt.open:
        call = short(st.attempt.call_id)
        out.order(f"step_failed while call {call} has no outcome")
    if _other_plan(st.attempt, d):
        out.order(f"step_failed for {step} names a plan its plan_started does not")
    paused = st.attempt.failure is not None and st.attempt.failure["event"] == "step_paused"
    if paused and d.get("on_error", "stop") != "stop":
        out.order(f"step_failed for {step} under on_error {d['on_error']} after step_paused")
    st.attempt.add(ev)
    st.failed, st.failed_at = ev, seq
    m.seen[step] = ("failed", str(ev.get("error", "see the log")))


def _unapproved(name: str, att: Attempt, out: _Findings) -> None:
    """A change a verdict was asked for counts only once it was approved."""
    if att.asked is not None and not att.has("step_approved"):
        out.order(f"{name} before step_approved in attempt {att.number}, which asked a verdict")


def _ask(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    """A verdict asked of the supervisor (supervisor_invoked, its call) or of a person
    (approval_requested): once per attempt, on a checked change not yet counted."""
    att, name = st.attempt, ev["event"]
    _legal_after_success(name, att, out)
    if att.asked is not None:
        out.order(f"{name} in attempt {att.number}, which asked a verdict already")
    if att.has("subagent_diffs_applied"):
        out.order(f"{name} after the attempt's change was committed")
    judged = d.get("of") if name == "supervisor_invoked" else d.get("call_id")
    if att.call_id is not None and judged != att.call_id:
        out.order(f"{name} judges call {short(judged)}, not the attempt's {short(att.call_id)}")
    att.add(ev)
    if name == "supervisor_invoked":
        call = d.get("call_id")
        if not isinstance(call, str):
            out.order("supervisor_invoked names no details.call_id")
        else:
            _call(m, seq, call, out)


def _verdict(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    """A verdict: a person's on a change that awaits one, or the supervisor's answer to
    its call (a pause never comes from a person, who rejects instead)."""
    att, name = st.attempt, ev["event"]
    if att.verdict is not None:
        out.order(f"{name} after {att.verdict['event']} in attempt {att.number}")
    elif d.get("by") == HUMAN:
        if not att.has("approval_requested"):
            out.order(f"{name} by a person for {step}, which awaits no approval")
        elif name == "step_paused":
            out.order("step_paused by a person: a person approves or rejects")
        elif not isinstance(d.get("who"), str) or not d["who"]:
            out.order(f"{name} by a person names nobody (details.who)")
        elif d.get("call_id") != att.call_id:
            out.order(f"{name} by a person for call {short(d.get('call_id'))}, not the attempt's")
    elif not att.judging or d.get("call_id") != _detail(att.last("supervisor_invoked"), "call_id"):
        out.order(f"{name} for call {short(d.get('call_id'))}, which awaits no verdict")
    else:
        call = str(d["call_id"])
        m.calls[call] = (m.calls[call][0], "ok")
    _after_call(st, ev)


def _supervisor_failed(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    att = st.attempt
    call = _detail(att.last("supervisor_invoked"), "call_id")
    if not att.judging or d.get("call_id") != call:
        out.order(f"supervisor_failed for call {short(d.get('call_id'))}, which awaits no verdict")
    else:
        said = "ok" if d.get("kind") == NO_VERDICT else str(d.get("kind"))
        m.calls[str(call)] = (m.calls[str(call)][0], said)
    _after_call(st, ev)


def _round(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    """A looped subtask's round ended and the next one starts: after a successful call whose
    change (if any) was committed, with its verdict if one was asked."""
    att = st.attempt
    if _legal_after_success("loop_continued", att, out):
        _unapproved("loop_continued", att, out)
        applied = _detail(att.last("subagent_diffs_applied"), "commit")
        if d.get("call_id") != att.call_id or d.get("commit") != applied:
            out.order(
                f"loop_continued names call {short(d.get('call_id'))} and commit "
                f"{short(d.get('commit'))}, not the round's"
            )
    if d.get("round") != st.rounds:
        out.order(f"loop_continued names round {d.get('round')!r}, not {st.rounds}")
    files = _detail(att.last("subagent_diffs_applied"), "files")
    if isinstance(files, list):
        st.made |= {f for f in files if isinstance(f, str)}
    att.add(ev)
    st.rounds += 1
    st.attempt = m._new_attempt(step, att.number + 1)
    st.first = st.attempt.number


def _other_plan(att: Attempt, d: dict[str, Any]) -> bool:
    """An end naming a plan the attempt did not start (or none, when it started one)."""
    return ("plan" in d or att.unit is not None) and _detail(att.unit, "plan") != d.get("plan")


def _skipped(
    m: Model, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: _Findings
) -> None:
    cause = d.get("cause")
    if st.attempt.events:
        out.order(f"step_skipped for {step}, which ran in this epoch")
    if m.subtasks is not None and cause not in m.subtasks.get(step, ()):
        out.order(f"step_skipped for {step} names {cause!r}, none of its dependencies")
    found = m.steps.get(cause) if isinstance(cause, str) else None
    if found is None or not (
        found.skipped is not None or _detail(found.failed, "on_error") == SKIP_DEPENDENTS
    ):
        out.order(f"step_skipped for {step}: {cause!r} neither failed to skip its dependents")
    st.skipped = ev
    why = "skipped" if found is not None and found.skipped is not None else "failed"
    m.seen[step] = ("skipped", f"{cause} {why}")


_RULES = {
    "subagent_invoked": _invoked,
    "subagent_succeeded": _outcome,
    "subagent_failed": _outcome,
    "subagent_retried": _retried,
    "subagent_fallback": _fallback,
    "subagent_diffs_applied": _applied,
    "step_completed": _completed,
    "step_failed": _failed,
    "step_skipped": _skipped,
    "plan_started": _unit,
    "supervisor_invoked": _ask,
    "approval_requested": _ask,
    "supervisor_failed": _supervisor_failed,
    "loop_continued": _round,
    **dict.fromkeys(VERDICTS, _verdict),
    **dict.fromkeys(CHECK_PASSED | CHECK_FAILED, _check),
}
