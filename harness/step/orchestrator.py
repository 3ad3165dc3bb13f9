"""The step (DESIGN §4): one subtask from envelope to commit, phase by phase.

Every phase first asks the log whether it already happened, so a step killed at any
point is finished by the next `harness next` without a second call, commit or event.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, NoReturn, Protocol

from harness.base import files, scope
from harness.base.clock import Clock
from harness.base.errors import AwaitingApproval, Halted, InvalidInput
from harness.base.printable import printable
from harness.boundary import egress, policy, proc, registry, sessions, worker
from harness.boundary.contain import Containment
from harness.boundary.registry import Agent
from harness.checks import acceptance, verify
from harness.checks.suite import Checks, Steps
from harness.gate import diffgate
from harness.record import envelope, exchanges, protocol, tokens
from harness.record.ledger import EMPTY, Ledger
from harness.record.progress import Log, fault
from harness.repository import repo
from harness.repository.layout import Layout
from harness.spec import checklist
from harness.spec import config as config_mod
from harness.spec import plan as plan_mod
from harness.step import budgets, nesting, preflight, supervision
from harness.step.live import Live, Silent

Event = dict[str, Any]


class Recording(Protocol):
    """Where a replay takes what a live step would make: answers, bases and check results."""

    def unrecorded(self, call_id: str) -> NoReturn:
        """A call the record does not hold was about to be made."""

    def base(self, task: Task) -> str:
        """The base the record's next call, or nested plan, began on (HEAD moved over
        human commits)."""

    def launches(self, flying: set[str]) -> bool:
        """Whether the record's next line is a launch (of a subtask not in `flying`)."""

    def exhausted(self) -> budgets.Exhausted | None:
        """The budget the record's next line halts the task for, if it does."""

    def checks(self, step: str) -> Steps | None:
        """The step's check results as recorded, or None to run the checks again."""

    def nested(self, task: Task, sub: plan_mod.Subtask) -> nesting.Unit:
        """How the nested plan `sub` runs ended, as recorded, with HEAD moved to its end."""

    def landing(self, task: Task, call_id: str) -> None:
        """HEAD moved to the parent of the recorded commit of `call_id`, before it lands."""


class Worker(Protocol):
    """What answers a call: Containment runs the agent in its sandbox; tests script it."""

    def probe(self, agent: Agent, scratch: Path) -> str:
        """The agent's version, asked before its first call."""

    def call(
        self,
        agent: Agent,
        git: repo.Repo,
        base: str,
        staging: Path,
        timeouts: dict[str, float],
        scratch: Path,
    ) -> proc.Result:
        """Answer the envelope staged in `staging` (its `stdin`), writing `stdout.ndjson`."""


@dataclass
class Task:
    """Everything one step needs, re-read from disk at its start (§9)."""

    layout: Layout
    task_id: str
    git: repo.Repo
    config: config_mod.Config
    plan: plan_mod.Plan
    agents: list[Agent]
    log: Log
    ledger: Ledger
    probed: dict[str, str] = field(default_factory=dict)
    recording: Recording | None = None
    worker: Worker | None = None  # who answers calls: the sandboxed agent unless a test says
    live: Live = field(default_factory=Silent)  # progress for people, never recorded
    depth: int = 0  # how deep in plans running plans this task runs (nesting.py)
    person: bool = True  # someone may approve a change now (`run --no-human`: nobody)
    rules: policy.Policy | None = None  # ai/policy.toml as this command read it

    @classmethod
    def load(
        cls, layout: Layout, task_id: str, clock: Clock, log: Log | None = None, depth: int = 0
    ) -> Task:
        root = layout.root
        plan_path = layout.plan(task_id)
        if not plan_path.exists():
            raise InvalidInput(f"{plan_path.relative_to(root)}: file not found")
        # What is validated is what the ledger enters: the record holds these very bytes.
        ledger = Ledger(layout, task_id)
        task = cls(
            layout=layout,
            task_id=task_id,
            git=repo.Repo(root),
            config=config_mod.load(layout.config, ledger.read(layout.config)),
            plan=plan_mod.load(plan_path, root, task_id, ledger.read(plan_path)),
            agents=registry.load(layout.registry, root, ledger.read(layout.registry)),
            log=log or Log(layout.log(task_id), task_id, clock),
            ledger=ledger,
            depth=depth,
        )
        if log is None:  # a replay makes no call; each exchange's argv holds its policy
            task.rules = policy.load(layout)
            task.agents = policy.apply(task.agents, task.rules, root)
        task.log.uncontained = not task.config.contained
        over = budgets.problems(task.config, task.plan)
        if over:
            raise InvalidInput(f"{layout.rel(plan_path)}: {over[0]}")
        # Refuse what a step would trip over later, before it writes anything.
        layout.check_writable(task_id)
        head = task.git.head()
        task.git.branch()
        task.token_store()
        # A run's pre-flight tells these with every other problem (preflight.remaining); a
        # replay has none, and its record must route as it did.
        unrouted = [
            preflight.unroutable(task.agents, sub, agent_id)
            for sub in task.plan.subtasks
            if sub.plan is None and log is not None  # a nested plan's subtasks route there
            for agent_id in sub.agents or (None,)
            if registry.route(task.agents, sub.role, agent_id) is None
        ] + [
            f"subtask {sub.id}: supervised, but no agent has the {supervision.ROLE!r} capability"
            for sub in task.plan.subtasks
            if log is not None and sub.supervised == plan_mod.AGENT and task.supervisor is None
        ]
        if unrouted:
            raise InvalidInput(f"ai/agents/registry.json: {'; '.join(unrouted)}")
        if log is None:  # a replay's own log is held to the record line by line instead
            nesting.check(layout, task_id, task.plan, task.config)  # (it replays each alone)
            rel = layout.rel(task.log.path)
            task.log.follow(ledger, task.git.blob_hashes(head, [rel])[rel] or EMPTY)
            task.refuse_cut_log(head)
        task.refuse_added_after_completion()
        return task

    def slots(self, asked: int) -> int:
        """Subtasks in flight at once: what the command asks, capped by the plan's and by
        the max_parallel budget."""
        cap = budgets.limits(self.config, self.plan).get("max_parallel", asked)
        return int(min(asked, self.plan.max_parallel or asked, cap))

    @property
    def model(self) -> protocol.Model:
        """What the log says so far: the protocol's reading of every line."""
        return self.log.model

    def refuse_added_after_completion(self) -> None:
        """A completed task is closed: a subtask added to its plan since would run after
        task_completed, which no log may hold."""
        completed = self.model.completed
        added = [s.id for s in self.plan.subtasks if s.id not in self.model.done]
        if completed is not None and added:
            raise InvalidInput(
                f"task {self.task_id} completed (seq {completed}); subtask {added[0]} was "
                "added to its plan since: put new work in a new task"
            )

    def refuse_cut_log(self, head: str) -> None:
        """The line the task's last commit recorded as the log's head must still be in the
        log: a log cut back (and committed so) would otherwise go on as if sound."""
        last = self.git.last_task_commit(self.task_id, head)
        recorded = None if last is None else last[1].get("Harness-Log-Head")
        events = self.log.events
        lines = {self.log.head, *(ev["prev"] for ev in events[1:])} if events else set()
        if recorded is not None and recorded not in lines:
            assert last is not None
            rel = self.layout.rel(self.log.path)
            raise InvalidInput(
                f"{rel}: lost the line commit {last[0][:12]} recorded as its head: restore it "
                f"(git checkout {last[0][:12]} -- {rel}) and commit it"
            )

    def scratch(self, name: str) -> Path:
        """A path of harness's own for this task, out of every sandbox's reach."""
        folder = self.layout.state / "tasks" / self.task_id
        folder.mkdir(parents=True, exist_ok=True)
        return folder / name

    @property
    def contain(self) -> Containment:
        return Containment(self.layout, self.config)

    @property
    def answering(self) -> Worker:
        """Who answers this task's calls."""
        return self.worker or self.contain

    @property
    def supervisor(self) -> Agent | None:
        """The registry agent that gives supervised subtasks their verdicts."""
        return registry.route(self.agents, supervision.ROLE, None)

    def probe(self, agent: Agent) -> str:
        """The agent's version (present, in range), asked once per agent per command."""
        if agent.id not in self.probed:
            self.probed[agent.id] = self.answering.probe(agent, self.scratch("probe"))
        return self.probed[agent.id]

    def token_store(self) -> list[tokens.Token]:
        """The token store as it is now: a person may revoke a token while a task runs."""
        path = self.layout.tokens
        return tokens.load(path, self.layout.root, self.ledger.read(path))

    def sync_checklist(self) -> None:
        data = checklist.render(self.plan, self.model.done).encode()
        path = self.layout.checklist(self.task_id)
        if not (self.ledger.holds(path, data) and files.read_untrusted(path, -1) == data):
            self.ledger.write(path, data)


