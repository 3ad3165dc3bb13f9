"""checklist.md: the plan mirrored as boxes, ticked only from the log."""

from __future__ import annotations

from collections.abc import Collection

from harness.spec.plan import Plan


def render(plan: Plan, done: Collection[str]) -> str:
    lines = [f"# {plan.task_id}", ""]
    for sub in plan.subtasks:
        mark = "x" if sub.id in done else " "
        lines.append(f"- [{mark}] {sub.id}: {sub.goal}")
    return "\n".join(lines) + "\n"
