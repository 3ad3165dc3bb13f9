"""The checks of one attempt: format, lint, license, build, tests twice, acceptance.

Each result is logged once per attempt (a rerun after a kill does not repeat a logged
success) and kept as evidence beside the exchange.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from harness.base import files, folders
from harness.base.errors import Halted
from harness.checks.acceptance import Judge
from harness.checks.deferred import Keeper, Sink
from harness.checks.verify import Check, Runner, flipped_tests, license_problems
from harness.gate.diffgate import Change
from harness.spec.config import Verify

# The successes a rerun of an attempt's checks after a kill does not log again (Checks.once).
ONCE = frozenset({"build_succeeded", "test_passed", "phase_completed"})


class Steps(Protocol):
    """The three points where a step runs checks; a replay may answer them from the record."""

    def build(self, wt: Path, changes: list[Change]) -> bool: ...

    def test(self, wt: Path, command: str) -> bool: ...

    def accept(self, judge: Judge, lenient: bool = False) -> bool: ...


class Checks:
    def __init__(
        self,
        log: Sink,
        step: str,
        logged: list[dict[str, Any]],
        cfg: Verify,
        runner: Runner,
        evidence: Path,
        ledger: Keeper,
        scratch: Callable[[str], Path],
        source: Callable[[str], str | None],
    ) -> None:
        self.log, self.step, self.cfg = log, step, cfg
        self.logged = logged  # what a killed run of this attempt already logged
        self.runner, self.evidence, self.scratch = runner, evidence, scratch
        self.ledger, self.kept = ledger, 0  # evidence files written since the folder was emptied
        self.source = source  # a changed file's text as it would be committed
        ledger.remove(evidence)

    def error(self, event: str, details: dict[str, Any], reason: str) -> None:
        self.log.append(event, "error", step=self.step, details=details, error=reason)

    def build(self, wt: Path, changes: list[Change]) -> bool:
        """format, lint, license (command or header rule), build: each once, in order."""
        cfg = self.cfg
        if cfg.license_header is not None:
            added = {
                c.path: self.source(c.path) or "" for c in changes if c.kind in ("add", "rename")
            }
            problems = license_problems(added, cfg.license_header, cfg.license_paths)
            details = {"check": "license", "rule": cfg.license_header}
            if problems:
                self.error("build_failed", details, "; ".join(problems))
                return False
            self.once("build_succeeded", details)
        for name in ("format", "lint", "license", "build"):
            command = getattr(cfg, name)
            if command and not self.judge(self.runner.check(name, command, wt), "build"):
                return False
        return True

    def test(self, wt: Path, command: str) -> bool:
        """Two runs, each in its own copy of the built worktree; pass/pass only."""
        cfg = self.cfg
        twin = self.scratch("verify-2")
        folders.remove(twin)
        try:
            folders.copy(wt, twin)
        except folders.TreeError as exc:
            # What the build left is the change's: a failed test, as a run of it would be.
            folders.remove(twin)
            details = {"check": "test", "command": command, "uncopied": str(exc)}
            self.error("test_failed", details, f"the built tree cannot be copied: {exc}")
            return False
        except OSError as exc:
            raise Halted(f"cannot copy the built tree for the second test run: {exc}") from None
        try:
            check = self.runner.twice("test", command, [wt, twin], cfg.parallel_runs)
            if cfg.junit is not None and not check.passed:
                check = replace(check, flipped=flipped_tests(wt, twin, cfg.junit))
        finally:
            folders.remove(twin)
        return self.judge(check, "test")

    def judge(self, check: Check, kind: str) -> bool:
        """Log a check's result (a success only once per attempt) and keep its evidence."""
        good, bad = {
            "build": ("build_succeeded", "build_failed"),
            "test": ("test_passed", "test_failed"),
        }[kind]
        self.keep(check)
        if check.passed:
            self.once(good, check.details())
            return True
        self.error(bad, check.details(), check.summary())
        return False

    def once(self, event: str, details: dict[str, Any]) -> None:
        """A success a killed run already logged is not logged again."""
        if not any(
            e["event"] == event and e.get("details", {}).get("check") == details["check"]
            for e in self.logged
        ):
            self.log.append(event, "ok", step=self.step, details=details)

    def keep(self, check: Check) -> None:
        """Evidence beside the exchange: command, exit codes, durations, output tails."""
        self.ledger.write(
            self.evidence / f"{self.kept:02d}-{check.name}.json", files.pretty(check.evidence())
        )
        self.kept += 1

    def accept(self, judge: Judge, lenient: bool = False) -> bool:
        """The acceptance criteria judged; `lenient` (a loop with rounds left to meet them):
        criteria not met yet pass, logged as `unmet`, for the loop to go on."""
        verdict = judge.evaluate()
        for check in verdict.checks:
            self.keep(check)
        cfg = self.cfg
        failures = list(verdict.failures)
        if cfg.strict_acceptance and verdict.unverified:
            failures.append("unverified under strict_acceptance: " + "; ".join(verdict.unverified))
        details: dict[str, Any] = {
            "check": "acceptance",
            "verified": verdict.verified,
            "unverified": verdict.unverified,
            **verdict.measured,
        }
        if failures and not lenient:
            self.error("acceptance_failed", details, "; ".join(failures))
            return False
        if failures:
            details["unmet"] = failures
        if verdict.verified or verdict.unverified or failures:
            details["phase"] = "acceptance"
            self.once("phase_completed", details)
        return True
