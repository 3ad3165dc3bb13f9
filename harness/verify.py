"""Build and test commands run in the scratch worktree; tests run twice, pass/pass only."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import proc

TAIL_LINES = 5


@dataclass(frozen=True)
class Check:
    name: str
    command: str
    codes: tuple[int, ...]
    tail: str

    @property
    def passed(self) -> bool:
        return all(code == 0 for code in self.codes)

    def summary(self) -> str:
        """One line for the log: which run failed how, and the end of its output."""
        runs = ", ".join(f"run {i + 1}: exit {c}" for i, c in enumerate(self.codes))
        return f"{self.name} `{self.command}` failed ({runs}): {self.tail}"


def run(name: str, command: str, times: int, worktree: Path, home: Path, timeout_s: float) -> Check:
    """Run `command` `times` times in `worktree`; stop at nothing (a flaky pass is a failure)."""
    env = proc.base_env(home)
    codes: list[int] = []
    tail = ""
    for i in range(times):
        log = home / f"{name}-{i + 1}.log"
        result = proc.shell(
            command, cwd=worktree, env=env, stdout=log, stderr=log, hard_s=timeout_s
        )
        code = result.code if result.timed_out is None else 124
        codes.append(code)
        if code != 0 and not tail:
            lines = log.read_bytes().decode("utf-8", "replace").strip().splitlines()
            tail = " | ".join(lines[-TAIL_LINES:])[-400:]
    return Check(name, command, tuple(codes), tail)
