"""The parts of a task's log the protocol speaks of (its words are defined in protocol.py):
the event names by kind, an Attempt, a subtask's Step in the epoch, what its step_completed
named, and a Finding against the order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
NO_DETAILS: dict[str, Any] = {}


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
    # its call's id as the calls table keeps it (compact): its completion starts from it
    key: str | bytes | None = field(default=None, repr=False, compare=False)

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
        found = detail(self.invoked, "call_id")
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
        return detail(self.asked, "tree")

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


def detail(ev: Event | None, key: str) -> Any:
    return None if ev is None else ev.get("details", NO_DETAILS).get(key)


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


class Findings(list[Finding]):
    def order(self, reason: str, at: int | None = None) -> None:
        self.append(Finding("order", reason, at))
