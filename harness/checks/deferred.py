"""What a run of checks says, held back: its log lines, evidence files and phase ends, kept in
order and given to the real log, ledger and progress only when its change lands.

Checks may run ahead of their turn (in another thread, on another machine), on a tree that
may never land; the record must read as if they ran at their turn. A run that is not used
leaves nothing behind, and one that is leaves exactly what running it there would have.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol


class Sink(Protocol):
    """The log, as checks write to it."""

    def append(
        self,
        event: str,
        status: str,
        *,
        step: str | None = None,
        details: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> Any: ...


class Keeper(Protocol):
    """The ledger, as checks keep their evidence with it."""

    def write(self, path: Path, data: bytes) -> None: ...

    def remove(self, path: Path) -> None: ...


@dataclass
class Deferred:
    """Everything a run of checks said, in order: ("event", (event, status, step, details,
    error)), ("write", (relative path, bytes)), ("remove", relative path), ("phase", (name,
    ok)). Evidence paths are relative to the folder the evidence belongs in, which only
    the landing knows."""

    said: list[tuple[str, Any]] = field(default_factory=list)

    def append(
        self,
        event: str,
        status: str,
        *,
        step: str | None = None,
        details: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        self.said.append(("event", (event, status, step, details, error)))

    def write(self, path: Path, data: bytes) -> None:
        self.said.append(("write", (PurePosixPath(path).as_posix(), data)))

    def remove(self, path: Path) -> None:
        self.said.append(("remove", PurePosixPath(path).as_posix()))

    def phase(self, name: str, ok: bool) -> bool:
        self.said.append(("phase", (name, ok)))
        return ok

    def give(
        self, log: Sink, ledger: Keeper, folder: Path, phase: Callable[[str, bool], bool]
    ) -> None:
        """Say it all now, in order: lines to `log`, evidence under `folder` through
        `ledger`, phase ends to `phase`."""
        for kind, what in self.said:
            if kind == "event":
                event, status, step, details, error = what
                log.append(event, status, step=step, details=details, error=error)
            elif kind == "write":
                ledger.write(folder / what[0], what[1])
            elif kind == "remove":
                ledger.remove(folder / what)
            else:
                phase(*what)
