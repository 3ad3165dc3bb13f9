"""`harness audit`: check a task's record without trusting any of it.

The log is read one line at a time and never kept: what stays in memory is per subtask
(the plan's ids and scopes, which are done, the attempt in progress) and per call or token,
never per event. progress.Log is not used: it loads every event and stops at the first
problem, where here every problem is a finding and the audit goes on.

git does its share in bulk and in parallel, started before the log is read: the diff
against the last harness commit and the untracked files, the exchange files' contents
(audit_exchanges), and the task's subtask commits, oldest first, read in step with the log
that names them in the same order (audit_commits). What the commits must say of the log,
and with a key what its signatures cover, is audit_record's to judge. The plan is read one
subtask at a time (planstream); the write tokens the log names are checked in audit_tokens.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ijson

from harness.base import files, ids, schemas, scope
from harness.base.errors import InvalidInput
from harness.readers import audit_record
from harness.readers.audit_commits import Commits
from harness.readers.audit_exchanges import ExchangeAudit
from harness.readers.audit_tokens import TokenAudit
from harness.readers.findings import Finding, Findings
from harness.record import progress, protocol
from harness.record.protocol import short
from harness.repository import repo
from harness.repository.layout import Layout
from harness.spec import planstream

if TYPE_CHECKING:  # the `sign` extra's key type, imported by `audit --key` alone
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

_Event = dict[str, Any]
_Planned = tuple[tuple[str, ...], tuple[str, ...]]  # a subtask's scope's globs, its depends_on
_NO_DETAILS: dict[str, Any] = {}


@dataclass
class Report:
    task_id: str
    events: int  # lines read
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return not self.findings

    def doc(self) -> dict[str, object]:
        """The report as `harness audit --json` prints it."""
        return {
            "task_id": self.task_id,
            "events": self.events,
            "ok": self.ok,
            "findings": [{"seq": f.seq, "reason": f.reason} for f in self.findings],
        }


def audit(layout: Layout, task_id: str, key: Ed25519PublicKey | None = None) -> Report:
    """Every finding about the task's log, plan, exchanges, commits and tokens, by line; with
    `key`, about the log head signatures of its record commits too (checkpoint.audit).

    A finding's seq is the position of the line in the file, which is its seq in a sound log.
    """
    if not layout.task_dir(task_id).is_dir():
        raise InvalidInput(f"ai/tasks/{task_id}: no such task")
    return _Audit(layout, task_id, key).run()


class _Needs(Mapping[str, tuple[str, ...]]):
    """Subtask id -> its depends_on, as protocol.Model asks it, read from the audit's table
    of the plan."""

    def __init__(self, plan: dict[str, _Planned]) -> None:
        self.plan = plan

    def __getitem__(self, sid: str) -> tuple[str, ...]:
        return self.plan[sid][1]

    def __contains__(self, sid: object) -> bool:
        return sid in self.plan  # asked of every event: the dict's own test, not Mapping's

    def __iter__(self) -> Iterator[str]:
        return iter(self.plan)

    def __len__(self) -> int:
        return len(self.plan)


# -- the audit -------------------------------------------------------------------------------


class _Audit:
    def __init__(self, layout: Layout, task_id: str, key: Ed25519PublicKey | None) -> None:
        self.layout, self.task_id, self.key = layout, task_id, key
        self.found = Findings()
        self.add = self.found.add
        self.git = repo.Repo(layout.root)
        self.commits = Commits(self.git, task_id)
        self.applied_commits = audit_record.Applied(
            self.commits.listing(), self.commits.elsewhere, self.add
        )
        self.exchanges = ExchangeAudit(layout, task_id, self.git, self.found)
        self.tasks_dir = layout.rel(layout.task_dir(task_id))
        # Subtask id -> (the globs its token must cover, its depends_on); None when the plan
        # is unreadable.
        self.plan: dict[str, _Planned] | None = None
        self.supervised: set[str] = set()  # subtasks whose change counts once approved
        self.approved: set[str] = set()  # worker calls a verdict approved
        self.write_tokens = TokenAudit(layout, task_id, self.git, self.found)
        # Subtasks whose answer with a change was taken and has not landed or failed, in the
        # order taken: answers are taken in plan order, and each lands before the next.
        self.landing: dict[str, int] = {}
        self.model = protocol.Model()
        self.events = 0

    def run(self) -> Report:
        try:
            return self.check()
        finally:
            self.git.close()

    def check(self) -> Report:
        try:
            head: str | None = self.git.head()
        except InvalidInput:
            head = None
        anchor, records = self.anchor(head)
        with ExitStack() as stack:
            diff = untracked = blobs = None
            if anchor is not None:
                paths = (f"{self.tasks_dir}/", f"{self.exchanges.rel}/")
                diff = self.git.working_changes(stack, anchor, paths)
                untracked = self.git.untracked(stack, paths)
                blobs = self.exchanges.blobs(stack, anchor)
            self.commits.start(stack, head)
            self.read_plan()
            self.read_inputs()
            self.write_tokens.read()
            log = self.read_log(audit_record.heads(records))
            for reason in self.applied_commits.unnamed():
                self.add("commit", None, reason)
            for kind, seq, reason in audit_record.judge(self.task_id, log, records, self.key):
                self.add(kind, seq, reason)
            if diff is not None and untracked is not None and blobs is not None:
                dirty = self.differences(str(anchor), diff, "differs from")
                dirty |= self.differences(str(anchor), untracked, "is not in")
                self.exchanges.check(self.model.calls, blobs.result(), dirty)
            else:  # no harness commit: every exchange folder is read from disk
                self.exchanges.check(self.model.calls, None, set())
        self.write_tokens.check_spent()
        return Report(self.task_id, self.events, self.found.result())

    # -- the last harness commit -------------------------------------------------------------

    def anchor(self, head: str | None) -> tuple[str | None, list[audit_record.Commit]]:
        """The latest commit on HEAD carrying `Harness-Task: <task>`, and it with every
        record commit of the task (one per command), newest first: the commits audit_record
        holds to the log by their heads (a subtask commit is held to the line naming it)."""
        if head is None:
            if self.layout.log(self.task_id).exists():
                self.add("record", None, "the repository has no commits")
            return None, []
        last = self.git.last_task_commit(self.task_id, head)
        if last is None:
            if self.layout.log(self.task_id).exists():  # a task never run has no record yet
                self.add("record", None, f"no commit on HEAD carries Harness-Task: {self.task_id}")
            return None, []
        sha, found = last
        if audit_record.HEAD not in found:
            self.add("record", None, f"commit {short(sha)} carries no Harness-Log-Head")
        records = self.git.task_commits(self.task_id, head, records=True)
        return sha, [last, *(c for c in records if c[0] != sha)]

    def differences(self, anchor: str, spool: repo.Spool, how: str) -> set[str]:
        """Report the files git listed as differing from the last harness commit; return
        the exchange folders they are in, whose files must be read from disk, not git."""
        prefix = self.exchanges.rel + "/"
        dirty = set()
        for raw in repo.split(spool.result()):
            path = raw.decode("utf-8", "surrogateescape")
            self.add("record", None, f"{path} {how} the last harness commit {short(anchor)}")
            if path.startswith(prefix):
                dirty.add(path[len(prefix) :].partition("/")[0])
        return dirty

    # -- plan and tokens ---------------------------------------------------------------------

    def read_plan(self) -> None:
        path = self.layout.plan(self.task_id)
        label = f"{self.tasks_dir}/plan.json"
        try:
            opened = files.open_regular(path, label, self.layout.root)
        except InvalidInput as exc:
            self.add("plan", None, str(exc))
            return
        if opened is None:
            self.add("plan", None, f"{label}: file not found")
            return
        items = "/properties/subtasks/items"
        item = schemas.fast_check("plan", items)
        head: dict[str, Any] = {}
        plan: dict[str, _Planned] = {}
        shared: dict[tuple[str, ...], tuple[str, ...]] = {}  # one tuple per distinct scope
        # one pair per distinct scope of the subtasks that depend on none: a table of one
        # entry per subtask, not two, and most share their pair
        alone: dict[tuple[str, ...], _Planned] = {}
        first: list[Any] = []
        own: dict[str, object] = {}  # subtask id -> its own `supervised`, when it says
        try:
            with opened as fh:
                for key, value in planstream.members(fh):
                    if key is not None:
                        head[key] = value
                        continue
                    if not item(value):
                        # jsonschema may take what the fast check refuses (a final newline)
                        found = schemas.problem("plan", value, items) or "$: not a subtask"
                        self.add("plan", None, f"{label}: $.subtasks[{len(plan)}]{found[1:]}")
                        return
                    if value["id"] in plan:
                        self.add("plan", None, f"{label}: duplicate subtask id {value['id']!r}")
                        return
                    # A subtask running a plan writes nothing itself: its plan's subtasks do.
                    written = value.get("write_scope", ())
                    globs = (*scope.as_list(written), *value.get("creates", ()))
                    globs = shared.setdefault(globs, globs)
                    needs = tuple(value.get("depends_on", ()))
                    # one string for the id, in this table and protocol's table of those done
                    plan[sys.intern(value["id"])] = (
                        (globs, needs) if needs else alone.setdefault(globs, (globs, ()))
                    )
                    if "supervised" in value:
                        own[value["id"]] = value["supervised"]
                    first = first or [value]
        except (ijson.JSONError, ValueError, UnicodeDecodeError) as exc:
            self.add("plan", None, f"{label}: invalid JSON: {exc}")
            return
        # The members besides the subtasks, checked with one subtask standing for them all.
        problem = schemas.problem(
            "plan", {**head, "subtasks": first} if "subtasks" in head else head
        )
        if problem is not None:
            self.add("plan", None, f"{label}: {problem}")
        elif head["task_id"] != self.task_id:
            self.add("plan", None, f"{label}: $.task_id: {head['task_id']!r} is not this task")
        else:
            self.plan = plan
            plan_wide = head.get("supervised", False)
            self.supervised = {sid for sid in plan if own.get(sid, plan_wide) is not False}

    def read_inputs(self) -> None:
        """The config and registry the next record commit would carry: audit does not judge
        them (replay reads each epoch's from its record commit), but one that is not a
        regular file inside the repository is a forged record."""
        for path in (self.layout.config, self.layout.registry):
            try:
                files.read_regular(path, self.layout.rel(path), self.layout.root)
            except InvalidInput as exc:
                self.add("record", None, str(exc))

    # -- the log -----------------------------------------------------------------------------

    def read_log(self, heads: Collection[str]) -> audit_record.Log:
        """Check every line; return what audit_record judges of the log: its length, and
        where each of `heads` (recorded log heads) is."""
        try:
            found = files.open_regular(
                self.layout.log(self.task_id), f"{self.tasks_dir}/progress.ndjson", self.layout.root
            )
        except InvalidInput as exc:
            self.add("line", None, str(exc))
            return audit_record.Log(0, {})
        if found is None:
            return audit_record.Log(0, {})
        model = self.model = protocol.Model(None if self.plan is None else _Needs(self.plan))
        add, index = self.add, -1
        at: dict[str, int] = {}
        with found as fh:
            for line in progress.read(files.lines(fh), self.task_id, model):
                index = line.index
                if line.digest in heads:
                    at[line.digest] = index
                for problem in line.problems:
                    at_seq = index if problem.at is None else problem.at
                    add(problem.kind, at_seq, problem.reason)
                if line.event is not None:
                    self.records(index, line.event)
        self.events = index + 1
        for step, att in model.unanswered():
            add(
                "order",
                model.invoked_at(att),
                f"call {short(att.call_id)} of {step} has no outcome",
            )
        return audit_record.Log(self.events, at)

    def records(self, i: int, ev: _Event) -> None:
        """What the order does not say: each commit and token an event names, checked."""
        name, step = ev["event"], ev.get("step")
        if step is None:
            return
        details = ev.get("details", _NO_DETAILS)
        if name == "subagent_succeeded" and details.get("diffs"):
            self.landing.pop(step, None)
            self.landing[step] = i
        elif name in protocol.FAILURES or name == "step_failed":
            self.landing.pop(step, None)
        if name == "subagent_invoked" and details.get("token") is not None:
            self.use_token(i, ev, step, details["token"], "invoked")
        elif name == "subagent_diffs_applied":
            self.in_order(i, step)
            self.applied(i, ev, step, details)
            self.unapproved(i, name, step, details)
        elif name in ("step_completed", "step_failed") and "plan" in details:
            self.linked(i, name, details)
        elif name == "step_completed":
            self.unapproved(i, name, step, details)
        elif name == "step_approved":
            self.approved.add(str(self.model.attempt(step).call_id))

    def in_order(self, i: int, step: str) -> None:
        """A change lands only once every answer taken before it has landed or failed."""
        taken = self.landing.pop(step, i)
        earlier = next(iter(self.landing.items()), None)
        if earlier is not None and earlier[1] < taken:
            self.add(
                "order",
                i,
                f"{step} landed before {earlier[0]}, whose answer was taken first (at seq "
                f"{earlier[1]}): the subtask commits are out of plan order",
            )

    def unapproved(self, i: int, name: str, step: str, d: dict[str, Any]) -> None:
        """A supervised subtask's change (or answer) counts only once a verdict approved it."""
        if step in self.supervised and d.get("call_id") not in self.approved:
            call = short(d.get("call_id"))
            self.add("order", i, f"{name} of supervised {step} (call {call}) with no approval")

    def linked(self, i: int, name: str, d: dict[str, Any]) -> None:
        """A nested plan's end names a record commit of that task on this branch, whose copy
        of the task's log ends with the line it names (task_completed, if it completed)."""
        task_id, commit, log_head = d.get("plan"), d.get("commit"), d.get("log_head")
        # A link names a commit by its id, never by a ref.
        if not (isinstance(task_id, str) and isinstance(commit, str)) or not ids.whole(
            ids.COMMIT, commit
        ):
            self.add("record", i, f"{name} names no nested task and commit id")
            return
        if not (self.git.exists(commit) and self.git.is_ancestor(commit, "HEAD")):
            self.add("record", i, f"commit {short(commit)} of task {task_id} is not on HEAD")
            return
        trailers = repo.trailers(self.git.message(commit))
        data = self.git.read(commit, self.layout.rel(self.layout.log(task_id)))
        if trailers.get("Harness-Task") != task_id or data is None:
            self.add("record", i, f"commit {short(commit)} records no log of task {task_id}")
            return
        last = data.rstrip(b"\n").rpartition(b"\n")[2]
        if progress.line_hash(last) != log_head:
            self.add(
                "record",
                i,
                f"the log of task {task_id} at {short(commit)} does not end with the line "
                f"{short(log_head)} it names",
            )
        elif name == "step_completed" and b'"event":"task_completed"' not in last:
            self.add("record", i, f"task {task_id} had not completed at {short(commit)}")

    def applied(self, i: int, ev: _Event, step: str, d: dict[str, Any]) -> None:
        call, commit, token = d.get("call_id"), d.get("commit"), d.get("token")
        if isinstance(commit, str) and ids.whole(ids.COMMIT, commit):
            wanted = {
                "Harness-Task": self.task_id,
                "Harness-Subtask": step,
                "Harness-Call-Id": call,
                "Harness-Log-Head": ev["prev"],
            }
            self.applied_commits.check(i, commit, wanted)
        else:
            self.add("commit", i, f"details.commit {commit!r} is not a commit id")
        invoked = self.model.attempt(step).invoked
        expected = None if invoked is None else invoked.get("details", _NO_DETAILS).get("token")
        if token != expected:
            self.add("token", i, f"token {token} is not {expected}, the call's token")
        if not isinstance(token, str):
            return
        self.use_token(i, ev, step, token, "applied")
        self.write_tokens.spend(i, token, call, commit)

    # -- tokens ------------------------------------------------------------------------------

    def use_token(self, i: int, ev: _Event, step: str, token_id: object, what: str) -> None:
        """The token, held to the globs of the subtask it was used for (audit_tokens)."""
        planned = None if self.plan is None else self.plan.get(step)
        globs = None if planned is None else planned[0]
        self.write_tokens.use(i, ev, globs, token_id, what)