class Finished(NamedTuple):
    """A subtask a run finished: its id and what its step_completed names."""

    subtask: str
    call_id: Any
    commit: Any


def steps(
    task: Task,
    once: bool,
    slots: int = 1,
    up: tuple[budgets.Account, plan_mod.Subtask] | None = None,
) -> Iterator[Finished | None]:
    """Run the task, yielding each subtask as it is done, then None once the task is
    complete; with `once`, until the first subtask ends. A halt is raised: a blocker (the
    task waits for a person), or, with `once`, the subtask that failed. A nested plan runs
    with the account of the run above it `up`, and the subtask there that runs it."""
    block = task.model.blocker
    if block is not None:
        raise Halted(
            f"task {task.task_id} is blocked at {block.get('step') or 'its end'}: "
            f"{block.get('error', 'see the log')} (fix it, then `harness resume`)"
        )
    settle(task)
    refuse_dirty(task)
    if task.recording is None:  # a replay calls no agent: what it was answered is recorded
        preflight_run(task)
    if task.model.started is None:
        task.log.append("task_started", "ok", details={"subtasks": len(task.plan.subtasks)})
    task.sync_checklist()
    pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="harness-call")
    try:
        yield from Run(task, slots, pool, up).go(once)
    finally:
        # Leaving early (a halt, an error, Ctrl-C), no call in flight, being taken or about
        # to start outlives the run; its invocation stays open in the log, so the next run
        # makes it again under the same call_id.
        proc.stop_all()
        pool.shutdown(wait=True)
        proc.allow_all()


