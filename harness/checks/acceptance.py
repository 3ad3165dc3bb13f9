"""Acceptance (seed §F.2): the plan's criteria and the role's rules, judged by machine."""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from harness.base import files
from harness.checks import api, citations, docstrings
from harness.checks import coverage as cov
from harness.checks.verify import Check, Runner
from harness.gate.diffgate import Change
from harness.repository.repo import Repo
from harness.spec import criteria
from harness.spec.config import Verify
from harness.spec.plan import Subtask

COVERAGE_KINDS = ("line", "branch", "coverage_delta")
API_ROLES = ("micro-refactor",)
NO_TESTS_RAN = 5  # pytest's exit code when it collected no test
REPORT_LIMIT = 64 << 20  # a coverage report is read from untrusted output: bounded


class NoTests(ValueError):
    """The coverage command ran no test (a repository with none yet)."""


@dataclass
class Verdict:
    verified: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    measured: dict[str, Any] = field(default_factory=dict)

    def judge(self, label: str, problem: str | None) -> None:
        if problem is None:
            self.verified.append(label)
        else:
            self.failures.append(f"{label}: {problem}")


def review_problems(sub: Subtask, result: dict[str, Any], git: Repo, base: str) -> list[str]:
    """A review's findings (notes and risks) must cite existing lines of its inputs."""
    if sub.role != "review":
        return []
    findings = [*result.get("notes", []), *result.get("risks", [])]
    return citations.check_findings(findings, git.line_counts(base, sub.inputs))


