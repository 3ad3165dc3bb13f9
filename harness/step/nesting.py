"""Plans that run plans (DESIGN §10): a subtask {"id": ..., "plan": "<task>"} runs that
task's plan as one unit, on the same branch, in the same command.

The nested task keeps its own log and record; the parent's log links them. Its
plan_started names the nested task, and its step_completed (or step_failed) names the nested
log's last line and the record commit that holds that log. So an auditor can follow the
link, and a replay of the parent can take the nested task's commits once that task's own
replay has rebuilt them.

This module holds what needs no running task: the tree checked, its spending counted, and
how a unit ended (Unit); units.py runs one. Before anything runs, the whole tree is checked.
Every plan it names must exist and be valid. No plan may run itself through others: that is
a cycle, refused with its path. No plan may nest deeper than [limits] max_depth. No nested
plan may set a budget above what the plans above it allow the unit. Budgets are shared down
the tree: every call a nested plan makes is counted, and checked, against each plan above it
too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from harness.base.clock import SystemClock
from harness.base.errors import InvalidInput
from harness.record.progress import Log
from harness.repository.layout import Layout
from harness.spec import plan as plan_mod
from harness.spec.config import Config
from harness.spec.plan import Plan, Subtask
from harness.step import budgets


class Tree:
    """The plans a task's plan runs, read once each: the checks a run or `plan validate`
    makes before anything runs."""

    def __init__(self, layout: Layout, task_id: str, plan: Plan) -> None:
        self.layout, self.root = layout, task_id
        self.plans: dict[str, Plan] = {task_id: plan}

    def plan(self, task_id: str, parent: str, sub: Subtask) -> Plan:
        if task_id not in self.plans:
            path = self.layout.plan(task_id)
            if not path.is_file():
                label = self.layout.rel(self.layout.plan(parent))
                raise InvalidInput(
                    f"{label}: subtask {sub.id} runs the plan of task {task_id}, which has "
                    f"no {self.layout.rel(path)}"
                )
            self.plans[task_id] = plan_mod.load(path, self.layout.root, task_id)
        return self.plans[task_id]

    def children(self, task_id: str) -> list[str]:
        """The tasks whose plans this task's plan runs, in plan order, each once."""
        found: list[str] = []
        for sub in self.plans[task_id].subtasks:
            if sub.plan is not None and sub.plan not in found:
                self.plan(sub.plan, task_id, sub)
                found.append(sub.plan)
        return found

    def problem(self, config: Config) -> str | None:
        """A cycle, a nesting too deep, or a nested plan's budget above its parent's, as
        one line (a missing or invalid plan is InvalidInput naming its file); None if none."""
        cycle, height = self.walk()
        if cycle:
            return "plans run in a cycle: " + " -> ".join(cycle)
        path = [self.root]
        while height[path[-1]][1] is not None:
            path.append(str(height[path[-1]][1]))
        if len(path) - 1 > config.max_depth:
            return (
                f"plans nest {len(path) - 1} deep, more than [limits] max_depth "
                f"{config.max_depth} allows: " + " -> ".join(path)
            )
        # Completion order lists each plan after every plan below it: reversed, above first.
        return self.over_budget(config, list(reversed(height)))

    def walk(self) -> tuple[list[str], dict[str, tuple[int, str | None]]]:
        """A cycle as a closed path ([] if none), and each plan's height: how deep the
        plans below it nest, and the child on its deepest path. Without recursion, and
        each plan once: a chain of many plans, or a lattice of shared ones, stays linear."""
        height: dict[str, tuple[int, str | None]] = {}
        path, on_path = [self.root], {self.root}
        todo: list[Iterator[str]] = [iter(self.children(self.root))]
        while todo:
            nxt = next(todo[-1], None)
            if nxt is None:
                node = path.pop()
                on_path.discard(node)
                todo.pop()
                kids = self.children(node)
                deepest = max(kids, key=lambda k: height[k][0], default=None)
                height[node] = (0, None) if deepest is None else (height[deepest][0] + 1, deepest)
            elif nxt in on_path:
                return [*path[path.index(nxt) :], nxt], height
            elif nxt not in height:
                path.append(nxt)
                on_path.add(nxt)
                todo.append(iter(self.children(nxt)))
        return [], height

    def over_budget(self, config: Config, above_first: list[str]) -> str | None:
        """A nested plan's budget above what the tree allows the subtask running it: its
        parent's budgets as the plans above lowered them, lowered by that subtask's own. A
        plan run from several places is held to the strictest."""
        allowed: dict[str, dict[str, float]] = {
            self.root: budgets.limits(config, self.plans[self.root])
        }
        for parent in above_first:
            plan, mine = self.plans[parent], allowed[parent]
            for name, value in plan.limits:
                mine[name] = min(value, mine.get(name, value))
            for sub in plan.subtasks:
                if sub.plan is None:
                    continue
                bounds = dict(mine)
                for name, value in sub.limits:
                    bounds[name] = min(value, bounds.get(name, value))
                for name, value in self.plans[sub.plan].limits:
                    if name in bounds and value > bounds[name]:
                        label = self.layout.rel(self.layout.plan(sub.plan))
                        return (
                            f"{label}: budgets.{name} {value:g} exceeds the {bounds[name]:g} "
                            f"that task {parent} allows its subtask {sub.id}"
                        )
                below = allowed.setdefault(sub.plan, dict(bounds))
                for name, value in bounds.items():
                    below[name] = min(value, below.get(name, value))
        return None


def check(layout: Layout, task_id: str, plan: Plan, config: Config) -> None:
    """Refuse (InvalidInput, naming the plan) a tree that must not run."""
    if not any(sub.plan is not None for sub in plan.subtasks):
        return
    problem = Tree(layout, task_id, plan).problem(config)
    if problem is not None:
        raise InvalidInput(f"{layout.rel(layout.plan(task_id))}: {problem}")


def count(layout: Layout, plan: Plan, spent: budgets.Spent, config: Config, metered: bool) -> None:
    """Add to `spent` every call the plans nested under `plan` logged, each counted as a
    call of the subtask running it (budgets are shared down the tree)."""
    todo = [(sub.plan, sub.id) for sub in plan.subtasks if sub.plan is not None]
    seen: set[tuple[str, str]] = set()
    while todo:
        task_id, step = todo.pop()
        if (task_id, step) in seen or not layout.plan(task_id).is_file():
            continue
        seen.add((task_id, step))
        log = Log(layout.log(task_id), task_id, SystemClock())  # read only: no clock is read
        budgets.spent(layout, task_id, log.events, config, metered, spent, step)
        nested = plan_mod.load(layout.plan(task_id), layout.root, task_id)
        todo += [(sub.plan, step) for sub in nested.subtasks if sub.plan is not None]


class Unit(NamedTuple):
    """How a nested plan's run ended, and the link to its record."""

    error: str | None  # None: the nested task completed
    log_head: str  # the hash of the nested log's last line
    commit: str  # the head after the nested task's record commit, which holds that log