class Run:
    """Subtasks in flight at once, up to `slots` (DESIGN §10), deterministic whatever the
    timing: a subtask is launched when its dependencies are done and a slot is free, first
    in plan order; results are taken strictly in plan order, so the log, every commit and
    the next launches depend on the plan and the answers alone, never on which call ended
    first. A slot frees when its answer is taken: a successful one's change is checked and
    committed while the next call runs; a failed attempt's retry waits for a slot.

    Each call's base is fixed by the plan: with one slot, everything committed before it
    (the head at its launch); with more, the head its latest dependency left, in plan
    order, or the head the run began on. Each change is gated, verified and committed on
    the branch as it is taken, so it lands on, and is checked against, what precedes it."""

    def __init__(
        self,
        task: Task,
        slots: int,
        pool: ThreadPoolExecutor,
        up: tuple[budgets.Account, plan_mod.Subtask] | None = None,
    ) -> None:
        self.task, self.slots, self.pool = task, slots, pool
        self.order = plan_mod.order(task.plan)
        self.position = {s.id: i for i, s in enumerate(self.order)}
        self.start = task.git.head()
        self.after: dict[str, str] = {}  # subtask ended in this run -> the head it left
        self.flying: dict[str, tuple[Subtask, Flight]] = {}
        self.queued: list[Subtask] = []  # failed an attempt: their next call waits for a slot
        self.landing: str | None = None  # taken, its change being checked and committed
        self.first: list[str] = []  # landings a killed run left: taken before any call
        self.once = False  # `next`: no new subtask once one ended
        self.free = list(range(slots))  # worker folders not in use, lowest first
        recording, limits = task.recording, budgets.limits(task.config, task.plan)
        metered = budgets.metered(limits, task.plan.subtasks)
        spent = budgets.spent(task.layout, task.task_id, task.log.events, task.config, metered)
        if recording is None:  # a replay measures no spending
            nesting.count(task.layout, task.plan, spent, task.config, metered)
        self.account = budgets.Account(
            limits,
            spent,
            time.monotonic(),
            recorded=None if recording is None else recording.exhausted,
            up=up,
        )
        self.exhausted: budgets.Exhausted | None = None  # the budget that stopped launches

    def go(self, once: bool) -> Iterator[Finished | None]:
        model = self.task.model
        self.resume_open()
        self.once = once
        while True:
            self.launch()
            if not self.flying:
                unit = self.unit()
                if unit is None:
                    break
                yield from self.nest(unit)
                continue
            first = self.first.pop(0) if self.first else None
            sid = first or min(self.flying, key=self.position.__getitem__)
            job, flight = self.flying.pop(sid)
            self.free.append(flight.slot)
            outcome = job.take(flight)
            if outcome is None:  # its retry, fallback or end comes first, in its slot
                self.queued.append(job)
                continue
            if self.slots > 1 or self.task.recording is not None:
                # The slot is free: the next call runs while this change is checked. (With
                # one slot, the next call sees this one's commit: it waits.)
                self.landing = sid
                self.launch()
                self.landing = None
            if job.settle(flight, outcome):
                self.ended(sid)
                call_id, commit, _ = model.done[sid]
                yield Finished(sid, call_id, commit)
            else:
                self.queued.append(job)
        self.halt_if_failed()
        if once and self.after:
            return
        if all(s.id in model.done for s in self.order):
            if model.completed is None:
                self.task.log.append("task_completed", "ok")
            yield None

    def resume_open(self) -> None:
        """Calls a killed run left without an outcome are taken first, whatever the slots,
        and a landing it left (an answer taken, its step not ended) before any of them: it
        was taken before every call still open, so it lands first, as it would have."""
        model = self.task.model
        landing = [s for s in self.order if _landing(model, s.id)]
        for sub in landing + [s for s in self.order if model.attempt(s.id).open]:
            if sub.id not in self.flying:
                self.begin(Subtask(self.task, sub, None, self.account, self.slots > 1))
        self.first = [s.id for s in landing if s.id in self.flying]

    def waiting(self, sub: plan_mod.Subtask) -> bool:
        model = self.task.model
        return (
            sub.id not in self.busy()
            and not model.resolved(sub.id)
            and all(model.goes_on(dep) for dep in sub.depends_on)
        )

    def busy(self) -> set[str]:
        """Subtasks under way: in flight, waiting for a slot, or landing."""
        found = {*self.flying, *(job.sub.id for job in self.queued)}
        return found | ({self.landing} if self.landing is not None else set())

    def launch(self) -> None:
        """Fill the free slots: first the subtasks whose next attempt waits for one, then,
        unless the task halts, new ones in plan order. A replay launches where its record
        does."""
        task = self.task
        while True:
            if task.recording is not None:
                self.exhausted = self.exhausted or task.recording.exhausted()
                if not task.recording.launches(self.busy() - {j.sub.id for j in self.queued}):
                    return
            elif len(self.flying) >= self.slots:
                return
            if self.queued:
                self.queued.sort(key=lambda j: self.position[j.sub.id])
                self.begin(self.queued.pop(0))
                continue
            if self.skip_dependents():  # a failure just logged left dependents to skip
                continue
            sub = self.next_new()
            if sub is None or sub.plan is not None:  # a nested plan waits to run alone
                return
            self.begin(Subtask(task, sub, self.base(sub), self.account, self.slots > 1))

    def next_new(self) -> plan_mod.Subtask | None:
        """The first subtask in plan order that may start, unless the task halts."""
        if self.halted() is not None or self.exhausted is not None:
            return None
        if self.once and self.after:  # `next`: one subtask, and it ended
            return None
        return next((s for s in self.order if self.waiting(s)), None)

    def unit(self) -> plan_mod.Subtask | None:
        """A subtask running another task's plan, once its turn came and nothing else is in
        flight: it runs alone, as one unit, with the run's slots (and so its budgets)."""
        recording = self.task.recording
        if recording is not None and not recording.launches(set()):
            return None
        sub = self.next_new()
        return sub if sub is not None and sub.plan is not None else None

    def nest(self, sub: plan_mod.Subtask) -> Iterator[Finished]:
        """Run the nested plan to its end and log how it ended, linked to its record; a
        replay takes the nested task's commits once its own replay rebuilt them."""
        task = self.task
        if task.model.attempt(sub.id).unit is None:  # else a killed run left it: it goes on
            base = task.git.head() if task.recording is None else task.recording.base(task)
            details = {"plan": sub.plan, "base": base}
            task.log.append("plan_started", "pending", step=sub.id, details=details)
        if task.recording is not None:
            unit = task.recording.nested(task, sub)
        else:
            unit = nesting.run(task, sub, self.account, self.slots)
        details = {"plan": sub.plan, "log_head": unit.log_head, "commit": unit.commit}
        if unit.error is None:
            task.log.append("step_completed", "ok", step=sub.id, details=details)
            self.ended(sub.id)
            yield Finished(sub.id, None, unit.commit)
            return
        details["phase"] = "plan"
        if sub.on_error != "stop":
            details["on_error"] = sub.on_error
        task.log.append("step_failed", "error", step=sub.id, details=details, error=unit.error)
        self.ended(sub.id)

    def begin(self, job: Subtask) -> None:
        """Put the subtask's next call in flight, or end it (failed) when it has none."""
        self.free.sort()
        # More than the slots only while calls a killed run left open are taken up again.
        slot = self.free.pop(0) if self.free else len(self.flying)
        try:
            flight = job.next_flight(self.pool, slot)
        except budgets.OverBudget as over:
            self.free.append(slot)
            self.exhausted = self.exhausted or over.exhausted
            return
        if flight is not None:
            self.flying[job.sub.id] = (job, flight)
        else:
            self.free.append(slot)
            self.ended(job.sub.id)

    def ended(self, sid: str) -> None:
        self.after[sid] = self.task.git.head()
        self.task.sync_checklist()

    def base(self, sub: plan_mod.Subtask) -> str | None:
        if self.slots == 1:
            return None  # the head at launch
        landed = [d for d in sub.depends_on if d in self.after]
        return self.after[max(landed, key=self.position.__getitem__)] if landed else self.start

    def halted(self) -> str | None:
        """The first subtask, in plan order, that failed this epoch under on_error "stop"."""
        return next((s.id for s in self.order if self.task.model.stops(s.id)), None)

    def skip_dependents(self) -> bool:
        """Log step_skipped for each subtask a failure under "skip_dependents" (or a skip)
        leaves without a dependency (plan order carries it down the graph); True if any."""
        model, busy, logged = self.task.model, self.busy(), False
        for sub in self.order:
            if model.resolved(sub.id) or sub.id in busy:
                continue
            cause = next((d for d in sub.depends_on if model.skips_dependents(d)), None)
            if cause is not None:
                self.task.log.append("step_skipped", "ok", step=sub.id, details={"cause": cause})
                self.after[sub.id] = self.task.git.head()
                logged = True
        return logged

    def halt_if_failed(self) -> None:
        """Nothing is in flight. A failure under "stop" blocks the task at that subtask.
        With `once`, the subtask this command ran failing or skipped is its failure.
        Otherwise, once nothing is left to run, failures that went on block the task at
        its end, naming each: a skip or a failure never counts as success."""
        model, log = self.task.model, self.task.log
        stop = self.halted()
        if stop is not None:
            if model.blocker is None:
                error = model.reason(stop) or "step failed"
                log.append("blocker_encountered", "blocked", step=stop, error=error)
            raise Halted(f"{stop} blocked: {model.reason(stop)}")
        if self.exhausted is not None:
            spent = self.exhausted
            error = f"budget {spent.why}"
            log.append("blocker_encountered", "blocked", details=spent.details(), error=error)
            raise Halted(
                f"task {self.task.task_id} halted: {error} (raise it in ai/harness.toml "
                "[budgets] or plan.json, then `harness resume`)"
            )
        if self.once and self.after:
            mine = [s for s in self.after if s not in model.done]
            if mine:
                raise Halted("; ".join(f"{s} {model.status(s)}: {model.reason(s)}" for s in mine))
            return
        failed = set(model.ended())
        ended = [s.id for s in self.order if s.id in failed]
        if not ended or not all(model.resolved(s.id) for s in self.order):
            return
        why = "; ".join(f"{s} {model.status(s)}: {model.reason(s)}" for s in ended)
        log.append("blocker_encountered", "blocked", error=why)
        raise Halted(f"task {self.task.task_id} is not complete: {why}")


def preflight_run(task: Task) -> None:
    """Refuse the run before its first call, nothing logged, when anything a subtask still
    to run needs is missing: every problem at once (preflight.remaining)."""
    head = task.git.head()
    checker = preflight.Checker(
        task.agents,
        task.token_store(),
        task.log.now(),
        task.probe,
        lambda paths: task.git.blob_hashes(head, paths),
        task.rules,
    )
    found = preflight.remaining(task.plan, task.model, checker, task.person)
    if found:
        raise Halted(
            f"pre-flight of task {task.task_id}: {len(found)} problem(s), no worker called: "
            + "; ".join(found)
        )


def resume(task: Task, reason: str) -> Any:
    """Log that a person resolved the task's blocker, for `reason`, and the blockers of the
    plans it runs; the step it blocked."""
    block = task.model.blocker
    if block is None:
        raise InvalidInput(f"task {task.task_id} is not blocked")
    nesting.resume(task, reason)
    task.log.append("blocker_resolved", "ok", step=block.get("step"), details={"reason": reason})
    return block.get("step")


