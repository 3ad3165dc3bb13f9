"""coverage.py JSON reports reduced to integer counts, and deltas computed from them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

METRICS = ("line", "branch")
_FIELDS = ("covered_lines", "num_statements", "covered_branches", "num_branches")


@dataclass(frozen=True)
class Coverage:
    """Totals of one run; only integer counts are kept because coverage.py's
    `percent_covered` mixes statements and branches when branch coverage is on."""

    covered_lines: int
    num_statements: int
    covered_branches: int
    num_branches: int

    def line(self) -> float:
        return float(self._ratio("line"))

    def branch(self) -> float:
        return float(self._ratio("branch"))

    def _ratio(self, metric: str) -> Fraction:
        # Nothing to cover counts as fully covered, so an empty module never fails a gate.
        if metric == "line":
            covered, total = self.covered_lines, self.num_statements
        elif metric == "branch":
            covered, total = self.covered_branches, self.num_branches
        else:
            raise ValueError(f"unknown coverage metric {metric!r}; expected one of {METRICS}")
        return Fraction(covered, total) if total else Fraction(1)


def from_report(data: Mapping[str, object]) -> Coverage:
    """Read `totals` of a `coverage json` report (run with `--branch`)."""
    totals = data.get("totals")
    if not isinstance(totals, Mapping):
        raise ValueError("coverage report has no 'totals' object; is this `coverage json` output?")
    counts: dict[str, int] = {}
    for name in _FIELDS:
        if name not in totals:
            hint = " (run coverage with --branch)" if "branch" in name else ""
            raise ValueError(f"coverage report totals lack {name!r}{hint}")
        value = totals[name]
        # bool is an int subclass; a true/false count means a corrupt or forged report.
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"coverage report totals.{name} must be a non-negative int: {value!r}")
        counts[name] = value
    for covered, total in (_FIELDS[:2], _FIELDS[2:]):
        if counts[covered] > counts[total]:
            raise ValueError(
                f"coverage report totals.{covered}={counts[covered]} exceeds "
                f"{total}={counts[total]}"
            )
    return Coverage(**counts)


def delta(base: Coverage, new: Coverage, metric: str) -> float:
    """new - base for "line" or "branch", as a fraction (0.05 is five percentage points).

    Subtracting exact fractions before the one rounding keeps equal coverage at exactly 0.0.
    """
    return float(new._ratio(metric) - base._ratio(metric))


def normalise_claim(claimed: float) -> float:
    """A worker's claimed delta as a fraction.

    Claims are meant as fractions (0.10 = ten points), but a claim whose magnitude exceeds 1
    cannot be a fraction of coverage, so it is read as percentage points (10 -> 0.10).
    """
    return claimed / 100 if abs(claimed) > 1 else claimed


def matches_claim(measured_delta: float, claimed: float, tolerance: float = 0.01) -> bool:
    """Whether the worker's `metrics.coverage_delta` is within `tolerance` (a fraction; default
    one percentage point) of the measured delta. Non-finite claims never match."""
    if not (math.isfinite(measured_delta) and math.isfinite(claimed)):
        return False
    # A hair of slack so a claim exactly one point off is not refused by float rounding.
    return abs(measured_delta - normalise_claim(claimed)) <= tolerance + 1e-12
