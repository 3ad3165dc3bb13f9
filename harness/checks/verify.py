"""Hermetic runs of verify commands in scratch worktrees, and what their results mean."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base import files, folders, scope
from harness.boundary import proc, sandbox
from harness.checks import junit
from harness.spec.limits import message

TAIL_LINES = 5
JUNIT_LIMIT = 64 << 20  # read from what untrusted tests wrote: bounded
LOG_LIMIT = 16 << 20  # of a verify command's output: far above a test run's, far below a flood
# Caches and bytecode off, hash seed fixed: a run must not depend on the one before it.
HERMETIC = {
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "PYTEST_ADDOPTS": "-p no:cacheprovider",
    "NO_COLOR": "1",
}


@dataclass(frozen=True)
class Run:
    code: int
    timed_out: bool
    leaked: bool
    duration_s: float
    tail: str
    log: Path
    cut: bool = False  # the log stopped at LOG_LIMIT: its whole is not known
    warnings: int = 0  # lines of its output that speak of a warning
    over: str | None = None  # it went over a limit of its sandbox: the line saying which

    @property
    def ok(self) -> bool:
        return self.code == 0 and not self.timed_out and not self.leaked and self.over is None

    def why(self) -> str:
        if self.over is not None:
            return self.over
        if self.timed_out:
            return "timed out"
        if self.leaked:
            return f"exit {self.code}, process leak"
        return f"exit {self.code}"


@dataclass(frozen=True)
class Check:
    name: str
    command: str
    runs: tuple[Run, ...]
    network: str
    flipped: tuple[str, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return all(run.ok for run in self.runs)

    @property
    def flaky(self) -> bool:
        return len({run.ok for run in self.runs}) > 1

    def details(self) -> dict[str, Any]:
        """What the log records: only what a rerun of the same change would reproduce."""
        found: dict[str, Any] = {
            "check": self.name,
            "command": self.command,
            "exit_codes": [run.code for run in self.runs],
            "network": self.network,
        }
        if any(run.leaked for run in self.runs):
            found["process_leak"] = True
        over = next((run.over for run in self.runs if run.over is not None), None)
        if over is not None:
            found["over_limit"] = over
        if not self.passed and len(self.runs) > 1:
            found["flaky"] = self.flaky
        if self.flipped:
            found["flipped"] = list(self.flipped)
        warned = max((run.warnings for run in self.runs), default=0) if self.passed else 0
        if warned:  # a supervisor is told of a pass that warned (supervision.py)
            found["warnings"] = warned
        return found

    def summary(self) -> str:
        """One line: which run failed how, and the end of its output."""
        runs = ", ".join(f"run {i + 1}: {r.why()}" for i, r in enumerate(self.runs))
        tail = next((r.tail for r in self.runs if not r.ok), "")
        flaky = "flaky, " if self.flaky else ""
        return f"{self.name} `{self.command}` failed ({flaky}{runs}): {tail}"

    def evidence(self) -> dict[str, Any]:
        """Everything an auditor wants that a rerun of the same change reproduces: it is
        committed, so no timing (the live view shows those)."""
        return {
            **self.details(),
            "runs": [
                {
                    "exit_code": r.code,
                    "timed_out": r.timed_out,
                    "leaked": r.leaked,
                    **({"over_limit": r.over} if r.over is not None else {}),
                    "tail": r.tail,
                }
                for r in self.runs
            ],
        }


def hostless(text: str, copy: Path, home: Path) -> str:
    """`text` with the scratch copy's and the private home's paths, on this machine or in
    the sandbox, written as the repository and a home name them (`src/x.py`, `.`, `~`),
    and the times a tool says it took as `<time>`: a tail is recorded, and the same run in
    another folder, contained or not, must record the same bytes."""
    for paths, name in (((copy, sandbox.WORK), "."), ((home, sandbox.HOME), "~")):
        for spelling in dict.fromkeys(s for p in paths for s in (str(p), os.path.realpath(p))):
            text = text.replace(spelling + "/", "" if name == "." else name + "/")
            text = text.replace(spelling, name)
    return ELAPSED.sub("<time>", text)


# A time a test tool prints it took: unittest's "Ran 2 tests in 0.007s", pytest's "in 0.12s"
# or "in 75.02s (0:01:15)", go's "0.004s", jest's "Time: 1.2 s".
ELAPSED = re.compile(r"(?<![\w.])\d+\.\d+ ?m?s\b(?: \(\d+:\d\d:\d\d\))?")


WARNING = re.compile(r"\bwarn(?:ing)?s?\b", re.IGNORECASE)


Boxes = Callable[[Path, Path], sandbox.Box | None]


class Runner:
    """Runs verify commands hermetically, each in a sandbox of its own (`boxes` makes one for
    a scratch copy and a private home; None when containment is off): UTC, C locale."""

    def __init__(self, scratch: Path, timeout_s: float, boxes: Boxes, network: str) -> None:
        self.scratch = scratch
        self.timeout_s = timeout_s
        self.boxes = boxes
        self.network = network  # "none" or "host", as recorded

    def run(self, label: str, command: str, cwd: Path) -> Run:
        home = self.scratch / f"home-{label}"
        folders.remove(home)
        home.mkdir(parents=True)
        box = self.boxes(cwd, home)
        env = proc.base_env(home) | HERMETIC
        log = self.scratch / f"{label}.log"
        result = proc.run(
            ["/bin/sh", "-c", command],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=log,
            hard_s=self.timeout_s,
            box=box,
            cap=LOG_LIMIT,
        )
        if result.truncated:
            proc.mark_cut(log, LOG_LIMIT)
        text = hostless(log.read_bytes().decode("utf-8", "replace"), cwd, home)
        lines = text.strip().splitlines()
        if result.survivors:
            lines.append("still running after the command ended: " + ", ".join(result.survivors))
        tail = " | ".join(lines[-TAIL_LINES:])[-400:]
        timed_out = result.timed_out is not None
        cut = bool(result.truncated)
        warned = sum(1 for line in lines if WARNING.search(line))
        over = message(result.over, box.limits) if result.over and box is not None else None
        found = (tail, log, cut, warned, over)
        return Run(result.code, timed_out, result.leaked, result.duration_s, *found)

    def check(self, name: str, command: str, cwd: Path) -> Check:
        return Check(name, command, (self.run(name, command, cwd),), self.network)

    def twice(self, name: str, command: str, dirs: Sequence[Path], parallel: bool) -> Check:
        """One run in each of two identical worktree states, side by side if allowed."""
        labels = [f"{name}-{i + 1}" for i in range(len(dirs))]
        if parallel:
            with ThreadPoolExecutor(len(dirs)) as pool:
                runs = list(pool.map(self.run, labels, [command] * len(dirs), dirs))
        else:
            runs = [self.run(label, command, d) for label, d in zip(labels, dirs, strict=True)]
        return Check(name, command, tuple(runs), self.network)


def license_problems(added: dict[str, str], header: str, paths: Sequence[str]) -> list[str]:
    """Added files matching `paths` whose text lacks the `header` regular expression."""
    pattern = re.compile(header, re.MULTILINE)
    return [
        f"{path}: no license header"
        for path, text in sorted(added.items())
        if scope.matches(path, paths) and not pattern.search(text)
    ]


def flipped_tests(first: Path, second: Path, report: str) -> tuple[str, ...]:
    """Tests whose outcome differs between the JUnit reports the two runs wrote."""
    found = []
    for root in (first, second):
        data = files.read_untrusted(root / report, JUNIT_LIMIT, root)
        try:
            found.append(junit.outcomes(data.decode("utf-8")) if data is not None else {})
        except ValueError:
            found.append({})
    return tuple(junit.flipped(found[0], found[1]))