def decide(task: Task, sid: str, verdict: supervision.Verdict, who: str) -> None:
    """Log a person's verdict on the change `sid` awaits approval for: CONTINUE (it is
    committed by the next `run`) or REORIENT (it runs again with the reason to follow)."""
    if sid not in task.plan.by_id:
        raise InvalidInput(f"task {task.task_id} has no subtask {sid}")
    att = task.model.attempt(sid)
    if not att.awaiting:
        raise InvalidInput(f"{sid} awaits no approval (status: {task.model.status(sid)})")
    log_verdict(task.log, sid, verdict, {"call_id": att.call_id, "by": protocol.HUMAN, "who": who})


def log_verdict(log: Log, sid: str, verdict: supervision.Verdict, details: dict[str, Any]) -> None:
    """A verdict, the supervisor's or a person's: its event says what follows (a commit, a
    retry with the correction, a stop for a person)."""
    event = supervision.EVENTS[verdict.action]
    details = details | verdict.details()
    if verdict.action == supervision.CONTINUE:
        log.append(event, "ok", step=sid, details=details)
        return
    words = "reoriented" if verdict.action == supervision.REORIENT else "paused"
    by = details.get("who") or details["by"]
    log.append(
        event, "error", step=sid, details=details, error=f"{words} by {by}: {verdict.reason}"
    )


def settle(task: Task) -> None:
    """Finish a run killed between moving the branch and updating the user's files: as a
    step does it (update_files), so anything a person changed since is kept, said so, and
    left for refuse_dirty to report."""
    finished = task.model.done
    for sub in task.plan.subtasks:
        att = task.model.attempt(sub.id)
        invoked = att.invoked
        if sub.id in finished or invoked is None or att.has("subagent_diffs_applied"):
            continue
        made = task.git.find_commit(
            "Harness-Call-Id", att.call_id or "", invoked["details"]["base"]
        )
        if made is not None:
            update_files(task, made, task.git.changed(made))


def update_files(task: Task, made: str, paths: Sequence[str]) -> None:
    """Bring the user's index and files to the commit `made` for `paths`, each only where
    both still hold the parent's version (or already the commit's). A worker call takes
    minutes: what the user changed or created meanwhile is kept as it is, one line each on
    stderr, and the commit stands."""
    git = task.git
    theirs = [p for p in paths if not git.matches(p, (f"{made}^", made))]
    blocked = git.sync(made, [p for p in paths if p not in theirs])
    for path in theirs:
        tell(f"kept your change to {path}; the commit holds the task's version")
    for path in blocked:
        tell(
            f"did not write {path}: a symlink, file or folder of yours is in its way; "
            "the commit holds the task's version"
        )


def tell(line: str) -> None:
    """A notice the step cannot return, since it goes on: printed at once, one line."""
    print("harness: " + printable(line), file=sys.stderr)


def refuse_dirty(task: Task) -> None:
    """The user's uncommitted work is never touched: refuse if it lies where we may write."""
    finished = task.model.done
    globs = [
        g for s in task.plan.subtasks if s.id not in finished for g in (*s.write_scope, *s.creates)
    ]
    risky = [p for p in task.git.dirty() if not p.startswith("ai/") and scope.matches(p, globs)]
    if risky:
        shown = ", ".join(risky[:5]) + (" ..." if len(risky) > 5 else "")
        raise InvalidInput(f"uncommitted changes where the task may write: {shown}")


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


