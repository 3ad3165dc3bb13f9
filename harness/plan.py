"""plan.json: subtasks, their dependencies, and the order they run in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import criteria, files, scope
from .errors import InvalidInput


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
    agent: str | None
    token: str | None
    allow_new_deps: bool
    allow_mode_change: bool
    allow_api_change: bool


@dataclass(frozen=True)
class Plan:
    task_id: str
    created: str
    subtasks: tuple[Subtask, ...]

    def get(self, subtask_id: str) -> Subtask:
        return next(s for s in self.subtasks if s.id == subtask_id)


def load(path: Path, root: Path, task_id: str) -> Plan:
    data = files.load_json(path, "plan", root)
    label = path.relative_to(root).as_posix()
    if data["task_id"] != task_id:
        raise InvalidInput(f"{label}: $.task_id: {data['task_id']!r} is not {task_id!r}")
    plan = Plan(data["task_id"], data["created"], tuple(_subtask(s) for s in data["subtasks"]))
    problem = structure_problem(plan)
    if problem is not None:
        raise InvalidInput(f"{label}: {problem}")
    return plan


def _subtask(s: dict[str, Any]) -> Subtask:
    return Subtask(
        id=s["id"],
        role=s["role"],
        goal=s["goal"],
        inputs=tuple(s["inputs"]),
        acceptance=tuple(s["acceptance"]),
        write_scope=tuple(scope.as_list(s["write_scope"])),
        depends_on=tuple(s.get("depends_on", [])),
        creates=tuple(s.get("creates", [])),
        agent=s.get("agent"),
        token=s.get("token"),
        allow_new_deps=s.get("allow_new_deps", False),
        allow_mode_change=s.get("allow_mode_change", False),
        allow_api_change=s.get("allow_api_change", False),
    )


def structure_problem(plan: Plan) -> str | None:
    """Duplicate ids, unknown dependencies or a cycle, as one line; None if sound."""
    ids = [s.id for s in plan.subtasks]
    for i, sid in enumerate(ids):
        if sid in ids[:i]:
            return f"duplicate subtask id {sid!r}"
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
    deps = {s.id: s.depends_on for s in plan.subtasks}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in deps[node]:
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return []

    for sid in deps:
        if sid not in state and (found := visit(sid)):
            return found
    return []


def order(plan: Plan) -> list[Subtask]:
    """Topological over depends_on; among ready subtasks, file order wins."""
    done: set[str] = set()
    result: list[Subtask] = []
    pending = list(plan.subtasks)
    while pending:
        ready = next(s for s in pending if all(d in done for d in s.depends_on))
        result.append(ready)
        done.add(ready.id)
        pending.remove(ready)
    return result
