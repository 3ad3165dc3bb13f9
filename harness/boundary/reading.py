"""A command's words as its program reads them: the Command, the Hazards among its options
and subcommands, and the Found a program's grammar fills while it reads them."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field


def split(text: str) -> list[str] | None:
    """A line's words as the shell splits them; None when its quotes do not close."""
    try:
        return shlex.split(text)
    except ValueError:
        return None


def names(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True)
class Hazard:
    """An option or subcommand only a prefix that holds it allows."""

    at: int  # the word it starts at
    text: str  # as written
    why: str


@dataclass(frozen=True)
class Command:
    """One command's words as its program reads them."""

    program: str
    options: tuple[tuple[str, ...], ...] = ()  # each read before the subcommand, in its forms
    rest: tuple[str, ...] = ()  # the subcommand and its words; pytest's other words
    hazards: tuple[Hazard, ...] = ()
    cosmetic: frozenset[int] = frozenset()  # words of options that only change its output
    runs: tuple[tuple[str, ...] | str, ...] = ()  # commands (words) and lines it may run
    any_from: int | None = None  # from this word on, any word may begin a command

    def forms(self) -> list[str]:
        """The forms a denylist pattern is held against, but for the one as written."""
        base = [self.program, *self.rest]
        return [" ".join(base)] + [" ".join([self.program, *o, *self.rest]) for o in self.options]


@dataclass
class Found:
    """What a grammar has read so far, turned into a Command once it is done."""

    options: list[tuple[str, ...]] = field(default_factory=list)
    hazards: list[Hazard] = field(default_factory=list)
    cosmetic: set[int] = field(default_factory=set)
    runs: list[tuple[str, ...] | str] = field(default_factory=list)
    any_from: int | None = None

    def option(self, at: int, written: Sequence[str], cosmetic: bool = False) -> None:
        """An option as written; one of `--name=value` is also read as `--name value`."""
        self.options.append(tuple(written))
        name, eq, value = written[0].partition("=")
        if eq and len(written) == 1 and name.startswith("--"):
            self.options.append((name, value))
        if cosmetic:
            self.cosmetic.update(range(at, at + len(written)))

    def hazard(self, at: int, text: str, why: str, runs: str | None = None) -> None:
        self.hazards.append(Hazard(at, text, why))
        if runs:
            self.runs.append(runs)

    def command(self, name: str, rest: Sequence[str]) -> Command:
        return Command(
            name,
            tuple(self.options),
            tuple(rest),
            tuple(self.hazards),
            frozenset(self.cosmetic),
            tuple(self.runs),
            self.any_from,
        )


RUNS = "runs another program"
SETTING = "sets a git setting that may run a program"
UNKNOWN = "is an option of {} harness does not know"
ELSEWHERE = "names a path outside the workspace"
