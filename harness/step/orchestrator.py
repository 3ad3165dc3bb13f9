"""The run's scheduler (DESIGN §4, §10): subtasks in flight up to the slots, their results
taken in plan order, on_error, budgets, halting, and nested plans run as units. A subtask's
own life, phase by phase, is phases.py's.

Every phase first asks the log whether it already happened, so a step killed at any
point is finished by the next `harness next` without a second call, commit or event.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, NamedTuple

from harness.base import scope
from harness.base.errors import Halted, InvalidInput
from harness.boundary import proc, worker
from harness.checks.sequence import runs_commands
from harness.record import protocol
from harness.spec import plan as plan_mod
from harness.step import ahead, budgets, executors, nesting, phases, preflight, units
from harness.step.landing import update_files
from harness.step.subtask import Flight, Subtask
from harness.step.task import Task


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
    executor = executors.make(task, slots, task.executor)
    try:
        yield from Run(task, slots, executor, up).go(once)
    finally:
        # Leaving early (a halt, an error, Ctrl-C), no call or check in flight, being taken
        # or about to start outlives the run; a call's invocation stays open in the log, so
        # the next run makes it again under the same call_id.
        proc.stop_all()
        executor.close()
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
    order, or the head the run began on. Changes land in plan order: each is gated,
    verified and committed on the branch at its turn (turn), so it lands on, and is checked
    against, what precedes it; an answer taken while a subtask before it is called again
    (its checks failed) waits for that one to land or end. With more slots, its checks may
    have run ahead, on exactly that tree (ahead.py)."""

    def __init__(
        self,
        task: Task,
        slots: int,
        executor: executors.Executor,
        up: tuple[budgets.Account, plan_mod.Subtask] | None = None,
    ) -> None:
        self.task, self.slots, self.executor = task, slots, executor
        self.order = plan_mod.order(task.plan)
        self.position = {s.id: i for i, s in enumerate(self.order)}
        self.start = task.git.head()
        self.after: dict[str, str] = {}  # subtask ended in this run -> the head it left
        self.flying: dict[str, tuple[Subtask, Flight]] = {}
        self.queued: list[Subtask] = []  # failed an attempt: their next call waits for a slot
        # Answers taken (in plan order) whose change lands at its turn (turn()).
        self.taken: dict[str, tuple[Subtask, Flight, worker.Outcome]] = {}
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
        # A replay takes its checks' results from the record, or runs them at their turn.
        # Checks that run no command are over as soon as they start: gating and applying
        # the answers behind a change for them would only delay the launches that follow.
        checks_ahead = (
            slots > 1
            and task.ahead
            and recording is None
            and any(runs_commands(task.config.verify, sub) for sub in task.plan.subtasks)
        )
        self.ahead = ahead.Ahead(task, executor, slots, self.in_flight) if checks_ahead else None

    def go(self, once: bool) -> Iterator[Finished | None]:
        model = self.task.model
        self.resume_open()
        self.once = once
        while True:
            # A slot freed by an answer taken runs the next call while that change is
            # checked (with one slot, the next call sees this one's commit: it waits).
            self.launch()
            sid = self.turn()
            if sid is not None:
                job, flight, answered = self.taken.pop(sid)
                ended = phases.settle(job, flight, answered)
                if ended:
                    self.ended(sid)
                    call_id, commit, _ = model.done[sid]
                    yield Finished(sid, call_id, commit)
                else:
                    self.queued.append(job)
                continue
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
            outcome = phases.take(job, flight)
            if outcome is None:  # its retry, fallback or end comes first, in its slot
                self.queued.append(job)
                continue
            self.taken[sid] = (job, flight, outcome)
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
                self.begin(self.job(sub, None))
        self.first = [s.id for s in landing if s.id in self.flying]

    def job(self, sub: plan_mod.Subtask, base: str | None) -> Subtask:
        return Subtask(self.task, sub, base, self.account, self.slots > 1, self.ahead)

    def in_flight(self) -> list[tuple[Subtask, Flight, worker.Outcome | None]]:
        """The answers taken and the calls in flight, in the order their changes will land
        (None: not taken yet)."""
        found: list[tuple[Subtask, Flight, worker.Outcome | None]] = [
            (job, flight, None) for job, flight in self.flying.values()
        ]
        found += self.taken.values()
        return sorted(found, key=lambda f: self.position[f[0].sub.id])

    def turn(self) -> str | None:
        """The taken answer whose change lands now: the first in plan order, unless a
        subtask before it is in flight or waits to be called again (a retry after its
        checks failed), which lands first. Nothing else can: changes land in plan order."""
        if not self.taken:
            return None
        at = self.position.__getitem__
        sid = min(self.taken, key=at)
        before = [s for s in (*self.flying, *(j.sub.id for j in self.queued)) if at(s) < at(sid)]
        # With nothing in flight, nothing before it can be called any more (a replay's
        # record says no, a budget ran out): it lands.
        return None if before and self.flying else sid

    def waiting(self, sub: plan_mod.Subtask) -> bool:
        model = self.task.model
        return (
            sub.id not in self.busy()
            and not model.resolved(sub.id)
            and all(model.goes_on(dep) for dep in sub.depends_on)
        )

    def busy(self) -> set[str]:
        """Subtasks under way: in flight, waiting for a slot, or taken and landing."""
        return {*self.flying, *(job.sub.id for job in self.queued), *self.taken}

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
            elif len(self.flying) >= self.slots or (self.slots == 1 and self.taken):
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
            self.begin(self.job(sub, self.base(sub)))

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
            unit = units.run(task, sub, self.account, self.slots, steps)
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
            flight = phases.next_flight(job, self.executor, slot)
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
        self.task.trace.finished(sid, self.task.model.status(sid))
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


def _landing(model: protocol.Model, sid: str) -> bool:
    """An answer was taken (it succeeded) and its step has not ended: it is landing."""
    att = model.attempt(sid)
    return att.has("subagent_succeeded") and att.failure is None and not model.resolved(sid)
