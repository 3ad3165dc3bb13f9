"""Small builders tests share: subtasks, plans, hypothesis settings, a plain git runner."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from harness.spec.plan import Plan, Subtask

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
        "agents": (),
        "token": None,
        "allow_new_deps": False,
        "allow_mode_change": False,
        "allow_api_change": False,
    }
    return Subtask(**(base | fields))


def plan_of(*subtasks: Subtask) -> Plan:
    return Plan("demo", "2026-01-01T00:00:00Z", tuple(subtasks))


class Waiting:
    """A FIFO made at `path` with a writer blocked opening it: the writer goes on only if
    something opens the FIFO to read, so a FIFO harness never opened still has it waiting."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self.writer = threading.Thread(target=lambda: path.open("wb").close(), daemon=True)
        self.writer.start()

    def assert_unopened(self) -> None:
        """Fail if the FIFO was opened; then let the writer go."""
        assert self.writer.is_alive(), f"{self.path} was opened"
        reader = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self.writer.join(5)
        os.close(reader)
        assert not self.writer.is_alive()


def git(root: Path, *args: str) -> str:
    """git in `root` with a throw-away identity; its output, stripped."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
