"""The audit of the commits a task's log names: each must be a commit of the task on HEAD
carrying the trailers of the line that applied it.

The task's subtask commits are listed by one git process, oldest first, started before the
log is read and read in step with the log that names them in the same order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

from harness.readers.findings import CAP, Findings
from harness.record.protocol import short
from harness.repository import repo

_HEX40 = re.compile(r"^[0-9a-f]{40}$")


class Commits:
    """The task's subtask commits reachable from HEAD, oldest first, as the log names them.

    Harness makes each commit just before the subagent_diffs_applied naming it, so the two
    come in the same order and one pass matches them; a commit met early is kept aside.
    """

    def __init__(self, git: repo.Repo, task_id: str, found: Findings) -> None:
        self.git, self.task_id, self.add = git, task_id, found.add
        self.head: str | None = None
        self.listing: repo.Spool | None = None
        self.records: Iterator[bytes] | None = None
        self.aside: dict[str, dict[str, str]] = {}
        self.lookups = 0

    def start(self, stack: ExitStack, head: str | None) -> None:
        self.head = head
        if head is not None:
            self.listing = self.git.task_commit_listing(stack, self.task_id, head)

    def check(self, i: int, ev: dict[str, Any], step: str, call: object, commit: object) -> None:
        """The commit a subagent_diffs_applied at line `i` names, against that line."""
        if not isinstance(commit, str) or not _HEX40.match(commit):
            self.add("commit", i, f"details.commit {commit!r} is not a commit id")
            return
        found = self.trailers(commit)
        if isinstance(found, str):
            self.add("commit", i, f"commit {short(commit)} {found}")
            return
        wanted = {
            "Harness-Task": self.task_id,
            "Harness-Subtask": step,
            "Harness-Call-Id": call,
            "Harness-Log-Head": ev["prev"],
        }
        for key, value in wanted.items():
            if found.get(key) != value:
                self.add(
                    "commit",
                    i,
                    f"commit {short(commit)} has {key}: {short(found.get(key, 'none'))}, "
                    f"not {short(value)}",
                )

    def trailers(self, commit: str) -> dict[str, str] | str:
        """The commit's Harness trailers, or why it is not a commit of this record."""
        if commit in self.aside:
            return self.aside.pop(commit)
        if self.records is None:
            self.records = repo.split(self.listing.result()) if self.listing else iter(())
        for sha in self.records:
            found = repo.trailers(next(self.records, b"").decode("utf-8", "replace"))
            if sha.decode() == commit:
                return found
            self.aside[sha.decode()] = found
        return self.elsewhere(commit)

    def elsewhere(self, commit: str) -> dict[str, str] | str:
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
