"""ai/harness.toml: scope, verify commands, commit identity, defaults and limits."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import schemas
from .diffgate import DEFAULT_MANIFESTS
from .errors import InvalidInput

DEFAULT_TEXT = """\
# harness configuration: see the harness README.

[identity]
name = "harness"
email = "harness@localhost"

[scope]
readonly = []
visible = ["**"]

[verify]
# build = "python -m compileall -q src"
# test = "python -m pytest -q -p no:cacheprovider"

[defaults]
timeouts = { soft_s = 600, hard_s = 900 }
budgets = { max_tokens = 8192 }
verify_timeout_s = 900
"""


@dataclass(frozen=True)
class Config:
    name: str
    email: str
    readonly: tuple[str, ...]
    visible: tuple[str, ...]
    manifests: tuple[str, ...]
    build: str | None
    test: str | None
    timeouts: dict[str, float]
    budgets: dict[str, Any]
    verify_timeout_s: float
    max_diff_bytes: int
    max_files: int
    max_output_bytes: int
    max_artifact_bytes: int


def load(path: Path) -> Config:
    """Read the config; a missing file means all defaults."""
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"ai/harness.toml: invalid TOML: {exc}") from None
        schemas.validate("config", data, "ai/harness.toml")
    identity = data.get("identity", {})
    scope = data.get("scope", {})
    verify = data.get("verify", {})
    defaults = data.get("defaults", {})
    limits = data.get("limits", {})
    timeouts = defaults.get("timeouts", {"soft_s": 600, "hard_s": 900})
    if timeouts["soft_s"] > timeouts["hard_s"]:
        raise InvalidInput("ai/harness.toml: $.defaults.timeouts: soft_s exceeds hard_s")
    return Config(
        name=identity.get("name", "harness"),
        email=identity.get("email", "harness@localhost"),
        readonly=tuple(scope.get("readonly", [])),
        visible=tuple(scope.get("visible", ["**"])),
        manifests=tuple(scope.get("manifests", DEFAULT_MANIFESTS)),
        build=verify.get("build") or None,
        test=verify.get("test") or None,
        timeouts=dict(timeouts),
        budgets=dict(defaults.get("budgets", {"max_tokens": 8192})),
        verify_timeout_s=float(defaults.get("verify_timeout_s", 900)),
        max_diff_bytes=int(limits.get("max_diff_bytes", 1_000_000)),
        max_files=int(limits.get("max_files", 100)),
        max_output_bytes=int(limits.get("max_output_bytes", 8_000_000)),
        max_artifact_bytes=int(limits.get("max_artifact_bytes", 1_000_000)),
    )
