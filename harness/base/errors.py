"""The one error family; each kind carries the exit code the CLI returns for it."""

from __future__ import annotations


class HarnessError(Exception):
    """Base: an expected failure with a one-line message and an exit code."""

    exit_code = 4


class Halted(HarnessError):
    """The task stopped: blocked, a check failed, or a human is needed."""

    exit_code = 1


class InvalidInput(HarnessError):
    """A file or an argument is wrong; refused before the work it concerns (README: exit 2)."""

    exit_code = 2


class Busy(HarnessError):
    """Another harness process holds the task's lock."""

    exit_code = 3


class AwaitingApproval(Halted):
    """A human-supervised subtask's checked change waits for `harness approve` or `reject`."""
