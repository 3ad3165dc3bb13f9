"""What a task's commits on HEAD must say of its log, and with a key what its signatures
cover: judged from what the audit's one pass over the log and git's listings found, with no
file and no git of its own (a commit outside the listing is asked of `elsewhere`), so the
rules can be tried on any record in process.

The log's hash chain makes a signed head cover every line up to it, and each line names the
subtask commit it applied by its id, which covers that commit's tree, message and parents.
So a key proves the whole record when the newest signed head is the last line, every
harness commit on HEAD is one the log names (a record commit by its head, a subtask commit
by the line that applied it), the record commits' heads move forward as the commits do, and
once a record commit is signed every later one is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.record import checkpoint
from harness.record.protocol import short

if TYPE_CHECKING:  # the `sign` extra's key type, imported by `audit --key` alone
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

Commit = tuple[str, Mapping[str, str]]  # a commit's id and its Harness trailers
HEAD = "Harness-Log-Head"
CALL = "Harness-Call-Id"  # what a subtask commit carries and a record commit does not
Add = Callable[[str, int | None, str], None]  # a finding: its kind, its line, its reason
# A commit outside the listing: its trailers, or why it is no commit of this record.
Elsewhere = Callable[[str], Mapping[str, str] | str]


@dataclass(frozen=True)
class Log:
    """What the pass over the log found: how many lines it has, and the index of each head
    the record commits (and the newest commit) carry that is one of its lines."""

    lines: int
    at: Mapping[str, int]


class Applied:
    """The task's subtask commits on HEAD, oldest first, held to the lines that applied
    them as the log is read: harness makes each commit just before the line naming it, so
    the two come in the same order and one pass matches them; a commit met early is kept
    aside, and what is left once the log is read no line named."""

    def __init__(self, listing: Iterable[Commit], elsewhere: Elsewhere, add: Add) -> None:
        self.listing, self.elsewhere, self.add = iter(listing), elsewhere, add
        self.aside: dict[str, Mapping[str, str]] = {}

    def check(self, i: int, commit: str, wanted: Mapping[str, object]) -> None:
        """The commit line `i` applied, against the trailers that line wants it to carry."""
        found = self.trailers(commit)
        if isinstance(found, str):
            self.add("commit", i, f"commit {short(commit)} {found}")
            return
        for key, value in wanted.items():
            if found.get(key) != value:
                self.add(
                    "commit",
                    i,
                    f"commit {short(commit)} has {key}: {short(found.get(key, 'none'))}, "
                    f"not {short(value)}",
                )

    def trailers(self, commit: str) -> Mapping[str, str] | str:
        if commit in self.aside:
            return self.aside.pop(commit)
        for sha, found in self.listing:
            if sha == commit:
                return found
            self.aside[sha] = found
        return self.elsewhere(commit)

    def unnamed(self) -> Iterator[str]:
        """Once the log is read: each subtask commit on HEAD no line applied."""
        for sha, found in (*self.aside.items(), *self.listing):
            yield (
                f"commit {short(sha)} carries subtask {found.get('Harness-Subtask', '?')}'s "
                "trailers, but no line of the log names it"
            )


def heads(records: Sequence[Commit]) -> set[str]:
    """The log heads the pass over the log must place."""
    return {t[HEAD] for _, t in records if HEAD in t}


def judge(
    task_id: str, log: Log, records: Sequence[Commit], key: Ed25519PublicKey | None
) -> Iterator[tuple[str, int | None, str]]:
    """Every finding about the task's record commits on HEAD (`records`, newest first, the
    task's newest commit first of all even when it is a subtask commit) against the log,
    and with `key` about what their signatures cover; one at a time, as an unsigned line is
    a finding each and a log may hold millions."""
    yield from _unplaced(log, records)
    yield from _backwards(log, records)
    if key is not None and records:
        for why in checkpoint.audit(records[::-1], records[0][0], key, task_id):
            yield "record", None, why
        yield from _unsigned(task_id, log, records, key)


def _unplaced(log: Log, records: Sequence[Commit]) -> Iterator[tuple[str, int | None, str]]:
    """Each head must be a line of the log: a log cut back is caught even after later
    commits. A subtask commit's head is held to the line that applied it (Applied)."""
    by_head: dict[str, str] = {}
    for sha, trailers in reversed(records):  # the newest commit naming a head is named
        if HEAD in trailers:
            by_head[trailers[HEAD]] = sha
    for head, sha in sorted(by_head.items()):
        if head not in log.at:
            yield (
                "record",
                None,
                f"log head {short(head)} recorded by commit {short(sha)} is no line of the "
                "log: it was truncated or rewritten",
            )


def _backwards(log: Log, records: Sequence[Commit]) -> Iterator[tuple[str, int | None, str]]:
    """harness only appends to a log and records only what changed: a record commit whose
    head is not after the head of every one under it was moved, or given another's."""
    highest: tuple[int, str] | None = None  # the furthest head under it, and its commit
    for sha, trailers in reversed(records):
        index = log.at.get(trailers.get(HEAD, ""))
        if index is None or CALL in trailers:
            continue
        if highest is not None and index <= highest[0]:
            yield (
                "record",
                None,
                f"commit {short(sha)} records log head seq {index}, not after seq "
                f"{highest[0]} that commit {short(highest[1])} under it recorded",
            )
        else:
            highest = index, sha


def _unsigned(
    task_id: str, log: Log, records: Sequence[Commit], key: Ed25519PublicKey
) -> Iterator[tuple[str, int | None, str]]:
    """Each line after the newest head a commit carries a valid signature of (every line,
    when none does): nothing the key made covers it."""
    signed = next(
        (
            (log.at[t[HEAD]], sha)
            for sha, t in records
            if t.get(HEAD) in log.at
            and checkpoint.check(t.get(checkpoint.TRAILER), key, task_id, t[HEAD]) is None
        ),
        None,
    )
    if signed is None:
        start, why = 0, "no commit carries a valid signature by the key"
    else:
        start = signed[0] + 1
        why = (
            f"it comes after log head seq {signed[0]}, the newest the key signed (commit "
            f"{short(signed[1])})"
        )
    for seq in range(start, log.lines):
        yield "signature", seq, f"no signature covers this line: {why}"
