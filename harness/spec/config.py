"""ai/harness.toml: scope, verify commands, commit identity, defaults and limits."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.base import files, schemas
from harness.base.errors import InvalidInput
from harness.gate.diffgate import DEFAULT_MANIFESTS
from harness.spec import limits as limits_mod
from harness.spec.limits import Limits

DEFAULT_TEXT = """\
# harness configuration: see the harness README.

[identity]
name = "harness"
email = "harness@localhost"

[scope]
readonly = []
visible = ["**"]

[verify]
# Nothing here: a change is gated and its acceptance judged, but nothing builds or tests it
# (runs say so). $HARNESS_PYTHON is the Python running harness.
# build = '"$HARNESS_PYTHON" -m compileall -q src'
# test = '"$HARNESS_PYTHON" -m pytest -q -p no:cacheprovider'

[defaults]
timeouts = { soft_s = 600, hard_s = 900 }
verify_timeout_s = 900

# What a task may spend, as the agent CLIs report it (tokens read and written, USD), checked
# before each call; claude is also told the cost left (--max-budget-usd).
# [budgets]
# max_tokens = 2000000
# max_cost_usd = 5.0
"""


@dataclass(frozen=True)
class Verify:
    """[verify] and [coverage]: what the scratch worktree runs before anything is committed."""

    format: str | None = None
    lint: str | None = None
    license: str | None = None
    license_header: str | None = None
    license_paths: tuple[str, ...] = ()
    build: str | None = None
    test: str | None = None
    docs: str | None = None
    api_extract: str | None = None
    junit: str | None = None
    parallel_runs: bool = False
    strict_acceptance: bool = False
    isolate_network: bool = True
    # harness's own Python, which has coverage: a sandbox's PATH may hold no `python`.
    coverage_command: str = '"$HARNESS_PYTHON" -m coverage run --branch -m pytest'
    coverage_report: str = "coverage.json"

    @property
    def builds(self) -> bool:
        """Whether the build phase runs anything: format, lint, license or build."""
        return any((self.format, self.lint, self.license, self.license_header, self.build))


DRAFTED_BUDGETS = {"max_steps": 10, "max_parallel": 3, "max_runtime_s": 300}


@dataclass(frozen=True)
class Config:
    name: str
    email: str
    readonly: tuple[str, ...]
    visible: tuple[str, ...]
    manifests: tuple[str, ...]
    verify: Verify
    timeouts: dict[str, float]
    budgets: dict[str, Any]
    verify_timeout_s: float
    max_diff_bytes: int
    max_files: int
    max_output_bytes: int
    max_artifact_bytes: int
    sandbox: str = "bwrap"  # or "off": nothing is contained, and every event says so
    sandbox_limits: Limits = field(default_factory=Limits)  # [sandbox.limits]: each command's
    limits: dict[str, float] = field(default_factory=dict)  # [budgets]: the task's (budgets.py)
    prices: dict[str, float] = field(default_factory=dict)  # agent -> USD per million tokens
    max_depth: int = 5  # how deep plans may nest
    # A plan an agent drafted is held to these (drafting.py), lower than a person's.
    drafted: dict[str, float] = field(default_factory=lambda: dict(DRAFTED_BUDGETS))

    @property
    def contained(self) -> bool:
        return self.sandbox != "off"

    def boxed(self) -> Config:
        """This config with the boundary on whatever it says: the sandbox, and no network
        for checks. A record's config may be anyone's (a pull request's), and what its
        checks run is theirs too (docs/trusting-a-record.md); so are its limits, held to
        no more than the defaults."""
        return replace(
            self,
            sandbox="bwrap",
            verify=replace(self.verify, isolate_network=True),
            sandbox_limits=self.sandbox_limits.within(Limits()),
        )

    def loosened(self) -> list[str]:
        """How this config opens the boundary, in words: [] when it does not."""
        found = [] if self.contained else ["sandbox off"]
        if self.sandbox_limits != self.sandbox_limits.within(Limits()):
            found.append("limits above the defaults")
        return found + ([] if self.verify.isolate_network else ["network for checks"])


def load(path: Path, raw: bytes | None = None) -> Config:
    """Read the config (or `raw`, its bytes as already read); a missing file means all
    defaults."""
    if raw is None:
        # <root>/ai/harness.toml: no symlink below the repository's root is followed
        raw = files.read_regular(path, "ai/harness.toml", path.parents[1])
    data: dict[str, Any] = {}
    if raw is not None:
        data = files.load_toml(raw, "ai/harness.toml")
        schemas.validate("config", data, "ai/harness.toml")
    identity = data.get("identity", {})
    for key, value in identity.items():
        # As objects.commit_object holds them: either would move a commit header's bounds.
        if any(char in value for char in "<>\n"):
            raise InvalidInput(
                f"ai/harness.toml: $.identity.{key}: {value!r} holds '<', '>' or a line end"
            )
    scope = data.get("scope", {})
    verify = data.get("verify", {})
    # Files the checks leave in a copy, which harness reads and removes there: a path that
    # left the copy would be the host's (a pull request's config, replayed on CI).
    for key, named in (
        ("verify.junit", verify.get("junit")),
        ("coverage.report", data.get("coverage", {}).get("report")),
    ):
        if named is not None and (not named or named.startswith("/") or ".." in named.split("/")):
            raise InvalidInput(f"ai/harness.toml: $.{key}: {named!r} is no path inside the copy")
    defaults = data.get("defaults", {})
    limits = data.get("limits", {})
    sandbox = data.get("sandbox", {})
    timeouts = defaults.get("timeouts", {"soft_s": 600, "hard_s": 900})
    if timeouts["soft_s"] > timeouts["hard_s"]:
        raise InvalidInput("ai/harness.toml: $.defaults.timeouts: soft_s exceeds hard_s")
    return Config(
        name=identity.get("name", "harness"),
        email=identity.get("email", "harness@localhost"),
        readonly=tuple(scope.get("readonly", [])),
        visible=tuple(scope.get("visible", ["**"])),
        manifests=tuple(scope.get("manifests", DEFAULT_MANIFESTS)),
        verify=_verify(verify, data.get("coverage", {})),
        timeouts=dict(timeouts),
        budgets=dict(defaults.get("budgets", {})),
        verify_timeout_s=float(defaults.get("verify_timeout_s", 900)),
        max_diff_bytes=int(limits.get("max_diff_bytes", 1_000_000)),
        max_files=int(limits.get("max_files", 100)),
        max_output_bytes=int(limits.get("max_output_bytes", 8_000_000)),
        max_artifact_bytes=int(limits.get("max_artifact_bytes", 1_000_000)),
        sandbox=sandbox.get("mode", "bwrap"),
        sandbox_limits=Limits().merged(
            limits_mod.parse(sandbox.get("limits", {}), "ai/harness.toml: $.sandbox.limits")
        ),
        limits=dict(data.get("budgets", {})),
        prices=dict(data.get("prices", {})),
        max_depth=int(limits.get("max_depth", 5)),
        drafted=dict(data.get("drafted_budgets", DRAFTED_BUDGETS)),
    )


def _verify(verify: dict[str, Any], coverage: dict[str, Any]) -> Verify:
    commands = ("format", "lint", "build", "test", "docs", "api_extract", "junit")
    # `license` is a command, or a rule: {header = "<regex>", paths = [globs]}.
    license = verify.get("license")
    license_rule = license if isinstance(license, dict) else {}
    if "header" in license_rule:
        try:  # compiled when a change adds a file: refused now, not mid-run
            re.compile(license_rule["header"], re.MULTILINE)
        except (re.error, OverflowError, RecursionError) as exc:  # a{2**32}, ((((…))))
            raise InvalidInput(
                f"ai/harness.toml: $.verify.license.header: no regular expression: {exc}"
            ) from None
    return Verify(
        **{name: verify.get(name) or None for name in commands},
        license=license if isinstance(license, str) and license else None,
        license_header=license_rule.get("header"),
        license_paths=tuple(license_rule.get("paths", [])),
        parallel_runs=verify.get("parallel_runs", False),
        strict_acceptance=verify.get("strict_acceptance", False),
        isolate_network=verify.get("isolate_network", True),
        coverage_command=coverage.get("command", Verify.coverage_command),
        coverage_report=coverage.get("report", Verify.coverage_report),
    )
