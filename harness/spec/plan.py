"""plan.json: subtasks, their dependencies, and the order they run in."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from harness.base import files, scope
from harness.base.errors import InvalidInput
from harness.spec import criteria

K = TypeVar("K")


AGENT, HUMAN = "agent", "human"  # who supervises a subtask (supervision.py)


@dataclass(frozen=True)
class Loop:
    rounds: int  # at most this many calls, each on the head the last one left
    until: str  # "no_diff" | "acceptance": what ends it before then


@dataclass(frozen=True)
class Subtask:
    id: str
    role: str
    goal: str
    inputs: tuple[str, ...]
    acceptance: tuple[str, ...]
    write_scope: tuple[str, ...]
    depends_on: tuple[str, ...]
    creates: tuple[str, ...]
    agents: tuple[str, ...]  # the registry agent, then its fallbacks; () routes by role
    token: str | None
    allow_new_deps: bool
    allow_mode_change: bool
    allow_api_change: bool
    on_error: str = "stop"  # the subtask's own, else the plan's (protocol.CONTINUE, ...)
    limits: tuple[tuple[str, float], ...] = ()  # its budgets: its own calls' steps, cost, tokens
    plan: str | None = None  # the task whose plan it runs as one unit (nesting.py), not a call
    supervised: str | None = None  # who gives a verdict before its work counts: AGENT, HUMAN
    loop: Loop | None = None  # its call repeated on the new head, round after round
    no_change_ok: bool = False  # a writing call may answer without a change

    def agent_at(self, fallbacks: int) -> str | None:
        """The agent called after `fallbacks` gave up: the plan's next one, else by role."""
        return self.agents[min(fallbacks, len(self.agents) - 1)] if self.agents else None


@dataclass(frozen=True)
class Plan:
    task_id: str
    created: str
    subtasks: tuple[Subtask, ...]
    max_parallel: int | None = None
    limits: tuple[tuple[str, float], ...] = ()  # its budgets, under ai/harness.toml's

    def get(self, subtask_id: str) -> Subtask:
        return self.by_id[subtask_id]

    @cached_property
    def by_id(self) -> dict[str, Subtask]:
        return {s.id: s for s in self.subtasks}


def load(path: Path, root: Path, task_id: str, raw: bytes | None = None) -> Plan:
    """The plan in `path` (or in `raw`, its bytes as already read), validated."""
    data = files.load_json(path, "plan", root, raw)
    label = path.relative_to(root).as_posix()
    files.check_settings(data, label)  # an acceptance command reaches exec
    if data["task_id"] != task_id:
        raise InvalidInput(f"{label}: $.task_id: {data['task_id']!r} is not {task_id!r}")
    on_error = data.get("on_error", "stop")
    plan = Plan(
        data["task_id"],
        data["created"],
        tuple(_subtask(s, on_error, data.get("supervised", False)) for s in data["subtasks"]),
        data.get("max_parallel"),
        tuple(sorted(data.get("budgets", {}).items())),
    )
    problem = structure_problem(plan)
    if problem is not None:
        raise InvalidInput(f"{label}: {problem}")
    return plan


