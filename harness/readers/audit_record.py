"""What a task's commits on HEAD must say of its log, and with a key what its signatures
cover: judged from what the audit's one pass over the log and git's listing found, with no
file and no git of its own, so the rule can be tried on any record in process.

The log's hash chain makes a signed head cover every line up to it, and each line names the
subtask commit it applied by its id, which covers that commit's tree and message. So a key
proves the whole record when the newest signed head is the last line, every harness commit
on HEAD is named by the log (a record commit by its head, a subtask commit by the line that
applied it), and the heads move forward as the commits do.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.record import checkpoint
from harness.record.protocol import short

if TYPE_CHECKING:  # the `sign` extra's key type, imported by `audit --key` alone
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

Commit = tuple[str, Mapping[str, str]]  # a commit's id and its Harness trailers
HEAD = "Harness-Log-Head"
CALL = "Harness-Call-Id"  # what a subtask commit carries and a record commit does not


@dataclass(frozen=True)
class Found:
    kind: str
    seq: int | None
    reason: str


@dataclass(frozen=True)
class Log:
    """What the pass over the log found: how many lines it has, the index of each head the
    commits record that is one of its lines, and the commits its lines applied."""

    lines: int
    at: Mapping[str, int]
    named: Collection[str]


def heads(commits: Sequence[Commit]) -> set[str]:
    """The log heads the pass over the log must place."""
    return {t[HEAD] for _, t in commits if HEAD in t}


def judge(
    task_id: str, log: Log, commits: Sequence[Commit], key: Ed25519PublicKey | None
) -> Iterator[Found]:
    """Every finding about the task's commits on HEAD (`commits`, newest first) against the
    log, and with `key` about what its signatures cover; one at a time, as a line unsigned
    is a finding each and a log may hold millions."""
    yield from _unplaced(log, commits)
    yield from _backwards(log, commits)
    yield from _unnamed(log, commits)
    if key is not None and commits:
        for why in checkpoint.audit(list(reversed(commits)), commits[0][0], key, task_id):
            yield Found("record", None, why)
        yield from _unsigned(task_id, log, commits, key)


def _unplaced(log: Log, commits: Sequence[Commit]) -> list[Found]:
    """A record commit's head (and the newest commit's) must be a line of the log: a log cut
    back is caught even after later commits. A subtask commit's head is held to the line
    that applied it (audit_commits)."""
    held = [c for i, c in enumerate(commits) if i == 0 or CALL not in c[1]]
    by_head: dict[str, str] = {}
    for sha, trailers in reversed(held):  # the newest commit naming a head is the one named
        if HEAD in trailers:
            by_head[trailers[HEAD]] = sha
    return [
        Found(
            "record",
            None,
            f"log head {short(head)} recorded by commit {short(sha)} is no line of the log: "
            "it was truncated or rewritten",
        )
        for head, sha in sorted(by_head.items())
        if head not in log.at
    ]


def _backwards(log: Log, commits: Sequence[Commit]) -> list[Found]:
    """harness only appends to a log and commits on top of the branch: a commit whose head
    lies before the head of a commit under it was moved, or given another's trailers."""
    found, highest = [], None  # (index, commit) of the furthest head seen, oldest first
    for sha, trailers in reversed(commits):
        index = log.at.get(trailers.get(HEAD, ""))
        if index is None:
            continue
        if highest is not None and index < highest[0]:
            found.append(
                Found(
                    "record",
                    None,
                    f"commit {short(sha)} records log head seq {index}, before seq "
                    f"{highest[0]} that commit {short(highest[1])} under it recorded",
                )
            )
        else:
            highest = index, sha
    return found


def _unnamed(log: Log, commits: Sequence[Commit]) -> list[Found]:
    """Every subtask commit of the task on HEAD is one a line of the log applied."""
    return [
        Found(
            "commit",
            None,
            f"commit {short(sha)} carries subtask {trailers.get('Harness-Subtask', '?')}'s "
            "trailers, but no line of the log names it",
        )
        for sha, trailers in commits
        if CALL in trailers and sha not in log.named
    ]


def _unsigned(
    task_id: str, log: Log, commits: Sequence[Commit], key: Ed25519PublicKey
) -> Iterator[Found]:
    """Each line after the newest head a commit carries a valid signature of (every line,
    when none does): nothing the key made covers it."""
    signed = next(
        (
            (log.at[t[HEAD]], sha)
            for sha, t in commits
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
        yield Found("signature", seq, f"no signature covers this line: {why}")
