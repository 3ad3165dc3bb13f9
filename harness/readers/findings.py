"""What an audit found: one printable line each, tied to a log line or not; past a few of
one kind, the rest of that kind are only counted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from harness.base.printable import printable

# Findings of one kind shown before the rest of that kind are only counted: a log broken
# early must not bury the other findings under thousands of lines.
CAP = 20


@dataclass(frozen=True)
class Finding:
    seq: int | None  # the log line it concerns, None when not tied to a line
    reason: str


class Findings:
    def __init__(self) -> None:
        self.shown: list[Finding] = []
        self.counts: Counter[str] = Counter()

    def add(self, kind: str, seq: int | None, reason: str | Callable[[], str]) -> None:
        """Record a finding; `reason` may be a callable where wording it is costly."""
        self.counts[kind] += 1
        if self.counts[kind] <= CAP:
            text = reason if isinstance(reason, str) else reason()
            # Log values are anyone's text: a finding stays one printable line.
            self.shown.append(Finding(seq, printable(text)))

    def result(self) -> list[Finding]:
        shown = sorted(self.shown, key=lambda f: (f.seq is None, f.seq or 0, f.reason))
        more = [
            Finding(None, f"{n - CAP} more {kind} findings not shown")
            for kind, n in sorted(self.counts.items())
            if n > CAP
        ]
        return shown + more
