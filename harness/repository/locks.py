"""One harness per task, and one writing harness per repository: they share the index and
the branch. A second one is busy (exit 3) unless it waits its turn."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from filelock import FileLock, Timeout

from harness.base.errors import Busy
from harness.repository.layout import Layout


@contextmanager
def locked(layout: Layout, task_id: str, wait: bool) -> Iterator[None]:
    """Hold the task's lock, then the repository's: Busy at once if either is held, unless
    `wait`."""
    locks = layout.state / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    held = []
    try:
        for path, what in (
            (locks / f"{task_id}.lock", f"task {task_id}"),
            (locks / "repository.lock", "the repository"),
        ):
            lock = FileLock(str(path), timeout=-1 if wait else 0)
            try:
                lock.acquire()
            except Timeout:
                raise Busy(f"{what} is busy: another harness holds {path}") from None
            held.append(lock)
        yield
    finally:
        for lock in reversed(held):
            lock.release()
