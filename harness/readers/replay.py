"""`harness replay`: the orchestrator re-run from the recorded base over the recorded answers.

The replay runs in a scratch clone, so the user's branch and files are never touched. Its
log is checked line by line against the record as it is written: the event, step, status,
call_id, commit, check, kind and token of every line must match, and the recorded line's own
bytes are then written, so the chain and every Harness-Log-Head trailer come out the same and
each subtask commit must be rebuilt bit for bit. Times come from the record (the clock reads
the recorded ts of the line being written); answers come only from the recorded exchanges,
and a call the record does not hold stops the replay. Checks are taken from the record, or
re-run with `verify` and then held to the recorded verdicts.
"""

from __future__ import annotations

import bisect
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import orjson

from harness.base import clock, files
from harness.base.errors import AwaitingApproval, Halted, InvalidInput
from harness.checks.acceptance import Judge
from harness.gate.diffgate import Change
from harness.record.progress import Log
from harness.record.protocol import HUMAN, VERDICTS
from harness.repository import repo
from harness.repository.layout import Layout
from harness.spec.plan import Subtask
from harness.step import budgets, nesting, orchestrator

Event = dict[str, Any]

# What must agree between a recorded line and the replayed one; the rest (times, messages,
# command lines, measurements) may differ between machines and is taken from the record.
COMPARED = ("event", "step", "status")
COMPARED_DETAILS = ("call_id", "commit", "check", "kind", "token")
_SHA = re.compile(r"[0-9a-f]{40}")


class Diverged(Halted):
    """The replay did something other than the record: where, what was expected, what not."""

    def __init__(self, index: int, expected: str, found: str) -> None:
        super().__init__(f"diverged at event {index}: expected {expected}; found {found}")
        self.index, self.expected, self.found = index, expected, found


class RecordEnds(Exception):
    """The orchestrator went on past the last recorded line: the recorded run stopped there."""


class CommandEnds(Exception):
    """The orchestrator went on past the last line the recorded command wrote: the next
    lines were written by another command, with the inputs of its own record commit."""


def describe(event: Event | None) -> str:
    """One line naming what is compared of an event."""
    if event is None:
        return "the end of the record"
    parts = [str(event.get(k, "-")) for k in COMPARED]
    details = event.get("details") or {}
    parts += [f"{k}={str(details[k])[:12]}" for k in COMPARED_DETAILS if k in details]
    return " ".join(parts)


def _key(event: Event) -> tuple[object, ...]:
    details = event.get("details") or {}
    return (*(event.get(k) for k in COMPARED), *(details.get(k) for k in COMPARED_DETAILS))


class RecordedClock:
    """The recorded ts of line `seq`, so envelopes and commit dates come out the same."""

    def __init__(self, recorded: list[Event]) -> None:
        self.recorded = recorded

    def now(self, seq: int) -> str:
        return str(self.recorded[min(seq, len(self.recorded) - 1)]["ts"])


class ReplayLog(Log):
    """A log that accepts only the record's next line, and writes the record's own bytes."""

    def __init__(self, path: Path, task_id: str, recorded: list[Event]) -> None:
        super().__init__(path, task_id, RecordedClock(recorded))
        self.recorded = recorded
        self.limit: int | None = None  # lines the command being replayed wrote, in all

    @property
    def expected(self) -> Event | None:
        seq = len(self.events)
        return self.recorded[seq] if seq < len(self.recorded) else None

    def write(self, record: dict[str, Any]) -> dict[str, Any]:
        """Hold the event the orchestrator built to the recorded one, then write that."""
        expected = self.expected
        if expected is None:
            raise RecordEnds
        if self.limit is not None and len(self.events) >= self.limit:
            raise CommandEnds
        if _key(record) != _key(expected):
            raise Diverged(len(self.events), describe(expected), describe(record))
        return super().write(expected)

    def copy_expected(self) -> None:
        """Write the record's next line as it is (a person's `harness resume`)."""
        expected = self.expected
        assert expected is not None
        super().write(expected)


