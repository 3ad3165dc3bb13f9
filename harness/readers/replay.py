"""`harness replay`: the orchestrator re-run from the recorded base over the recorded answers.

The replay runs in a scratch clone, so the user's branch and files are never touched. Its
log is checked line by line against the record as it is written: the event, step, status,
call_id, commit, check, kind and token of every line must match, and the recorded line's own
bytes are then written, so the chain and every Harness-Log-Head trailer come out the same and
each subtask commit must be rebuilt bit for bit. Times come from the record (the clock reads
the recorded ts of the line being written); answers come only from the recorded exchanges,
and a call the record does not hold stops the replay. Checks are taken from the record, or
re-run with `verify` and then held to the recorded verdicts.

The record as the replay reads it, and how it diverges, is replaylog.py; the scratch clone
and the inputs each line was written with, scratch.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NoReturn

from harness.base.errors import AwaitingApproval, Halted, InvalidInput
from harness.readers.replaylog import (
    CommandEnds,
    Diverged,
    RecordedChecks,
    RecordEnds,
    ReplayLog,
    describe,
    recorded_log,
)
from harness.readers.scratch import Inputs, scratch_clone, seed_exchanges
from harness.record.protocol import HUMAN, VERDICTS
from harness.repository import repo
from harness.repository.layout import Layout
from harness.spec.plan import Subtask
from harness.step import budgets, nesting, orchestrator
from harness.step.task import Task

Event = dict[str, Any]

_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass
class Recording:
    """The recorded answers, bases and checks a replaying task draws on."""

    log: ReplayLog
    verify: bool
    source: Layout  # the repository replayed, whose nested tasks are replayed in turn
    replayed: dict[str, Result]  # nested task -> its replay, made once per command
    # The operator's word (--trust-config) that the record's [sandbox] and network for
    # checks hold; otherwise checks re-run inside the boundary whatever the record says.
    trusted: bool = False
    loosened: set[str] = field(default_factory=set)  # how trusted configs opened it
    # The signature each signed commit of the task carries, by the bytes it covers: a
    # rebuilt commit equal to those bytes gets it back, so it comes out the same commit.
    signatures: dict[bytes, str] = field(default_factory=dict)

    def checks(self, step: str) -> RecordedChecks | None:
        return None if self.verify else RecordedChecks(self.log, step)

    def unrecorded(self, call_id: str) -> NoReturn:
        expected = self.log.expected
        if expected is None:
            raise RecordEnds
        raise Diverged(
            len(self.log.events), describe(expected), f"a call not in the record ({call_id[:12]})"
        )

    def launches(self, flying: set[str]) -> bool:
        """A replay launches a subtask when the record does: its next line is about a
        subtask with no call in flight (its invocation, or its failure before one)."""
        expected = self.log.expected
        if expected is None:
            raise RecordEnds
        step = expected.get("step")
        return (
            step is not None and step not in flying and expected["event"] != "blocker_encountered"
        )

    def exhausted(self) -> budgets.Exhausted | None:
        """The budget the recorded run ran out of here (its blocker is the next line):
        spending is not measured again, least of all wall time."""
        expected = self.log.expected
        if expected is None or expected["event"] != "blocker_encountered":
            return None
        details = expected.get("details") or {}
        if expected.get("step") is not None or "budget" not in details:
            return None
        error = str(expected.get("error", ""))
        why = error.removeprefix("budget ")
        limit, used = (details.get(k) for k in ("limit", "used"))
        number = (int, float)
        return budgets.Exhausted(
            str(details["budget"]),
            limit if isinstance(limit, number) else 0.0,
            used if isinstance(used, number) else 0.0,
            why,
        )

    def base(self, task: Task) -> str:
        """The base the record's next call was made on. An older commit of this branch is
        taken as it is (a run with several slots fixes bases by the plan); a later one is
        reached by fast-forwarding over commits people (or record commits) added, never
        over subtask commits: anything else is a divergence."""
        git, head = task.git, task.git.head()
        expected = self.log.expected
        if expected is None or expected["event"] not in ("subagent_invoked", "plan_started"):
            return head
        base = _commit_id(expected["details"].get("base"))
        if base == head or git.is_ancestor(base, head):
            return base
        self._forward(task, base, f"a call on base {base[:12]}")
        return base

    def landing(self, task: Task, call_id: str) -> None:
        """Before a change lands: HEAD moved to the parent the record's commit of `call_id`
        has, over the record commits of the commands between (a person's `approve`, say)."""
        at = len(self.log.events)
        commit = next(
            (
                e["details"].get("commit")
                for e in self.log.recorded[at:]
                if e["event"] == "subagent_diffs_applied" and e["details"].get("call_id") == call_id
            ),
            None,
        )
        git = task.git
        if commit is None or not git.exists(_commit_id(commit)):
            return  # the recorded run did not land it: what the replay does instead diverges
        code, out, _ = git.try_git("rev-parse", "--verify", "--quiet", f"{commit}^")
        parent = out.strip()
        if code != 0:
            return  # a commit with no parent was never a change: the replay's diverges
        if parent != git.head() and not git.is_ancestor(parent, git.head()):
            self._forward(task, parent, f"commit {str(commit)[:12]} on {parent[:12]}")

    def _forward(self, task: Task, to: str, wanted: str) -> None:
        """Fast-forward HEAD to `to` over commits people, record commits or other tasks
        made; never over this task's subtask commits, which the replay must rebuild."""
        git, head = task.git, task.git.head()
        if not git.is_ancestor(head, to):
            raise Diverged(
                len(self.log.events), wanted, f"HEAD {head[:12]}, which it does not descend from"
            )
        # Another task's commits (a task this one runs, say) are to it as a person's are.
        mine = [
            sha
            for sha, found in git.commits_between(head, to)
            if found.get("Harness-Task") == task.task_id and "Harness-Call-Id" in found
        ]
        if mine:
            raise Diverged(
                len(self.log.events), wanted, f"subtask commits between HEAD {head[:12]} and it"
            )
        _move(git, head, to)

    def nested(self, task: Task, sub: Subtask) -> nesting.Unit:
        """How the nested plan `sub` runs ended, as recorded. The nested task is replayed
        on its own (once per command), and must rebuild every subtask commit between HEAD
        and the recorded end of its run; HEAD then moves over them to that end."""
        expected, at = self.log.expected, len(self.log.events)
        if expected is None:
            raise RecordEnds
        details = expected.get("details") or {}
        if (
            expected["event"] not in ("step_completed", "step_failed")
            or expected.get("step") != sub.id
            or details.get("plan") != sub.plan
        ):
            raise Diverged(at, describe(expected), f"the end of plan {sub.plan} run by {sub.id}")
        assert sub.plan is not None
        if sub.plan not in self.replayed:
            try:
                self.replayed[sub.plan] = replay(
                    self.source, sub.plan, self.verify, self.replayed, self.trusted
                )
            except Halted as halt:
                raise Diverged(at, f"task {sub.plan} replayed", str(halt)) from None
        rebuilt = set(self.replayed[sub.plan].commits)
        git, head, end = task.git, task.git.head(), _commit_id(details.get("commit"))
        error = None if expected["event"] == "step_completed" else str(expected.get("error", ""))
        unit = nesting.Unit(error, str(details.get("log_head")), end)
        if end == head or git.is_ancestor(end, head):  # it had ended before this task ran it
            return unit
        if not git.is_ancestor(head, end):
            raise Diverged(at, f"plan {sub.plan} ending at {end[:12]}", f"HEAD {head[:12]}")
        for sha, found in git.commits_between(head, end):
            if "Harness-Call-Id" in found and sha not in rebuilt:
                raise Diverged(
                    at,
                    f"commit {sha[:12]} rebuilt by replaying task {sub.plan}",
                    "a commit that replay does not make",
                )
        _move(git, head, end)
        return unit


def _move(git: repo.Repo, head: str, to: str) -> None:
    """Fast-forward the branch from `head` to `to`, bringing the files outside ai/ along."""
    outside = [p for p in git.changed_between(head, to) if not p.startswith("ai/")]
    git.advance(git.branch(), to, head)
    if outside:
        git.sync(to, outside)


@dataclass(frozen=True)
class Result:
    task_id: str
    base: str
    events: int
    commits: list[str]  # every subtask commit rebuilt: the task's, then its nested tasks'
    verified: bool
    loosened: list[str] = field(default_factory=list)  # how trusted configs opened the boundary


def replay(
    layout: Layout,
    task_id: str,
    verify: bool,
    replayed: dict[str, Result] | None = None,
    trusted: bool = False,
) -> Result:
    """Replay the task recorded in `layout` in a scratch clone; Diverged names the first
    difference. The tasks it runs as nested plans are replayed too (`replayed`: those
    replayed already in this command). Checks re-run (`verify`) inside the boundary unless
    the operator `trusted` the recorded config."""
    replayed = {} if replayed is None else replayed
    recorded, last_line = recorded_log(layout, task_id)
    invoked = [e for e in recorded if e["event"] in ("subagent_invoked", "plan_started")]
    source = repo.Repo(layout.root)
    try:
        base = _commit_id(invoked[0]["details"].get("base")) if invoked else source.head()
        if not source.exists(base):
            raise InvalidInput(f"the recorded base {base[:12]} is not in this clone")
        inputs = Inputs(layout, source, task_id, recorded, last_line)
        signatures = source.recorded_signatures(task_id)
    finally:
        source.close()
    with scratch_clone(layout.root, base) as root:
        scratch = Layout(root)
        seed_exchanges(layout, scratch, task_id)
        log = ReplayLog(scratch.log(task_id), task_id, recorded)
        recording = Recording(log, verify, layout, replayed, trusted, signatures=signatures)
        _run(scratch, task_id, log, inputs, recording)
        if len(log.events) < len(recorded):
            index = len(log.events)
            raise Diverged(index, describe(recorded[index]), "the replay stopped there")
    commits = [
        str(e["details"]["commit"]) for e in recorded if e["event"] == "subagent_diffs_applied"
    ]
    commits += [sha for nested in replayed.values() for sha in nested.commits]
    commits = list(dict.fromkeys(commits))  # a task nested twice was replayed once
    loosened = recording.loosened.union(*(r.loosened for r in replayed.values()))
    return Result(task_id, base, len(recorded), commits, verify, sorted(loosened))


def _commit_id(value: object) -> str:
    """A recorded base, which must be a full commit id before git sees it."""
    if not isinstance(value, str) or not _SHA.fullmatch(value):
        raise InvalidInput(f"the record names base {str(value)[:40]!r}, which is no commit id")
    return value


def _run(
    scratch: Layout, task_id: str, log: ReplayLog, inputs: Inputs, recording: Recording
) -> None:
    """Step until the task completes or the record ends, each step with the inputs its
    lines were written with; a halt the record shows a person resolving is resolved the
    same way."""
    task: Task | None = None
    loaded: str | None = ""
    try:
        while True:
            wanted, log.limit = inputs.source(len(log.events))
            if task is None or wanted != loaded:
                if task is not None:
                    task.git.close()
                    task = None
                inputs.seed(scratch, wanted, len(log.events))
                task = Task.load(scratch, task_id, log.clock, log=log)
                task.recording = recording
                task.git.sign = recording.signatures.get if recording.signatures else None
                if recording.verify and recording.trusted:
                    recording.loosened.update(task.config.loosened())
                elif recording.verify:
                    task.config = task.config.boxed()
                loaded = wanted
            if not _step(task, log):
                return
    except InvalidInput as exc:
        # A recorded exchange that fails its own hashes, say.
        raise Halted(f"replay stopped: {exc}") from None
    finally:
        if task is not None:
            task.git.close()


def _step(task: Task, log: ReplayLog) -> bool:
    """Run the replay up to a halt (True when the record goes on past it, resolved) or to
    the end of the task or of the record (False)."""
    try:
        for _ in orchestrator.steps(task, once=False):
            pass
        return False
    except RecordEnds:
        return False
    except CommandEnds:
        return True
    except Diverged:
        raise
    except Halted as halt:
        # What a person did next is the record's next line: resolved the blocker, or gave
        # the verdict a change awaited.
        expected = log.expected
        if expected is None:
            return False
        if isinstance(halt, AwaitingApproval):
            by = (expected.get("details") or {}).get("by")
            went_on = expected["event"] in VERDICTS and by == HUMAN
        else:
            went_on = expected["event"] == "blocker_resolved" and task.model.blocker is not None
        if not went_on:
            raise Diverged(len(log.events), describe(expected), f"a halt: {halt}") from None
        log.copy_expected()
        return True
