"""A nested plan run as one unit of its parent's run (DESIGN §10; nesting.py checks the
tree), and a person's resume, which resolves the blockers of the plans a task runs too.

The scheduler hands `run` its own `steps`, so running a child plan needs nothing above this
module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from harness.base.errors import AwaitingApproval, Halted, InvalidInput
from harness.spec.plan import Subtask
from harness.step import budgets, recording
from harness.step.live import Live, tell
from harness.step.nesting import Unit
from harness.step.task import Task

# The scheduler's `steps`: a task run to its end, with the account of the run above it.
Steps = Callable[[Task, bool, int, tuple[budgets.Account, Subtask]], Iterable[Any]]


def resume(task: Task, reason: str) -> Any:
    """Log that a person resolved the task's blocker, for `reason`, and the blockers of the
    plans it runs; the step it blocked."""
    block = task.model.blocker
    if block is None:
        raise InvalidInput(f"task {task.task_id} is not blocked")
    resume_below(task, reason)
    task.log.append("blocker_resolved", "ok", step=block.get("step"), details={"reason": reason})
    return block.get("step")


def run(parent: Task, sub: Subtask, account: budgets.Account, slots: int, steps: Steps) -> Unit:
    """Run the task `sub` names to its end (complete, or halted) and record it."""
    assert sub.plan is not None
    if parent.depth + 1 > parent.config.max_depth:  # Task.load checked the tree; a plan changed
        raise InvalidInput(
            f"task {sub.plan} would nest {parent.depth + 1} deep, more than [limits] "
            f"max_depth {parent.config.max_depth} allows"
        )
    child = Task.load(parent.layout, sub.plan, parent.log.clock, depth=parent.depth + 1)
    child.worker, child.probed, child.person = parent.worker, parent.probed, parent.person
    child.executor, child.ahead = parent.executor, parent.ahead
    child.live = Prefixed(parent.live, f"{sub.plan}/")
    child.trace = parent.trace.under(sub.id, sub.plan)
    error = None
    try:
        for _ in steps(child, False, child.slots(slots), (account, sub)):
            pass
    except AwaitingApproval:
        raise  # the unit stays open, as after a kill: the run after the person's goes on
    except Halted as halt:
        error = f"task {sub.plan}: {halt}"
    finally:
        for line in recording.record(child):
            tell(f"not recorded: {line}")
        child.git.close()
    # The nested task's spends of one-shot tokens are in the store now: what this task
    # read of it before is not what its record will hold.
    parent.token_store()
    # Its latest record holds its log as it ended: made just now, or, when this run added
    # no line (the task had completed before), made when it last did.
    last = parent.git.task_commits(sub.plan, "HEAD", most=1, records=True)
    return Unit(error, child.log.head, last[0][0] if last else parent.git.head())


def resume_below(parent: Task, reason: str) -> list[str]:
    """Resolve the blocker of every task nested under `parent` that is blocked (a person
    resuming a task resumes what it runs), recording each; the tasks resolved."""
    resolved: list[str] = []
    for sub in parent.plan.subtasks:
        if sub.plan is None or not parent.layout.log(sub.plan).is_file():
            continue
        child = Task.load(parent.layout, sub.plan, parent.log.clock, depth=parent.depth + 1)
        try:
            if child.model.blocker is not None:
                resume(child, reason)  # and what it runs, in turn
                resolved.append(sub.plan)
            else:
                resolved += resume_below(child, reason)
            for line in recording.record(child):
                tell(f"not recorded: {line}")
        finally:
            child.git.close()
    return resolved


class Prefixed:
    """A nested task's progress, each subtask named under the task that runs it."""

    def __init__(self, live: Live, prefix: str) -> None:
        self.live, self.prefix = live, prefix

    def started(self, subtask: str, agent: str, role: str, retry: bool) -> None:
        self.live.started(self.prefix + subtask, agent, role, retry)

    def ended(self, subtask: str, phase: str, ok: bool, outcome: str | None = None) -> None:
        self.live.ended(self.prefix + subtask, phase, ok, outcome)

    def returned(self, subtask: str) -> None:
        self.live.returned(self.prefix + subtask)