class RecordedChecks:
    """Check results read off the record in the order a step asks for them."""

    def __init__(self, log: ReplayLog, step: str) -> None:
        self.log, self.step = log, step

    def _copy(self, names: tuple[str, ...], failed: str) -> bool:
        """Replay the recorded check events of this step at the head of the record."""
        ok = True
        while True:
            expected = self.log.expected
            if expected is None or expected.get("step") != self.step:
                return ok
            if expected["event"] not in names:
                return ok
            self.log.copy_expected()
            ok = ok and expected["event"] != failed

    def build(self, wt: Path, changes: list[Change]) -> bool:
        return self._copy(("build_succeeded", "build_failed"), "build_failed")

    def test(self, wt: Path, command: str) -> bool:
        return self._copy(("test_passed", "test_failed"), "test_failed")

    def accept(self, judge: Judge, lenient: bool = False) -> bool:
        return self._copy(("phase_completed", "acceptance_failed"), "acceptance_failed")


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

    def base(self, task: orchestrator.Task) -> str:
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

    def landing(self, task: orchestrator.Task, call_id: str) -> None:
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

    def _forward(self, task: orchestrator.Task, to: str, wanted: str) -> None:
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

    def nested(self, task: orchestrator.Task, sub: Subtask) -> nesting.Unit:
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
    recorded, last_line = _recorded(layout, task_id)
    invoked = [e for e in recorded if e["event"] in ("subagent_invoked", "plan_started")]
    source = repo.Repo(layout.root)
    try:
        base = _commit_id(invoked[0]["details"].get("base")) if invoked else source.head()
        if not source.exists(base):
            raise InvalidInput(f"the recorded base {base[:12]} is not in this clone")
        inputs = Inputs(layout, source, task_id, recorded, last_line)
    finally:
        source.close()
    with _scratch(layout.root, base) as root:
        scratch = Layout(root)
        _seed(layout, scratch, task_id)
        log = ReplayLog(scratch.log(task_id), task_id, recorded)
        recording = Recording(log, verify, layout, replayed, trusted)
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


class Inputs:
    """The plan, config, registry and tokens each recorded line was written with.

    Every command that logs ends in a record commit holding the very bytes it parsed of
    them, and naming its last line (Harness-Log-Head). So line i was written with the inputs
    of the oldest record commit naming line i or a later one; lines past the last record
    commit (a command killed before it recorded) with the files as they are now. A person's
    edit to the plan between epochs, or a token revoked since, replays as it happened.
    """

    def __init__(
        self, layout: Layout, source: repo.Repo, task_id: str, recorded: list[Event], last: str
    ) -> None:
        self.task_id, self.recorded = task_id, recorded
        self.paths = [layout.rel(p) for p in (layout.plan(task_id), layout.config, layout.registry)]
        self.tokens = layout.rel(layout.tokens)
        lines = {d: i for i, d in enumerate([*(e["prev"] for e in recorded[1:]), last])}
        self.commits: list[tuple[int, str]] = []
        for sha, found in source.task_commits(task_id, source.head(), records=True):
            at = lines.get(found.get("Harness-Log-Head", ""))
            if at is not None:
                self.commits.append((at, sha))
        self.commits.sort()
        self.now = {
            rel: files.read_regular(layout.root / rel, rel, layout.root) for rel in self.all
        }

    @property
    def all(self) -> list[str]:
        return [*self.paths, self.tokens]

    def source(self, seq: int) -> tuple[str | None, int | None]:
        """The record commit whose inputs line `seq` was written with (None: today's files)
        and how many lines the log held when that commit was made (None: all)."""
        at = bisect.bisect_left(self.commits, (seq, ""))
        if at == len(self.commits):
            return None, None
        line, sha = self.commits[at]
        return sha, line + 1

    def seed(self, scratch: Layout, sha: str | None, seq: int) -> None:
        """Write the inputs of `sha` into the scratch clone, with the one-shot spends of calls
        the replay has not applied yet undone (it spends them again as it applies them)."""
        applied = {
            str(e["details"].get("call_id"))
            for e in self.recorded[:seq]
            if e["event"] == "subagent_diffs_applied"
        }
        git = repo.Repo(scratch.root)  # a clone sharing the source's objects
        try:
            found = {rel: self.now[rel] if sha is None else git.read(sha, rel) for rel in self.all}
        finally:
            git.close()
        for rel, data in found.items():
            target = scratch.root / rel
            if data is None:
                target.unlink(missing_ok=True)
                continue
            if rel == self.tokens:
                data = _unspent(data, self.task_id, applied)
            # Replaces whatever the base commit has there (a symlink too), never through it.
            files.atomic_write(target, data)