class Subtask:
    """One subtask's step: attempts and the retry rule, its calls, and how their changes land."""

    def __init__(
        self,
        task: Task,
        sub: plan_mod.Subtask,
        base: str | None,
        account: budgets.Account,
        several: bool = False,
    ) -> None:
        self.task = task
        self.sub = sub
        self.log = task.log
        self.base = base  # fixed by the run (Run.base); None: the head at launch
        self.account = account  # asked before each new call
        self.several = several  # other calls may be in flight beside this one

    def next_flight(self, pool: Executor, slot: int) -> Flight | None:
        """The subtask's next call, launched; None once it has ended this epoch (its
        step_failed, or step_skipped, logged)."""
        while True:
            mine = self.task.model.step(self.sub.id)
            if mine is not None and (mine.failed or mine.skipped) is not None:
                return None
            att = self.task.model.attempt(self.sub.id)
            failed = att.failure
            if failed is not None:
                model, sid = self.task.model, self.sub.id
                if failed["event"] == "step_paused":  # for a person, whatever on_error says
                    self.error("step_failed", {"phase": "supervisor"}, str(failed.get("error")))
                    continue
                if protocol.retryable(failed) and model.may_retry(sid):
                    self.log.append(
                        "subagent_retried",
                        "pending",
                        step=sid,
                        details={"call_id": att.call_id, "after": failed["event"]},
                    )
                    continue
                if model.fallbacks(sid) + 1 < len(self.sub.agents):
                    given_up = self.agent_id()
                    details = {"call_id": att.call_id, "after": failed["event"]}
                    details |= {"from": given_up, "to": self.sub.agent_at(model.fallbacks(sid) + 1)}
                    self.log.append("subagent_fallback", "pending", step=sid, details=details)
                    continue
                self.fail(str(failed.get("error", failed["event"])), failed["event"])
                continue
            flight = self.launch(att, pool, slot)
            if flight is not None:
                return flight

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
        return ok

    # -- one attempt -----------------------------------------------------------------------

    def launch(self, att: protocol.Attempt, pool: Executor, slot: int) -> Flight | None:
        """Make the attempt's call (logged before it starts), or take it up again after a
        kill; None when it failed before any call."""
        task, sub = self.task, self.sub
        invoked = att.invoked
        agent = registry.route(task.agents, sub.role, self.agent_id())
        assert agent is not None, "the pre-flight checked every subtask routes"
        if invoked is None:
            self.account.check(sub)
        call = self.build_call(att, invoked, agent)
        if call is None:
            return None
        if invoked is None:
            details = {
                "subagent": agent.id,
                "role": sub.role,
                "call_id": call.call_id,
                "base": call.context["payload"]["base"],
                "attempt": att.number,
                "token": _token_of(call),
            }
            self.log.append(
                "subagent_invoked", "pending", step=sub.id, details=details, ts=call.prompt["ts"]
            )
            self.account.invoked(call.call_id, sub.id, agent.id)
        elif invoked["details"]["call_id"] != call.call_id:
            raise InvalidInput(
                f"subtask {sub.id} changed since call {invoked['details']['call_id'][:12]} "
                "was made: restore its plan, inputs and config, or resolve a blocker first"
            )
        folder = _slot_folder(slot)
        # With several in flight, say when each answer is in: it is taken in plan order.
        told = (lambda: task.live.returned(sub.id)) if self.several else None
        flight = Flight(att, agent, call, slot)
        job = self.start(flight, folder, told)
        if job is not None:
            flight.future = pool.submit(job)
        return flight

    def start(
        self, flight: Flight, folder: str, told: Callable[[], None] | None = None
    ) -> Callable[[], proc.Result] | None:
        """The flight's call, ready to run in the scratch `folder`; None when its exchange
        holds the answer already (flight.recorded)."""
        task, agent, call = self.task, flight.agent, flight.call
        flight.recorded = exchanges.load(
            task.layout.exchange(task.task_id, call.call_id), task.layout.root
        )
        if flight.recorded is not None:
            return None
        if task.recording is not None:
            task.recording.unrecorded(call.call_id)
        task.probe(agent)  # also for a call resumed after a kill: its meta names the version
        flight.staging = exchanges.stage(task.scratch("staging") / call.call_id, call)
        retried = self.retried_call(flight.att) if agent.resume else None
        sessions.prepare(
            task.scratch(folder), None if retried is None else self.session_store(retried)
        )
        timeouts = dict(call.prompt["payload"]["timeouts"])
        left = self.account.remaining_s()
        if left is not None:  # max_runtime_s: a call running at the deadline is stopped
            timeouts["hard_s"] = min(timeouts["hard_s"], left)
            timeouts["soft_s"] = min(timeouts["soft_s"], left)
        base = call.context["payload"]["base"]
        retry = envelope.RETRY_CONSTRAINT in call.prompt["payload"]["constraints"]
        task.live.started(self.sub.id, agent.id, call.prompt["payload"]["role"], retry)
        return partial(
            _answer,
            task.answering,
            agent,
            task.layout.root,
            base,
            flight.staging,
            timeouts,
            task.scratch(folder),
            told,
            self.backoff(flight.att),
        )

    def backoff(self, att: protocol.Attempt) -> float:
        """Seconds to wait before this attempt's call: what the model API asked of the call
        it retries (its retry-after), at most MAX_BACKOFF_S; nothing otherwise."""
        failed = self.previous_failure(att)
        asked = failed.get("details", {}).get("retry_after_s") if failed is not None else None
        return min(float(asked), MAX_BACKOFF_S) if isinstance(asked, int | float) else 0.0

    def take(self, flight: Flight) -> worker.Outcome | None:
        """The call's answer, its outcome logged; None when the call failed."""
        att, agent, call = flight.att, flight.agent, flight.call
        outcome = self.answer(flight)
        self.phase("call", outcome.status == "ok")
        if not (att.has("subagent_succeeded") or att.has("subagent_failed")):
            self.record_outcome(agent, call, outcome)
        return outcome if outcome.status == "ok" else None

    def settle(self, flight: Flight, outcome: worker.Outcome) -> bool:
        """Land a successful answer's change (or judge an answer without one); True when
        the step completed, False after a failure."""
        task, sub, call = self.task, self.sub, flight.call
        att = task.model.attempt(sub.id)  # as logged now: the flight's may predate its call
        if att.awaiting:  # asked before, and no person answered yet
            raise self.awaiting(att)
        diffs = outcome.result.get("diffs", [])
        commit = None
        if diffs:
            applied = att.last("subagent_diffs_applied")
            commit = (
                applied["details"]["commit"] if applied else self.land(att, call, outcome.result)
            )
            if commit is None:
                return False
        else:
            problems = acceptance.review_problems(
                sub, outcome.result, task.git, call.context["payload"]["base"]
            )
            if not self.phase("acceptance", not problems):
                failures = {"check": "acceptance", "failures": problems}
                self.error("acceptance_failed", failures, "; ".join(problems))
                return False
            if not self.supervise(att, call, outcome.result, [], None):
                return False
        details: dict[str, Any] = {"call_id": call.call_id, "commit": commit}
        if sub.loop is not None:
            stopped = self.round_ended(att, call, commit)
            if stopped is None:
                return False  # the next round's call comes next, in its slot
            details["loop"] = {"rounds": task.model.rounds(sub.id), "stopped": stopped}
        self.log.append("step_completed", "ok", step=sub.id, details=details)
        return True

    def round_ended(
        self, att: protocol.Attempt, call: envelope.Call, commit: str | None
    ) -> str | None:
        """A looped subtask's round is done: why the loop stops ("no_diff", "acceptance",
        "max"), or None when it goes on: loop_continued is logged and the next round runs on
        the head this one left, or, for an acceptance loop whose last change left criteria
        unmet and which now got no change, acceptance_failed is (it never stops unmet)."""
        sub, model = self.sub, self.task.model
        loop, rounds = sub.loop, model.rounds(sub.id)
        assert loop is not None
        if commit is None:
            earlier = self.earlier_round()
            unmet = [] if earlier is None else _unmet(earlier)
            if loop.until == "acceptance" and unmet:
                failures = {"check": "acceptance", "failures": unmet}
                self.phase("acceptance", False)
                self.error(
                    "acceptance_failed", failures, "the loop ended unmet: " + "; ".join(unmet)
                )
                return None
            return "no_diff"
        unmet = _unmet(att.last("phase_completed"))
        if loop.until == "acceptance" and not unmet:
            return "acceptance"
        if rounds >= loop.rounds:
            return "max"
        why = "; ".join(unmet) if unmet else "the round changed files"
        details = {"round": rounds, "call_id": call.call_id, "commit": commit, "why": why}
        if unmet:
            details["unmet"] = unmet
        self.log.append("loop_continued", "ok", step=sub.id, details=details)
        self.base = None  # the next round works on the head this one left
        return None

    def earlier_round(self) -> Event | None:
        """The loop_continued that ended the round before this one (None in round 1)."""
        if self.task.model.rounds(self.sub.id) == 1:
            return None
        found: Event = next(
            e
            for e in reversed(self.task.log.events)
            if e["event"] == "loop_continued" and e.get("step") == self.sub.id
        )
        return found

    def cleared(self, ts: str, base: str) -> preflight.Cleared | None:
        """The pre-flight before a new call (preflight.py); its problems fail the step,
        logged with their reasons, and no call is made."""
        task = self.task
        checker = preflight.Checker(
            task.agents,
            task.token_store(),
            ts,
            None if task.recording is not None else task.probe,  # a replay asks no agent
            lambda paths: task.git.blob_hashes(base, paths),
        )
        found = checker.subtask(self.sub, fallbacks=task.model.fallbacks(self.sub.id))
        if isinstance(found, list):
            self.fail("; ".join(found), "preflight")
            return None
        return found

    def build_call(
        self, att: protocol.Attempt, invoked: Event | None, agent: Agent
    ) -> envelope.Call | None:
        """The call for this attempt; rebuilt from the log's record when resuming one."""
        task, sub = self.task, self.sub
        if invoked is not None:
            ts, base = invoked["ts"], invoked["details"]["base"]
            token_id = invoked["details"]["token"]
        else:
            if task.recording is not None:
                base = task.recording.base(task)
            else:
                base = self.base or task.git.head()
            ts = task.log.now()
            cleared = self.cleared(ts, base)
            if cleared is None:
                return None
            token_id = cleared.token
        hashes = task.git.blob_hashes(base, sub.inputs)
        missing = [p for p, h in hashes.items() if h is None]
        if missing:
            self.fail(f"input not found at {base[:12]}: {', '.join(missing)}", "inputs")
            return None
        failed = self.previous_failure(att)
        retry_of = None if failed is None else str(failed.get("error", failed["event"]))
        correction = _detail(failed, "correction") if failed is not None else None
        return envelope.build(
            task_id=task.task_id,
            sub=sub,
            ts=ts,
            branch=task.git.branch(),
            base=base,
            readonly=list(task.config.readonly),
            visible=list(task.config.visible),
            token_id=token_id,
            input_hashes={p: h for p, h in hashes.items() if h is not None},
            blobs=self.blobs(retry_of, correction),
            retry=retry_of is not None,
            corrected=correction is not None,
            timeouts=dict(agent.timeouts or task.config.timeouts),
            budgets=self.call_budgets(),
            epoch=task.model.epoch,
            fallback=agent.id if task.model.fallbacks(sub.id) else None,
            session=self.session_for(agent, att),
        )

    def session_for(self, agent: Agent, att: protocol.Attempt) -> dict[str, Any] | None:
        """For an agent that resumes: keep the CLI's session, and resume the one of the call
        this attempt retries, as that call's answer named it (from the record, so a resumed
        or replayed run builds the same envelope)."""
        if not agent.resume:
            return None
        found: dict[str, Any] = {"keep": True}
        retried = self.retried_call(att)
        if retried is not None:
            exchange = exchanges.load(
                self.task.layout.exchange(self.task.task_id, retried), self.task.layout.root
            )
            named = exchanges.session_id(exchange.stdout) if exchange is not None else None
            if named is not None:
                found["resume"] = named
        return found

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

    def call_budgets(self) -> dict[str, Any]:
        """The call's own limits: the config's, with max_usd lowered to what is left of the
        cost budgets, so a CLI that can be told stops there itself."""
        found = dict(self.task.config.budgets)
        left = self.account.cost_left(self.sub)
        if left is not None and left > 0:
            found["max_usd"] = min(float(found.get("max_usd", left)), left)
        return found

    def previous_failure(self, att: protocol.Attempt) -> Event | None:
        """The failure this attempt retries; None for a first attempt (a fallback agent's,
        or a loop round's, too: the failure was another agent's or round's)."""
        mine = self.task.model.step(self.sub.id)
        return None if mine is None or att.number == mine.first else mine.last_failure

    def blobs(self, retry_of: str | None, correction: str | None = None) -> list[dict[str, str]]:
        """Artifacts of the subtasks this one depends on, the reason for a retry, and the
        supervisor's correction it must follow."""
        found: list[dict[str, str]] = []
        completed = self.task.model.done
        for dep in self.sub.depends_on:
            call_id = completed[dep].call_id if dep in completed else None
            if call_id is None:  # failed under "continue", or ran a plan: no answer to see
                continue
            exchange = exchanges.load(
                self.task.layout.exchange(self.task.task_id, call_id), self.task.layout.root
            )
            if exchange is None:
                raise InvalidInput(f"the exchange of {dep} ({call_id[:12]}) is missing")
            for name, text in exchange.artifacts().items():
                found.append({"name": f"{dep}/{name}", "text": text})
        if retry_of is not None:
            found.append({"name": "harness/previous-failure.txt", "text": retry_of})
        if correction is not None:
            found.append({"name": "harness/correction.txt", "text": correction})
        loop, rounds = self.sub.loop, self.task.model.rounds(self.sub.id)
        if loop is not None and rounds > 1:
            made = sorted(self.task.model.made(self.sub.id))
            found.append({"name": "harness/loop.txt", "text": _round_text(rounds, loop, made)})
        return found

    def answer(self, flight: Flight) -> worker.Outcome:
        """The call's answer: recorded in its exchange now if it was just made."""
        task, agent, call = self.task, flight.agent, flight.call
        folder = task.layout.exchange(task.task_id, call.call_id)
        limits = (task.config.max_output_bytes, task.config.max_artifact_bytes)
        exchange = flight.recorded
        if flight.future is not None and flight.staging is not None:
            result = flight.future.result()
            stdout = (flight.staging / "stdout.ndjson").read_bytes()
            outcome = self.lost_edit(
                worker.judge(stdout, result.code, result.timed_out, task.task_id, agent.id, limits),
                call,
            )
            made = {
                "task_id": task.task_id,
                "subtask": self.sub.id,
                "agent": agent.id,
                "agent_version": task.probed.get(agent.id, ""),
                "argv": [agent.cmd, *agent.args, *(agent.policy or ())],
                "exit_code": result.code,
                "timed_out": result.timed_out,
            }
            if outcome.cli_argv is not None:
                made["cli_argv"] = list(outcome.cli_argv)
            kept = (
                sessions.keep(
                    task.scratch(_slot_folder(flight.slot)), self.session_store(call.call_id)
                )
                if agent.resume
                else None
            )
            if kept is not None:
                resumed = call.prompt["payload"].get("session", {}).get("resume")
                made["session"] = {"sha256": kept, **({"resumed": resumed} if resumed else {})}
            exchange = exchanges.commit(flight.staging, folder, call, outcome, made, task.ledger)
            fault("after:exchange")
            if exchange.refused:
                tell(
                    f"{self.sub.id}: the agent reached for {', '.join(exchange.refused)}: "
                    f"refused (ai/exchanges/{task.task_id}/{call.call_id}/{egress.RECORD})"
                )
        assert exchange is not None, "the exchange was recorded or just committed"
        self.account.answered(call.call_id, exchange)
        meta = exchange.meta
        return self.lost_edit(
            worker.judge(
                exchange.stdout,
                meta["exit_code"],
                meta["timed_out"],
                task.task_id,
                agent.id,
                limits,
            ),
            call,
        )

    def lost_edit(self, outcome: worker.Outcome, call: envelope.Call) -> worker.Outcome:
        """A call that may write and answered ok without a change lost its edit (a CLI's
        edit tool failed and it said nothing, or the model never made one): a retryable
        failure, never a step done with nothing committed. A read-only call, a review, a
        loop round (which ends its loop so) and a subtask whose plan says a change is
        optional may answer without one."""
        sub = self.sub
        if (
            outcome.status != "ok"
            or outcome.result.get("diffs")
            or call.prompt["payload"]["write_scope"] == "none"
            or sub.role in NO_CHANGE_ROLES
            or sub.loop is not None
            or sub.no_change_ok
        ):
            return outcome
        return worker.Outcome(
            "error",
            "retryable",
            "the answer changes no file, though the subtask writes: a lost edit "
            '(a subtask that may rightly change nothing says "no_change_ok": true)',
        )

    def record_outcome(self, agent: Agent, call: envelope.Call, outcome: worker.Outcome) -> None:
        details: dict[str, Any] = {"subagent": agent.id, "call_id": call.call_id}
        if outcome.status == "ok":
            details["diffs"] = len(outcome.result.get("diffs", []))
            details["artifacts"] = [a["name"] for a in outcome.result.get("artifacts", [])]
            self.log.append("subagent_succeeded", "ok", step=self.sub.id, details=details)
        else:
            details["kind"] = outcome.kind
            if outcome.retry_after_s is not None:
                details["retry_after_s"] = outcome.retry_after_s
            self.error("subagent_failed", details, outcome.message)

    # -- gate, verify, commit ----------------------------------------------------------------

    def land(
        self, att: protocol.Attempt, call: envelope.Call, result: dict[str, Any]
    ) -> str | None:
        """Gate the diffs, verify them in scratch copies, commit, bring the user's files to the
        commit and log it; None after a failure."""
        task, sub = self.task, self.sub
        base = call.context["payload"]["base"]
        # A run killed after committing this call left the commit: finish its work instead.
        made = task.git.find_commit("Harness-Call-Id", call.call_id, base)
        if made is None:
            token = self.token_for_apply(call)
            if token is None:
                self.phase("gate", False)
                return None
            try:
                changes = diffgate.check(result["diffs"], self.rules(token))
            except diffgate.DiffRefused as refused:
                self.phase("gate", False)
                self.fail(str(refused), "gate")
                return None
            self.phase("gate", True)
            made = self.verify_and_commit(att, call, changes, result)
            if made is None:
                return None
        paths = task.git.changed(made)
        update_files(task, made, paths)
        fault("after:sync")
        token_id = str(_token_of(call))
        tokens.spend(
            task.ledger,
            task.layout.tokens,
            task.layout.root,
            token_id,
            task.task_id,
            call.call_id,
            made,
        )
        details = {"commit": made, "files": paths, "call_id": call.call_id, "token": token_id}
        self.log.append("subagent_diffs_applied", "ok", step=sub.id, details=details)
        return made

    def token_for_apply(self, call: envelope.Call) -> tokens.Token | None:
        """The invocation's token, checked again now (expiry, revocation, one-shot)."""
        token_id = _token_of(call)
        if token_id is None:
            self.fail("diffs returned but the call had no write token (write_scope none)", "gate")
            return None
        known = self.task.token_store()
        found = next((t for t in known if t.id == token_id), None)
        why = "it no longer exists" if found is None else found.usable_at(self.task.log.now())
        if why is not None:
            self.fail(f"write token {token_id}: {why}", "gate")
            return None
        return found

    def rules(self, token: tokens.Token) -> diffgate.Rules:
        cfg, sub = self.task.config, self.sub
        return diffgate.Rules(
            write_scope=sub.write_scope,
            token_paths=token.paths,
            readonly=cfg.readonly,
            creates=sub.creates,
            cited=frozenset(sub.inputs) | self.task.model.made(sub.id),
            manifests=cfg.manifests,
            no_new_deps=not sub.allow_new_deps,
            special=self.task.git.specials(self.task.git.head()),
            tree=self.task.git.paths(self.task.git.head()),
            allow_mode_change=sub.allow_mode_change,
            max_bytes=cfg.max_diff_bytes,
            max_files=cfg.max_files,
        )

    def verify_and_commit(
        self,
        att: protocol.Attempt,
        call: envelope.Call,
        changes: list[diffgate.Change],
        result: dict[str, Any],
    ) -> str | None:
        """Compute the new tree, run every check on scratch copies of it, then commit.

        The tree is made by harness's own git before any untrusted code runs, and only
        that tree is committed: nothing a check does to its copy can reach the commit.
        """
        task, sub, git = self.task, self.sub, self.task.git
        if task.recording is not None:
            task.recording.landing(task, call.call_id)
        head = git.head()
        tree = self.apply_patches(head, changes)
        if tree is None:
            return None
        # Approved before a kill, on this very tree: the checks it passed stand.
        approved = att.has("step_approved") and att.judged == tree
        if not approved and not self.check(att, call, changes, result, head, tree):
            return None
        if not self.supervise(att, call, result, changes, tree):
            return None
        message = (
            f"{sub.role}: {sub.goal}\n\n"
            f"Harness-Task: {task.task_id}\n"
            f"Harness-Subtask: {sub.id}\n"
            f"Harness-Call-Id: {call.call_id}\n"
            f"Harness-Log-Head: {task.log.head}\n"
        )
        who = (task.config.name, task.config.email)
        # What would stop update_files once the branch moved stops the step before it does.
        refuse_in_the_way(git, changes)
        git.index_free()
        made = git.commit(tree, head, message, who, call.prompt["ts"])
        fault("before:advance")
        git.advance(git.branch(), made, head)
        fault("after:advance")
        self.phase("commit", True)
        return made

    def check(
        self,
        att: protocol.Attempt,
        call: envelope.Call,
        changes: list[diffgate.Change],
        result: dict[str, Any],
        head: str,
        tree: str,
    ) -> bool:
        """Every check of the change, each on a scratch copy of `tree`: True when all pass."""
        task, sub, git = self.task, self.sub, self.task.git
        cfg = task.config.verify
        # Uncontained, a command has the host's network whatever isolate_network says.
        network = "none" if cfg.isolate_network and task.config.contained else "host"
        runner = verify.Runner(
            task.scratch("runs"), task.config.verify_timeout_s, task.contain.box, network
        )
        evidence = task.layout.exchange(task.task_id, call.call_id) / exchanges.VERIFY
        recorded = task.recording.checks(sub.id) if task.recording is not None else None
        checks = recorded or Checks(
            self.log,
            sub.id,
            att,
            cfg,
            runner,
            evidence,
            task.ledger,
            task.scratch,
            lambda p: git.show(tree, p),
        )
        with ExitStack() as stack:
            wt = task.scratch("verify")
            if self.runs_commands():
                stack.enter_context(git.scratch(tree, wt, git_dir=True))
            built = checks.build(wt, changes)  # nothing configured: no line says "build ok"
            if not (self.phase("build", built) if cfg.builds else built):
                return False
            if cfg.test and not self.phase("test", checks.test(wt, cfg.test)):
                return False
            base: list[Path] = []

            def base_copy() -> Path:
                if not base:
                    base.append(stack.enter_context(git.scratch(head, task.scratch("base"), True)))
                return base[0]

            judge = acceptance.Judge(
                sub,
                result,
                changes,
                git=git,
                head=head,
                tree=tree,
                worktree=wt,
                runner=runner,
                verify=cfg,
                cache=task.layout.state / "coverage",
                base=base_copy,
            )
            loop, rounds = sub.loop, task.model.rounds(sub.id)
            # Criteria a round leaves unmet are the next round's to meet, until the last.
            lenient = loop is not None and loop.until == "acceptance" and rounds < loop.rounds
            if not self.phase("acceptance", checks.accept(judge, lenient)):
                return False
        return True

    def supervise(
        self,
        att: protocol.Attempt,
        call: envelope.Call,
        result: dict[str, Any],
        changes: list[diffgate.Change],
        tree: str | None,
    ) -> bool:
        """A supervised subtask's checked change counts once a verdict approves it: the
        supervisor is asked (or a person, and the run stops for them) unless the attempt
        holds a verdict already. False once another verdict, or the supervisor's failure,
        is logged: its retry or end comes next, as after any failure."""
        sub = self.sub
        if sub.supervised is None:
            return True
        if att.verdict is None:
            if sub.supervised == plan_mod.HUMAN:
                if not att.has("approval_requested"):
                    base = call.context["payload"]["base"]
                    details = {"call_id": call.call_id, "base": base, "tree": tree}
                    self.log.append("approval_requested", "pending", step=sub.id, details=details)
                raise self.awaiting(att)
            self.ask(att, call, result, changes, tree)
        # A REORIENT or PAUSE is the supervisor's word, not a failure: shown as what it is.
        said = att.verdict
        outcome = None if said is None else _VERDICT_WORDS.get(said["event"])
        return self.phase("supervise", att.has("step_approved"), outcome)

    def ask(
        self,
        att: protocol.Attempt,
        call: envelope.Call,
        result: dict[str, Any],
        changes: list[diffgate.Change],
        tree: str | None,
    ) -> None:
        """Call the supervisor on the change (or take its recorded answer) and log its verdict."""
        task, sub, cfg = self.task, self.sub, self.task.config
        agent = task.supervisor
        assert agent is not None, "the pre-flight checked a supervised plan has a supervisor"
        base = call.context["payload"]["base"]
        checks = [
            {"event": e["event"], "details": e.get("details", {})}
            for e in att.events
            if e["event"] in protocol.CHECK_PASSED
        ]
        flags = supervision.flags(sub, result, changes, checks, (cfg.max_diff_bytes, cfg.max_files))
        asked = att.last("supervisor_invoked")
        ts = task.log.now() if asked is None else asked["ts"]
        judge = replace(
            sub,
            role=supervision.ROLE,
            goal=supervision.GOAL.format(sid=sub.id, goal=sub.goal),
            acceptance=(),
            write_scope=(),
            creates=(),
        )
        hashes = task.git.blob_hashes(base, sub.inputs)
        request = envelope.build(
            task_id=task.task_id,
            sub=judge,
            ts=ts,
            branch=task.git.branch(),
            base=base,
            readonly=list(cfg.readonly),
            visible=list(cfg.visible),
            token_id=None,
            input_hashes={p: h for p, h in hashes.items() if h is not None},
            blobs=supervision.request(sub, call.call_id, base, result, changes, checks, flags),
            # A second look, at a retry's change, says so as the retry itself does.
            retry=envelope.RETRY_CONSTRAINT in call.prompt["payload"]["constraints"],
            timeouts=dict(agent.timeouts or cfg.timeouts),
            budgets=dict(cfg.budgets),
            epoch=task.model.epoch,
            expected=supervision.EXPECTED,
        )
        details: dict[str, Any] = {"call_id": request.call_id, "by": agent.id}
        if asked is None:
            invoked: dict[str, Any] = {"call_id": request.call_id, "subagent": agent.id}
            invoked |= {"of": call.call_id, "base": base, "tree": tree}
            self.log.append("supervisor_invoked", "pending", step=sub.id, details=invoked, ts=ts)
            self.account.invoked(request.call_id, sub.id, agent.id)
        elif asked["details"]["call_id"] != request.call_id:
            raise InvalidInput(
                f"subtask {sub.id}'s supervision changed since call "
                f"{asked['details']['call_id'][:12]} was made: restore its plan and config"
            )
        flight = Flight(att, agent, request, 0)
        job = self.start(flight, "supervisor")
        if job is not None:
            flight.future = Future()
            flight.future.set_result(job())
        outcome = self.answer(flight)
        found = supervision.verdict(outcome.result) if outcome.status == "ok" else None
        if found is None or isinstance(found, str):
            kind = outcome.kind if found is None else protocol.NO_VERDICT
            why = outcome.message if found is None else found
            self.error("supervisor_failed", details | {"kind": kind}, f"supervisor: {why}")
            return
        log_verdict(self.log, sub.id, found, details)

    def awaiting(self, att: protocol.Attempt) -> AwaitingApproval:
        """The halt of a subtask whose change waits for a person, saying what to look at."""
        task, sid = self.task, self.sub.id
        asked = att.last("approval_requested")
        assert asked is not None
        d = asked["details"]
        folder = task.layout.rel(task.layout.exchange(task.task_id, d["call_id"]))
        change = f"`git diff {d['base'][:12]} {d['tree'][:12]}`" if d.get("tree") else folder
        return AwaitingApproval(
            f"{sid} awaits approval: review {change} (the answer is in {folder}), then "
            f"`harness approve {task.task_id} {sid}` or "
            f"`harness reject {task.task_id} {sid} --reason WHY`"
        )

    def runs_commands(self) -> bool:
        """Whether any check of this subtask runs a command, and so needs a scratch copy."""
        cfg, sub = self.task.config.verify, self.sub
        names = ("format", "lint", "license", "build", "test", "docs", "api_extract")
        return (
            any(getattr(cfg, n) for n in names)
            or bool(sub.acceptance)
            or (sub.role == "test-author")
        )

    def apply_patches(self, head: str, changes: list[diffgate.Change]) -> str | None:
        """The tree of `head` with every patch applied (`git apply --check` first, no fuzz),
        or None when git refuses one, in `diffgate.apply_order`."""
        task = self.task
        patches = task.scratch("patches")
        files.wipe(patches)
        patches.mkdir(parents=True)
        ordered = diffgate.apply_order(changes)
        written = []
        for i, change in enumerate(ordered):
            patch = patches / f"{i:03d}.patch"
            patch.write_text(change.patch, "utf-8")
            written.append((change.path, patch))
        tree, problem = task.git.apply_tree(head, written, task.scratch("apply.index"))
        if not self.phase("apply", tree is not None):
            self.fail(problem, "apply")
        return tree