def _subtask(s: dict[str, Any], on_error: str, supervised: bool | str) -> Subtask:
    if "plan" in s:  # no agent, role, inputs or scope: the nested plan's subtasks have theirs
        return Subtask(
            id=s["id"],
            role="nested-plan",
            goal=s.get("goal", f"run the plan of task {s['plan']}"),
            inputs=(),
            acceptance=(),
            write_scope=(),
            depends_on=tuple(s.get("depends_on", [])),
            creates=(),
            agents=(),
            token=None,
            allow_new_deps=False,
            allow_mode_change=False,
            allow_api_change=False,
            on_error=s.get("on_error", on_error),
            limits=tuple(sorted(s.get("budgets", {}).items())),
            plan=s["plan"],
        )
    return Subtask(
        id=s["id"],
        role=s["role"],
        goal=s["goal"],
        inputs=tuple(s["inputs"]),
        acceptance=tuple(s["acceptance"]),
        # "none": the subtask writes nothing and needs no token (a reviewer, say).
        write_scope=() if s["write_scope"] == "none" else tuple(scope.as_list(s["write_scope"])),
        depends_on=tuple(s.get("depends_on", [])),
        creates=tuple(s.get("creates", [])),
        agents=(s["agent"],) if isinstance(s.get("agent"), str) else tuple(s.get("agent", ())),
        token=s.get("token"),
        allow_new_deps=s.get("allow_new_deps", False),
        allow_mode_change=s.get("allow_mode_change", False),
        allow_api_change=s.get("allow_api_change", False),
        on_error=s.get("on_error", on_error),
        limits=tuple(sorted(s.get("budgets", {}).items())),
        supervised=_supervisor(s.get("supervised", supervised)),
        loop=Loop(s["loop"]["max"], s["loop"]["until"]) if "loop" in s else None,
        no_change_ok=bool(s.get("no_change_ok", False)),
    )


def _supervisor(value: bool | str) -> str | None:
    if value is True:
        return AGENT
    return HUMAN if value == HUMAN else None


def structure_problem(plan: Plan) -> str | None:
    """Duplicate ids, unknown dependencies or a cycle, as one line; None if sound."""
    ids: set[str] = set()
    for s in plan.subtasks:
        if s.id in ids:
            return f"duplicate subtask id {s.id!r}"
        ids.add(s.id)
    for s in plan.subtasks:
        for dep in s.depends_on:
            if dep not in ids:
                return f"subtask {s.id} depends on unknown subtask {dep!r}"
    for s in plan.subtasks:
        for text in s.acceptance:
            try:
                criteria.parse(text)
            except ValueError as exc:
                return f"subtask {s.id}: acceptance {text!r}: {exc}"
    cycle = find_cycle(plan)
    if cycle:
        return "dependency cycle: " + " -> ".join(cycle)
    return None


def find_cycle(plan: Plan) -> list[str]:
    """A dependency cycle as a closed path (first id repeated at the end), or []."""
    return closed_path({s.id: s.depends_on for s in plan.subtasks})


def closed_path(deps: Mapping[K, Sequence[K]]) -> list[K]:
    """A cycle of `deps` (node -> what it depends on) as a closed path, the first node
    repeated at the end, or [].

    Depth-first without recursion: a chain of thousands of subtasks is an ordinary plan."""
    done: set[K] = set()
    for start in deps:
        if start in done:
            continue
        path: list[K] = [start]
        on_path = {start: 0}
        todo = [iter(deps[start])]
        while todo:
            nxt = next(todo[-1], None)
            if nxt is None:
                node = path.pop()
                del on_path[node]
                done.add(node)
                todo.pop()
            elif nxt in on_path:
                return [*path[on_path[nxt] :], nxt]
            elif nxt not in done:
                on_path[nxt] = len(path)
                path.append(nxt)
                todo.append(iter(deps[nxt]))
    return []


def order(plan: Plan) -> list[Subtask]:
    """Topological over depends_on; among ready subtasks, file order wins."""
    position = {s.id: i for i, s in enumerate(plan.subtasks)}
    waiting = {s.id: len(set(s.depends_on)) for s in plan.subtasks}
    dependants: dict[str, list[str]] = {s.id: [] for s in plan.subtasks}
    for s in plan.subtasks:
        for dep in set(s.depends_on):
            dependants[dep].append(s.id)
    ready = [i for i, s in enumerate(plan.subtasks) if waiting[s.id] == 0]
    heapq.heapify(ready)
    result: list[Subtask] = []
    while ready:
        sub = plan.subtasks[heapq.heappop(ready)]
        result.append(sub)
        for later in dependants[sub.id]:
            waiting[later] -= 1
            if waiting[later] == 0:
                heapq.heappush(ready, position[later])
    return result
