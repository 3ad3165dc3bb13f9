"""Checks run ahead of their turn, as a merge queue runs them (DESIGN §10, docs/ahead.md).

While a change is checked, the answers in flight behind it that are already in are gated
and applied, each on the tree the one ahead of it would commit, and their checks start at
once, up to the slots: the change after k on "base + k", the next on "base + k + k+1". Each
run is kept with exactly what it checked (Work: the subtask, its changes and answer, the
tree it applied to and the tree it made). When a change's turn comes, its checks are taken
from a run on exactly its Work, or run then; a run on anything else (a change ahead failed,
was refused, or its retry made another diff) is never used, and one is made on the tree
that holds.

What a run says is held back (checks.deferred) and logged only at the change's turn, so
the log, every commit and every launch are those of checking one change at a time: which
run finished first, or which ran at all, changes only how long the run takes.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future
from dataclasses import replace
from typing import Any

from harness.base import folders
from harness.boundary import worker
from harness.checks.sequence import Verdict, Work
from harness.step import answering, checking, executing, executors, gating, landing
from harness.step.subtask import Flight, Subtask
from harness.step.task import Task

# The answers taken and the calls in flight, in the order their changes land; with each
# taken answer's outcome (None: not taken yet).
Pending = Callable[[], list[tuple[Subtask, Flight, worker.Outcome | None]]]


class Ahead:
    """The runs of checks of one run of a task, at most `slots` at once."""

    def __init__(
        self, task: Task, executor: executors.Executor, slots: int, pending: Pending
    ) -> None:
        self.task, self.executor, self.slots = task, executor, slots
        self.pending = pending  # the calls in flight, in the order they will be taken
        self.runs: list[tuple[Work, Future[Verdict]]] = []
        self.made = 0  # runs started: each gets a scratch folder of its own
        # (subtask, call, tree it applies to) -> its Work there, or None: gate and apply once.
        self.works: dict[tuple[str, str, str], Work | None] = {}
        folders.remove(task.scratch("ahead"))  # what a killed run left

    def checked(self, work: Work) -> Verdict:
        """The verdict on `work`, the change whose turn it is: from a run on exactly its
        trees, or from one started now; while it is not in, checks start behind it."""
        git = self.task.git
        mine = replace(work, head=git.tree_of(work.head))
        future = next((f for w, f in self.runs if w == mine), None)
        if future is None:
            future = self.start(mine)
        while True:
            self.behind(mine)
            if future.done():
                break
            # Woken by a run ending (a slot frees) or a call ending (an answer to check).
            waited: list[Future[Any]] = [future, *(f for _, f in self.runs if not f.done())]
            waited += [f.future for _, f, _ in self.pending() if f.future and not f.future.done()]
            executing.waited(waited, FIRST_COMPLETED)
        # Runs of this subtask are spent: its change lands now, or its next attempt differs.
        for w, f in self.runs:
            if w.sub.id == work.sub.id:
                f.cancel()  # not started yet: never will
        self.runs = [(w, f) for w, f in self.runs if w.sub.id != work.sub.id]
        self.works = {k: w for k, w in self.works.items() if k[0] != work.sub.id}
        return future.result()

    def start(self, work: Work) -> Future[Verdict]:
        self.made += 1
        future = self.executor.check(work, self.task.scratch("ahead") / str(self.made))
        self.runs.append((work, future))
        return future

    def behind(self, first: Work) -> None:
        """Start the checks of the answers in behind `first`, each on the tree the one
        ahead of it makes, while fewer than `slots` runs are under way; stop at the first
        that cannot be told yet (still running, failed, refused, or a loop's round, whose
        next call lands next) or whose checks failed already."""
        tree = first.tree
        for job, flight, taken in self.pending():
            if sum(1 for _, f in self.runs if not f.done()) >= self.slots:
                return
            outcome = taken or answering.peek(job, flight)
            if outcome is None or outcome.status != "ok" or job.sub.loop is not None:
                return
            result = outcome.result
            if not result.get("diffs"):
                continue  # its tree is the one ahead's
            key = (job.sub.id, flight.call.call_id, tree)
            if key not in self.works:
                self.works[key] = self.work(job, flight, result, tree)
            work = self.works[key]
            if work is None:
                return
            ran = next((f for w, f in self.runs if w == work), None) or self.start(work)
            if ran.done() and not (ran.exception() is None and ran.result().passed):
                return  # it will not land as it is: nothing is built on its tree
            tree = work.tree

    def work(self, job: Subtask, flight: Flight, result: dict[str, Any], tree: str) -> Work | None:
        """The checks of the answer `result` were `tree` the head, or None when the answer
        cannot be checked ahead there."""
        att = self.task.model.attempt(job.sub.id)
        if att.has("subagent_diffs_applied") or att.awaiting:
            return None  # a killed run's landing, or a person's verdict, comes first
        changes = gating.ahead(job, flight.call, result, tree)
        if changes is None:
            return None
        made, _ = landing.applied(self.task, tree, changes, "ahead-patches")
        if made is None:
            return None
        return checking.work(job, att, changes, result, tree, made)