def refuse_in_the_way(git: repo.Repo, changes: list[diffgate.Change]) -> None:
    """Refuse, before the branch moves, a commit the user's files cannot take: a folder it
    writes into is a symlink or a file in the working tree, put there by the user (a tracked
    symlink the diff gate refuses; a tracked file the commit would have to delete). Syncing
    would write through the link or replace the file.

    Halted (exit 1), not a step failure: the worker's answer is sound and is reused once the
    user has moved the thing away; nothing is committed or written until then."""
    deleted = {c.path for c in changes if c.kind == "delete"}
    deleted |= {c.old_path for c in changes if c.kind == "rename" and c.old_path}
    for change in changes:
        if change.kind == "delete":
            continue
        found = git.in_the_way(change.path)
        # A file the commit deletes may become a folder (deletions are synced first).
        if found is not None and found not in deleted:
            what = "symlink" if (git.root / found).is_symlink() else "file"
            raise Halted(
                f"{found} is a {what} in your working tree, where the commit writes "
                f"{change.path}; harness writes neither through nor over it: move it away, "
                "then run again"
            )


def _answer(
    answering: Worker,
    agent: Agent,
    root: Path,
    base: str,
    staging: Path,
    timeouts: dict[str, float],
    scratch: Path,
    told: Callable[[], None] | None,
    wait_s: float = 0.0,
) -> proc.Result:
    """A call, in a pool thread, with a git of its own (threads may not share one), after
    `wait_s` (a retry-after); `told` once it ended."""
    proc.pause(wait_s)
    git = repo.Repo(root)
    try:
        result = answering.call(agent, git, base, staging, timeouts, scratch)
    finally:
        git.close()
    if told is not None:
        told()
    return result


