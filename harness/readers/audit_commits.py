"""git's side of the audit of the commits a task's log names (the rules: audit_record): the
task's subtask commits listed by one git process, oldest first, started before the log is
read and read in step with it; and a commit outside that listing, asked of git a few
times only."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack

from harness.readers.audit_record import Commit
from harness.readers.findings import CAP
from harness.record.protocol import short
from harness.repository import repo


class Commits:
    def __init__(self, git: repo.Repo, task_id: str) -> None:
        self.git, self.task_id = git, task_id
        self.head: str | None = None
        self.spool: repo.Spool | None = None
        self.lookups = 0

    def start(self, stack: ExitStack, head: str | None) -> None:
        self.head = head
        if head is not None:
            self.spool = self.git.task_commit_listing(stack, self.task_id, head)

    def listing(self) -> Iterator[Commit]:
        """The task's subtask commits reachable from HEAD, oldest first, as the log names
        them; git's output is awaited only once the first is asked for."""
        if self.spool is None:
            return
        records = repo.split(self.spool.result())
        for sha in records:
            found = repo.trailers(next(records, b"").decode("utf-8", "replace"))
            if found.get("Harness-Task") == self.task_id:
                yield sha.decode(), found

    def elsewhere(self, commit: str) -> Mapping[str, str] | str:
        """Ask git about a commit outside the listing; a few times only, a process each."""
        self.lookups += 1
        if self.head is None:
            return "cannot be on HEAD: the repository has no commits"
        if self.lookups > CAP:
            return f"is no commit of this task reachable from {short(self.head)}"
        if not self.git.exists(commit):
            return "does not exist"
        if not self.git.is_ancestor(commit, self.head):
            return "is not an ancestor of HEAD"
        return repo.trailers(self.git.message(commit))