class Judge:
    """Evaluates one change in its scratch worktree against a base worktree made on demand."""

    def __init__(
        self,
        sub: Subtask,
        result: dict[str, Any],
        changes: list[Change],
        *,
        git: Repo,
        head: str,
        tree: str,
        worktree: Path,
        runner: Runner,
        verify: Verify,
        cache: Path,
        base: Callable[[], Path],
    ) -> None:
        self.sub, self.result, self.changes = sub, result, changes
        self.git, self.head, self.wt, self.runner, self.cfg = git, head, worktree, runner, verify
        self.tree = tree  # what would be committed: the head with the change applied
        self.cache = cache
        self.base = base  # a worktree of the head without the change, made on first use
        self.verdict = Verdict()

    def evaluate(self) -> Verdict:
        """Every criterion of the plan and every rule of the role."""
        parsed = [criteria.parse(text) for text in self.sub.acceptance]
        v = self.verdict
        needs_coverage = self.sub.role == "test-author" or any(
            c.kind in COVERAGE_KINDS for c in parsed
        )
        if needs_coverage:
            self.coverage(parsed)
        for c in parsed:
            if c.kind == "cmd" and c.command:
                check = self.runner.check("acceptance-cmd", c.command, self.wt)
                v.checks.append(check)
                v.judge(c.text, None if check.passed else check.summary())
            elif c.kind == "api_unchanged":
                v.judge(c.text, self.api_problem())
            elif c.kind == "docs_clean":
                if self.cfg.docs is None:
                    v.unverified.append(f"{c.text} (no [verify] docs command)")
                else:
                    v.judge(c.text, self.docs_problem())
            elif c.kind == "unverified":
                v.unverified.append(c.text)
        self.role_rules()
        return v

    # -- role rules ----------------------------------------------------------------------------

    def role_rules(self) -> None:
        role, v = self.sub.role, self.verdict
        guards_api = role in API_ROLES or (role == "review" and self.changes)
        if guards_api and not self.sub.allow_api_change:
            v.judge(f"{role}: public API unchanged", self.api_problem())
        if role == "doc-writer":
            if self.cfg.docs is not None:
                v.judge("doc-writer: docs build clean", self.docs_problem())
            problems = self.docstring_problems()
            v.judge("doc-writer: documented parameters exist", "; ".join(problems) or None)
        if role == "review":
            problems = review_problems(self.sub, self.result, self.git, self.head)
            v.judge("review: findings cite lines of the inputs", "; ".join(problems) or None)

    def python_sources(self, commit: str) -> dict[str, str]:
        """The changed .py files as they are in `commit` (read from git, never from a scratch
        copy that untrusted code has run in)."""
        paths = sorted({p for c in self.changes for p in (c.path, c.old_path) if p})
        found = {}
        for path in (p for p in paths if p.endswith(".py")):
            text = self.git.show(commit, path)
            if text is not None:
                found[path] = text
        return found

    def api_problem(self) -> str | None:
        try:
            diff = api.api_changes(self.python_sources(self.head), self.python_sources(self.tree))
        except ValueError as exc:
            return str(exc)
        if diff:
            return "; ".join(diff[:5])
        if self.cfg.api_extract is not None:
            before = self.runner.run("api-base", self.cfg.api_extract, self.base())
            after = self.runner.run("api-change", self.cfg.api_extract, self.wt)
            if not (before.ok and after.ok):
                return f"`{self.cfg.api_extract}` failed"
            if before.cut or after.cut:
                # Two logs cut at the same length may differ past the cut: fail closed.
                return f"`{self.cfg.api_extract}` printed too much to compare"
            if before.log.read_bytes() != after.log.read_bytes():
                return f"`{self.cfg.api_extract}` output changed"
        return None

    def docs_problem(self) -> str | None:
        assert self.cfg.docs is not None
        check = self.runner.check("docs", self.cfg.docs, self.wt)
        self.verdict.checks.append(check)
        return None if check.passed else check.summary()

    def docstring_problems(self) -> list[str]:
        before = self.python_sources(self.head)
        found: list[str] = []
        for path, text in self.python_sources(self.tree).items():
            found += [
                f"{path}: {p}"
                for p in docstrings.changed_docstring_mismatches(before.get(path), text)
            ]
        return found

    # -- coverage ------------------------------------------------------------------------------

    def coverage(self, parsed: list[criteria.Criterion]) -> None:
        v = self.verdict
        metric = "branch" if any(c.kind == "branch" for c in parsed) else "line"
        try:
            change = self.measure(self.wt, "change")
            base = self.base_coverage(change)
        except ValueError as exc:
            v.failures.append(f"coverage: {exc}")
            return
        delta = cov.delta(base, change, metric)
        v.measured["coverage"] = {
            "metric": metric,
            "base": [
                base.covered_lines,
                base.num_statements,
                base.covered_branches,
                base.num_branches,
            ],
            "change": [
                change.covered_lines,
                change.num_statements,
                change.covered_branches,
                change.num_branches,
            ],
            "delta": round(delta, 6),
        }
        values = {"line": change.line(), "branch": change.branch(), "coverage_delta": delta}
        for c in parsed:
            if c.kind in COVERAGE_KINDS:
                measured = values[c.kind]
                v.judge(c.text, None if criteria.holds(c, measured) else f"measured {measured:.4f}")
        metrics = self.result.get("metrics", {})
        claim = metrics.get("coverage_delta", metrics.get("coverage_expectation"))
        if self.sub.role == "test-author" and isinstance(claim, int | float):
            ok = cov.matches_claim(delta, float(claim))
            v.judge(
                "test-author: claimed coverage delta within 1 point",
                None if ok else f"claimed {claim}, measured {delta:.4f} ({metric})",
            )

    def measure(self, where: Path, label: str) -> cov.Coverage:
        """The coverage the command measures in `where`."""
        report = where / self.cfg.coverage_report
        # A stale report must not be read; one earlier commands made a folder stays unread.
        files.remove_inside(where, self.cfg.coverage_report)
        check = self.runner.check(f"coverage-{label}", self.cfg.coverage_command, where)
        self.verdict.checks.append(check)
        if all(run.code == NO_TESTS_RAN for run in check.runs):
            raise NoTests(f"{check.summary()}: no test ran")
        if not check.passed:
            raise ValueError(check.summary())
        data = files.read_untrusted(report, REPORT_LIMIT, where)
        if data is None:
            # The command left only coverage's data file: turn it into the JSON report.
            name = shlex.quote(self.cfg.coverage_report)
            # $HARNESS_PYTHON, not this machine's path: the command is recorded. -P: harness's
            # own coverage, not a coverage/ package the change or the repository holds.
            export = f'"$HARNESS_PYTHON" -P -m coverage json -q -o {name}'
            exported = self.runner.check(f"coverage-json-{label}", export, where)
            self.verdict.checks.append(exported)
            data = files.read_untrusted(report, REPORT_LIMIT, where) if exported.passed else None
            if data is None:
                raise ValueError(f"no coverage report at {self.cfg.coverage_report}")
        try:
            return cov.from_report(orjson.loads(data))
        except (ValueError, AttributeError) as exc:
            raise ValueError(f"{self.cfg.coverage_report}: not a coverage report ({exc})") from None

    def base_coverage(self, change: cov.Coverage) -> cov.Coverage:
        """Measured once per base tree and coverage command, then read from the cache. A
        base with no tests yet covers none of what the change's tests measure (not cached:
        that depends on the change).

        The tree is keyed without the top-level ai/ folder: the harness's own record commit
        changes it after every step, so a key over the whole tree would never be hit again.
        """
        tree = self.git.tree_without(self.head, "ai")
        key = hashlib.sha256(f"{tree}\0{self.cfg.coverage_command}".encode()).hexdigest()
        cached = self.cache / f"{key}.json"
        if cached.is_file():
            return cov.from_report(orjson.loads(cached.read_bytes()))
        try:
            measured = self.measure(self.base(), "base")
        except NoTests:
            return cov.Coverage(0, change.num_statements, 0, change.num_branches)
        files.atomic_write(cached, files.dumps({"totals": asdict(measured)}))
        return measured