# The longest a retry waits for the model API's retry-after: harness owns time.
MAX_BACKOFF_S = 60.0
# Roles whose work is a judgment: their answer may rightly change nothing.
NO_CHANGE_ROLES = frozenset({"review", "audit"})
_VERDICT_WORDS = {"step_reoriented": "reoriented", "step_paused": "paused"}


def _landing(model: protocol.Model, sid: str) -> bool:
    """An answer was taken (it succeeded) and its step has not ended: it is landing."""
    att = model.attempt(sid)
    return att.has("subagent_succeeded") and att.failure is None and not model.resolved(sid)


def _slot_folder(slot: int) -> str:
    """One folder per slot: a worker's copy is moved between bases, not made afresh."""
    return "worker" if slot == 0 else f"worker-{slot}"


def _round_text(rounds: int, loop: plan_mod.Loop, made: list[str]) -> str:
    until = {
        "no_diff": "answer with no diffs once nothing is left to do",
        "acceptance": "it ends once the acceptance criteria hold",
    }[loop.until]
    # The scripted worker reads the round from the first line: it stays "Round N of ...".
    own = "".join(f"{path}\n" for path in made)
    return (
        f"Round {rounds} of at most {loop.rounds}: the base holds the earlier rounds' "
        f"changes; {until}.\nFiles the earlier rounds changed, yours to change too:\n{own}"
    )


def _unmet(ev: Event | None) -> list[str]:
    """The acceptance criteria a lenient loop round left unmet, as its event says."""
    found = None if ev is None else ev.get("details", {}).get("unmet")
    return [str(x) for x in found] if isinstance(found, list) else []


def _detail(ev: Event, key: str) -> str | None:
    found = ev.get("details", {}).get(key)
    return found if isinstance(found, str) else None


def _token_of(call: envelope.Call) -> str | None:
    scope_value: str = call.prompt["payload"]["write_scope"]
    return scope_value.removeprefix("token:") if scope_value.startswith("token:") else None
