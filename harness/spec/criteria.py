"""Acceptance criteria strings from plan.json, parsed into machine-checkable forms."""

from __future__ import annotations

import re
from dataclasses import dataclass

NUMERIC_KINDS = ("line", "branch", "coverage_delta")
FLAG_KINDS = ("api_unchanged", "docs_clean")
OPS = (">=", "<=", "==", ">", "<")

# Measured values are ratios of integer counts (or differences of them), so a criterion such as
# "coverage_delta>=0.57" must not fail on the last bit of a float subtraction.
EPSILON = 1e-9

_NUMERIC = re.compile(
    r"\s*(line|branch|coverage_delta)\s*(>=|<=|==|>|<)\s*"
    r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)\s*(%?)\s*",
    re.IGNORECASE,
)
_FLAG = re.compile(r"\s*(api|docs)[\s_-]*(unchanged|clean)\s*", re.IGNORECASE)
_CMD = re.compile(r"\s*cmd\s*:(.*)", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Criterion:
    """One acceptance criterion; `value` is always a fraction (0.8 means 80%)."""

    text: str
    kind: str
    op: str | None = None
    value: float | None = None
    command: str | None = None


def parse(text: str) -> Criterion:
    """Parse one criterion; free prose becomes kind "unverified" (a human must judge it).

    Raises ValueError for a recognised form with an impossible value, since that is a plan
    error the planner should fix rather than something to silently skip.
    """
    if m := _NUMERIC.fullmatch(text):
        kind, op, number, percent = m.group(1).lower(), m.group(2), m.group(3), m.group(4)
        value = float(number) / 100 if percent else float(number)
        low = -1.0 if kind == "coverage_delta" else 0.0
        if not low <= value <= 1.0:
            hint = "" if percent else f" (did you mean {number}%?)"
            raise ValueError(
                f"criterion {text!r}: {kind} value {value:g} is outside {low:g}..1 as a "
                f"fraction{hint}"
            )
        return Criterion(text=text, kind=kind, op=op, value=value)
    if (m := _FLAG.fullmatch(text)) and (m.group(1).lower(), m.group(2).lower()) in (
        ("api", "unchanged"),
        ("docs", "clean"),
    ):
        return Criterion(text=text, kind=f"{m.group(1).lower()}_{m.group(2).lower()}")
    if m := _CMD.fullmatch(text):
        command = m.group(1).strip()
        if not command:
            raise ValueError(f"criterion {text!r}: 'cmd:' needs a command after it")
        return Criterion(text=text, kind="cmd", command=command)
    return Criterion(text=text, kind="unverified")


def render(c: Criterion) -> str:
    """The canonical text of a machine form; parse(render(c)) gives back the same form."""
    if c.kind in NUMERIC_KINDS:
        return f"{c.kind}{c.op}{c.value!r}"
    if c.kind == "cmd":
        return f"cmd: {c.command}"
    return c.kind if c.kind in FLAG_KINDS else c.text


def holds(c: Criterion, measured: float) -> bool:
    """Whether a measured fraction satisfies a numeric criterion (within EPSILON)."""
    if c.kind not in NUMERIC_KINDS or c.op is None or c.value is None:
        raise ValueError(f"criterion {c.text!r} of kind {c.kind!r} is not numeric")
    if measured != measured:  # NaN satisfies nothing
        return False
    v = c.value
    if c.op == ">=":
        return measured >= v - EPSILON
    if c.op == ">":
        return measured > v + EPSILON
    if c.op == "<=":
        return measured <= v + EPSILON
    if c.op == "<":
        return measured < v - EPSILON
    if c.op == "==":
        return abs(measured - v) <= EPSILON
    raise ValueError(f"criterion {c.text!r}: unknown operator {c.op!r}")
