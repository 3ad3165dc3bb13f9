"""`harness status`: where a task stands, read from its plan, log and exchanges alone, so
it answers while another harness holds the task's lock."""

from __future__ import annotations

from typing import Any

from harness.base.clock import Clock
from harness.record import exchanges
from harness.record.progress import Log
from harness.repository.layout import Layout
from harness.spec import config
from harness.spec import plan as plan_mod
from harness.step import budgets, nesting


def status(layout: Layout, task_id: str, clock: Clock) -> dict[str, Any]:
    """Per subtask in run order its status, why, commit, call, the plan it runs (if it runs
    one) and unverified criteria; the
    blocker in force, whether the task is complete, its agents' cost (and how many calls
    reported none), and how many events
    ran uncontained. This is the document `harness status --json` prints."""
    plan = plan_mod.load(layout.plan(task_id), layout.root, task_id)
    log = Log(layout.log(task_id), task_id, clock)
    model = log.model
    cfg = config.load(layout.config)
    limits = budgets.limits(cfg, plan)
    metered = budgets.metered(limits)
    spent = budgets.spent(layout, task_id, log.events, cfg, metered)
    nesting.count(layout, plan, spent, cfg, metered)  # a nested plan's calls count here too
    rows = [
        {"id": s.id, "role": s.role, "plan": s.plan, **model.summary(s.id)}
        for s in plan_mod.order(plan)
    ]
    for row in rows:
        if row["plan"] is not None and row["id"] in model.done:
            row["commit"] = model.done[row["id"]].commit  # the record of the plan it ran
    block = model.blocker
    cost, unknown = exchanges.total_cost(layout.exchanges(task_id), layout.root)
    return {
        "task_id": task_id,
        "blocked": block and {"step": block.get("step"), "error": block.get("error")},
        "subtasks": rows,
        "complete": model.completed is not None,
        "cost_usd": round(cost, 6),
        "cost_unknown_calls": unknown,  # calls whose agent reported no cost
        "uncontained_events": model.uncontained,
        # Use against each budget the task has; parallelism and runtime are a run's own.
        "budgets": {
            name: {"limit": limit, "used": spent.used(name) if name in budgets.UNITS else None}
            for name, limit in sorted(limits.items())
        },
    }
