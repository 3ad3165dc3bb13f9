"""Small builders the pure tests share: subtasks, plans, and hypothesis settings."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings

from harness.plan import Plan, Subtask

FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def sub(sid: str, *deps: str, **fields: Any) -> Subtask:
    base: dict[str, Any] = {
        "id": sid,
        "role": "localized-impl",
        "goal": f"Goal of {sid}",
        "inputs": ("src/calc.py",),
        "acceptance": (),
        "write_scope": ("src/**",),
        "depends_on": tuple(deps),
        "creates": (),
        "agent": None,
        "token": None,
        "allow_new_deps": False,
        "allow_mode_change": False,
        "allow_api_change": False,
    }
    return Subtask(**(base | fields))


def plan_of(*subtasks: Subtask) -> Plan:
    return Plan("demo", "2026-01-01T00:00:00Z", tuple(subtasks))