def _unspent(data: bytes, task_id: str, applied: set[str]) -> bytes:
    """The token store with this task's spends undone but those of calls in `applied`."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data  # refused with its own line when the task loads it
    tokens = doc.get("tokens") if isinstance(doc, dict) else None
    for token in tokens if isinstance(tokens, list) else []:
        spent = token.get("spent") if isinstance(token, dict) else None
        if not isinstance(spent, dict) or spent.get("task_id") != task_id:
            continue
        if spent.get("call_id") not in applied:
            del token["spent"]
    return files.pretty(doc)


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
    task: orchestrator.Task | None = None
    loaded: str | None = ""
    try:
        while True:
            wanted, log.limit = inputs.source(len(log.events))
            if task is None or wanted != loaded:
                if task is not None:
                    task.git.close()
                    task = None
                inputs.seed(scratch, wanted, len(log.events))
                task = orchestrator.Task.load(scratch, task_id, log.clock, log=log)
                task.recording = recording
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


def _step(task: orchestrator.Task, log: ReplayLog) -> bool:
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


def _recorded(layout: Layout, task_id: str) -> tuple[list[Event], str]:
    """The recorded log, read and chain-checked (a broken chain is refused here), and the
    hash of its last line."""
    path = layout.log(task_id)
    if not layout.plan(task_id).exists():
        raise InvalidInput(f"ai/tasks/{task_id}/plan.json: file not found")
    if not path.exists():
        raise InvalidInput(f"ai/tasks/{task_id}/progress.ndjson: nothing recorded to replay")
    log = Log(path, task_id, clock.SystemClock())  # read only: no clock is read
    if not log.events:
        raise InvalidInput(f"ai/tasks/{task_id}/progress.ndjson: nothing recorded to replay")
    return log.events, log.head


@contextmanager
def _scratch(source: Path, base: str) -> Iterator[Path]:
    """A throw-away clone sharing the source's objects, on a branch at `base`."""
    top = Path(tempfile.mkdtemp(prefix="harness-replay-"))
    root = top / "repo"
    try:
        git = repo.Repo(source)
        try:
            git.clone_shared(root)
        finally:
            git.close()
        scratch = repo.Repo(root)
        try:
            scratch.checkout_new_branch("harness-replay", base)
        finally:
            scratch.close()
        yield root
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _seed(source: Layout, scratch: Layout, task_id: str) -> None:
    """Every recorded exchange, and no log or checklist: the replay writes its own. Only
    regular files are copied, each reached without following a symlink: anything else in
    the record (a link out of the repository, say) stops the replay."""
    shutil.rmtree(scratch.exchanges(task_id), ignore_errors=True)
    for rel, found in files.walk(source.root, source.rel(source.exchanges(task_id))):
        if isinstance(found, str):
            raise InvalidInput(f"{rel}: {found}: a record holds only regular files")
        target = scratch.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(found)
    log = scratch.log(task_id)
    log.unlink(missing_ok=True)
    scratch.checklist(task_id).unlink(missing_ok=True)
