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

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import orjson

from . import clock, files, orchestrator, repo, state
from .acceptance import Judge
from .diffgate import Change
from .errors import Halted, InvalidInput
from .layout import Layout
from .progress import Log

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

    @property
    def expected(self) -> Event | None:
        seq = len(self.events)
        return self.recorded[seq] if seq < len(self.recorded) else None

    def write(self, record: dict[str, Any]) -> dict[str, Any]:
        """Hold the event the orchestrator built to the recorded one, then write that."""
        expected = self.expected
        if expected is None:
            raise RecordEnds
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

    def accept(self, judge: Judge) -> bool:
        return self._copy(("phase_completed", "acceptance_failed"), "acceptance_failed")


@dataclass
class Recording:
    """The recorded answers, bases and checks a replaying task draws on."""

    log: ReplayLog
    verify: bool

    def checks(self, step: str) -> RecordedChecks | None:
        return None if self.verify else RecordedChecks(self.log, step)

    def unrecorded(self, call_id: str) -> NoReturn:
        expected = self.log.expected
        if expected is None:
            raise RecordEnds
        raise Diverged(
            len(self.log.events), describe(expected), f"a call not in the record ({call_id[:12]})"
        )

    def move_to_base(self, task: orchestrator.Task) -> None:
        """Fast-forward over the commits people (or record commits) added before this call.

        Only commits that are not subtask commits may be skipped this way: a recorded base
        that does not descend from the replay's HEAD through such commits is a divergence.
        """
        expected = self.log.expected
        if expected is None or expected["event"] != "subagent_invoked":
            return
        git, head = task.git, task.git.head()
        base = _commit_id(expected["details"].get("base"))
        if base == head:
            return
        between = git.try_git("rev-list", "--format=%B", f"{head}..{base}")
        if git.try_git("merge-base", "--is-ancestor", head, base)[0] != 0 or between[0] != 0:
            raise Diverged(
                len(self.log.events),
                f"a call on base {base[:12]}",
                f"HEAD {head[:12]}, which that base does not descend from",
            )
        if "Harness-Call-Id:" in between[1]:
            raise Diverged(
                len(self.log.events),
                f"a call on base {base[:12]}",
                f"subtask commits between HEAD {head[:12]} and that base",
            )
        paths = git.git("diff", "--name-only", "-z", "--no-renames", head, base).split("\0")
        outside = [p for p in paths if p and not p.startswith("ai/")]
        git.advance(git.branch(), base, head)
        if outside:
            git.sync(base, outside)


@dataclass(frozen=True)
class Result:
    task_id: str
    base: str
    events: int
    commits: list[str]
    verified: bool


def replay(layout: Layout, task_id: str, verify: bool) -> Result:
    """Replay the task recorded in `layout` in a scratch clone; Diverged names the first
    difference."""
    recorded = _recorded(layout, task_id)
    invoked = [e for e in recorded if e["event"] == "subagent_invoked"]
    source = repo.Repo(layout.root)
    try:
        base = _commit_id(invoked[0]["details"].get("base")) if invoked else source.head()
        if source.try_git("cat-file", "-e", f"{base}^{{commit}}")[0] != 0:
            raise InvalidInput(f"the recorded base {base[:12]} is not in this clone")
    finally:
        source.close()
    with _scratch(layout.root, base) as root:
        scratch = Layout(root)
        _seed(layout, scratch, task_id)
        log = ReplayLog(scratch.log(task_id), task_id, recorded)
        task = orchestrator.Task.load(scratch, task_id, log.clock, log=log)
        task.recording = Recording(log, verify)
        try:
            _run(task, log)
        except InvalidInput as exc:
            # A recorded exchange that fails its own hashes, say.
            raise Halted(f"replay stopped: {exc}") from None
        finally:
            task.git.close()
        if len(log.events) < len(recorded):
            index = len(log.events)
            raise Diverged(index, describe(recorded[index]), "the replay stopped there")
    commits = [
        str(e["details"]["commit"]) for e in recorded if e["event"] == "subagent_diffs_applied"
    ]
    return Result(task_id, base, len(recorded), commits, verify)


def _commit_id(value: object) -> str:
    """A recorded base, which must be a full commit id before git sees it."""
    if not isinstance(value, str) or not _SHA.fullmatch(value):
        raise InvalidInput(f"the record names base {str(value)[:40]!r}, which is no commit id")
    return value


def _run(task: orchestrator.Task, log: ReplayLog) -> None:
    """Step until the task completes or the record ends; a halt the record shows a person
    resolving is resolved the same way."""
    while True:
        try:
            if orchestrator.step(task) is None:
                return
        except RecordEnds:
            return
        except Diverged:
            raise
        except Halted as halt:
            expected = log.expected
            if expected is None:
                return
            if expected["event"] != "blocker_resolved" or state.blocker(task.events) is None:
                raise Diverged(len(log.events), describe(expected), f"a halt: {halt}") from None
            log.copy_expected()


def _recorded(layout: Layout, task_id: str) -> list[Event]:
    """The recorded log, read and chain-checked (a broken chain is refused here)."""
    path = layout.log(task_id)
    if not layout.plan(task_id).exists():
        raise InvalidInput(f"ai/tasks/{task_id}/plan.json: file not found")
    if not path.exists():
        raise InvalidInput(f"ai/tasks/{task_id}/progress.ndjson: nothing recorded to replay")
    events = Log(path, task_id, clock.SystemClock()).events  # read only: no clock is read
    if not events:
        raise InvalidInput(f"ai/tasks/{task_id}/progress.ndjson: nothing recorded to replay")
    return events


@contextmanager
def _scratch(source: Path, base: str) -> Iterator[Path]:
    """A throw-away clone sharing the source's objects, on a branch at `base`."""
    top = Path(tempfile.mkdtemp(prefix="harness-replay-"))
    root = top / "repo"
    try:
        git = repo.Repo(source)
        try:
            git.git("clone", "-q", "--shared", "--no-checkout", str(source), str(root))
        finally:
            git.close()
        scratch = repo.Repo(root)
        try:
            scratch.git("checkout", "-q", "-b", "harness-replay", base)
        finally:
            scratch.close()
        yield root
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _seed(source: Layout, scratch: Layout, task_id: str) -> None:
    """The inputs as recorded: plan, config, registry, tokens (with this task's one-shot
    spends undone, since the replay spends them again) and every recorded exchange."""
    for path in (source.plan(task_id), source.config, source.registry):
        if path.exists():
            target = scratch.root / path.relative_to(source.root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    if source.tokens.exists():
        data = orjson.loads(source.tokens.read_bytes())
        for token in data.get("tokens", []):
            if isinstance(token, dict) and (token.get("spent") or {}).get("task_id") == task_id:
                del token["spent"]
        scratch.tokens.parent.mkdir(parents=True, exist_ok=True)
        scratch.tokens.write_bytes(files.pretty(data))
    if source.exchanges(task_id).is_dir():
        shutil.rmtree(scratch.exchanges(task_id), ignore_errors=True)
        shutil.copytree(source.exchanges(task_id), scratch.exchanges(task_id), symlinks=True)
    log = scratch.log(task_id)
    log.unlink(missing_ok=True)
    scratch.checklist(task_id).unlink(missing_ok=True)
