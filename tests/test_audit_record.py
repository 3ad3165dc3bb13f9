"""audit_record's judgement, tried in process on records made as harness makes them and
then changed as someone without the key can change them: the log cut back or added to,
signatures copied from one record commit onto another, commits amended, reordered or added
(each commit above a changed one made again, so its id moves, as git's does). Whatever of
that changes what the log or the commits say is a finding; the record as signed is clean."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness.readers import audit_record
from harness.readers.audit_record import CALL, HEAD, Log
from harness.record import checkpoint
from harness.record.progress import GENESIS

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
SIGNER = checkpoint.Signer(KEY)
SIG = checkpoint.TRAILER
Trailers = dict[str, str]


@dataclass(frozen=True)
class Record:
    """A task's log (each line a label and the commit id it applies, if any) and its commits
    on HEAD, oldest first, as their trailers: a commit's id is made from its parent's and
    its trailers, so changing one moves the id of every commit above it."""

    lines: tuple[tuple[str, str | None], ...]
    commits: tuple[tuple[tuple[str, str], ...], ...] = field(default=())

    def said(self) -> tuple[object, ...]:
        """What the record says: its lines, and its commits in order with all they carry but
        their signatures, which vouch for what is said and say nothing of their own (a record
        commit under every signed one may carry none: signing may start mid-task)."""
        return self.lines, tuple(tuple(kv for kv in c if kv[0] != SIG) for c in self.commits)

    def digests(self) -> list[str]:
        prev, found = GENESIS, []
        for label, names in self.lines:
            prev = hashlib.sha256(f"{prev} {label} {names}".encode()).hexdigest()
            found.append(prev)
        return found

    def ids(self) -> list[str]:
        parent, found = "", []
        for trailers in self.commits:
            parent = hashlib.sha1(f"{parent} {trailers}".encode()).hexdigest()
            found.append(parent)
        return found

    def judged(self, key: bool = True) -> list[tuple[str, int | None, str]]:
        """What audit_record finds, fed as the audit feeds it: the subtask commits in the
        order git lists them, each applied line checked as the pass over the log meets it,
        then the record commits (the newest commit first) against where their heads lie."""
        found: list[tuple[str, int | None, str]] = []

        def add(kind: str, seq: int | None, reason: str) -> None:
            found.append((kind, seq, reason))

        commits = [(sha, dict(t)) for sha, t in zip(self.ids(), self.commits, strict=True)]
        subtasks = [c for c in commits if CALL in c[1]]
        applied = audit_record.Applied(subtasks, lambda _: "is not on HEAD", add)
        prev = GENESIS
        for i, ((label, names), digest) in enumerate(zip(self.lines, self.digests(), strict=True)):
            if names is not None:
                step = label.split()[0]
                wanted = {"Harness-Task": "demo", "Harness-Subtask": step, CALL: step * 4}
                applied.check(i, names, {**wanted, HEAD: prev})
            prev = digest
        for reason in applied.unnamed():
            add("commit", None, reason)
        newest = commits[-1:]
        records = [*newest, *(c for c in reversed(commits[:-1]) if CALL not in c[1])]
        heads = audit_record.heads(records)
        at = {d: i for i, d in enumerate(self.digests()) if d in heads}
        log = Log(len(self.lines), at)
        found += audit_record.judge("demo", log, records, KEY.public_key() if key else None)
        return found


def signed(sessions: list[int]) -> Record:
    """Sessions of harness run with the key, each of `n` subtasks landing (a commit made
    on the log's head, then the line applying it), each ending in a signed record commit."""
    rec = Record(())
    for number, subtasks in enumerate(sessions):
        rec = add_lines(rec, f"s{number} started")
        for sub in range(subtasks):
            name = f"T{number}.{sub}"
            rec = add_lines(rec, f"{name} invoked", f"{name} succeeded")
            trailers = {"Harness-Task": "demo", "Harness-Subtask": name, CALL: name * 4}
            rec = add_commit(rec, {**trailers, HEAD: rec.digests()[-1]})
            rec = replace(rec, lines=(*rec.lines, (f"{name} applied", rec.ids()[-1])))
            rec = add_lines(rec, f"{name} completed")
        head = rec.digests()[-1]
        rec = add_commit(rec, {"Harness-Task": "demo", HEAD: head, **signature(head)})
    return rec


def signature(head: str) -> Trailers:
    return dict([SIGNER.trailer("demo", head).split(": ", 1)])


def add_lines(rec: Record, *labels: str) -> Record:
    return replace(rec, lines=(*rec.lines, *((label, None) for label in labels)))


def add_commit(rec: Record, trailers: Trailers) -> Record:
    return replace(rec, commits=(*rec.commits, tuple(sorted(trailers.items()))))


def with_commit(rec: Record, i: int, trailers: Trailers) -> Record:
    commits = list(rec.commits)
    commits[i] = tuple(sorted(trailers.items()))
    return replace(rec, commits=tuple(commits))


# -- what someone without the key can do -----------------------------------------------------


def truncate(rec: Record, k: int) -> Record:
    return replace(rec, lines=rec.lines[: k % (len(rec.lines) + 1)])


def append(rec: Record, n: int) -> Record:
    """A later run without the key: lines no signature covers."""
    return add_lines(rec, *(f"unsigned {len(rec.lines)}.{j}" for j in range(n)))


def copy_signature(rec: Record, src: int, dst: int) -> Record:
    """Commit `dst` amended to carry commit `src`'s log head and signature (or none)."""
    if not rec.commits:
        return rec
    src, dst = src % len(rec.commits), dst % len(rec.commits)
    taken = {k: v for k, v in rec.commits[src] if k in (HEAD, SIG)}
    kept = {k: v for k, v in rec.commits[dst] if k not in (HEAD, SIG)}
    return with_commit(rec, dst, {**kept, **taken})


def amend(rec: Record, i: int, how: str, j: int) -> Record:
    """Commit `i`'s trailers changed: its signature dropped, its head set to line `j`'s, its
    call id dropped (a subtask commit passed off as a record commit), or given one."""
    if not rec.commits:
        return rec
    i = i % len(rec.commits)
    trailers = dict(rec.commits[i])
    if how == "unsign":
        trailers.pop(SIG, None)
    elif how == "head" and rec.lines:
        trailers[HEAD] = rec.digests()[j % len(rec.lines)]
    elif how == "uncall":
        trailers.pop(CALL, None)
    elif how == "call":
        trailers[CALL] = "f" * 64
    return with_commit(rec, i, trailers)


def reorder(rec: Record, i: int, j: int) -> Record:
    if not rec.commits:
        return rec
    commits = list(rec.commits)
    i, j = i % len(commits), j % len(commits)
    commits[i], commits[j] = commits[j], commits[i]
    return replace(rec, commits=tuple(commits))


def commit_again(rec: Record, i: int) -> Record:
    """A commit added on top carrying the trailers of commit `i`, signature and all."""
    return add_commit(rec, dict(rec.commits[i % len(rec.commits)])) if rec.commits else rec


index = st.integers(0, 40)
CHANGES = st.one_of(
    st.tuples(st.just(truncate), index),
    st.tuples(st.just(append), st.integers(1, 3)),
    st.tuples(st.just(copy_signature), index, index),
    st.tuples(st.just(amend), index, st.sampled_from(["unsign", "head", "uncall", "call"]), index),
    st.tuples(st.just(reorder), index, index),
    st.tuples(st.just(commit_again), index),
)
SESSIONS = st.lists(st.integers(0, 2), min_size=1, max_size=3)


def changed(rec: Record, changes: list[tuple[Any, ...]]) -> Record:
    for change, *args in changes:
        rec = change(rec, *args)
    return rec


@settings(max_examples=300, deadline=None)
@given(sessions=SESSIONS, changes=st.lists(CHANGES, min_size=1, max_size=4))
# The two forgeries that passed `audit --key`: a later unsigned run's record commit given
# the first's head and signature; and that, with the log cut back to the first's head.
@example(sessions=[1, 1], changes=[(append, 3), (copy_signature, 1, 3)])
@example(sessions=[1, 1], changes=[(truncate, 5), (copy_signature, 1, 3)])
# A signature copied onto a record commit that already carries it, a commit swapped with
# itself: what the record says is unchanged, and so is its verdict.
@example(sessions=[2, 1], changes=[(copy_signature, 2, 2), (reorder, 1, 1)])
def test_any_change_to_what_a_signed_record_says_is_a_finding(
    sessions: list[int], changes: list[tuple[Any, ...]]
) -> None:
    original = signed(sessions)
    assert original.judged() == []  # the twin: the record as harness signed it
    forged = changed(original, changes)
    if forged.said() != original.said():
        assert forged.judged()
    elif forged == original:
        assert forged.judged() == []


def test_every_line_after_the_newest_signed_head_is_a_finding() -> None:
    rec = append(signed([1, 1]), 2)
    last_signed = len(rec.lines) - 3
    found = rec.judged()
    assert [(kind, seq) for kind, seq, _ in found] == [
        ("signature", last_signed + 1),
        ("signature", last_signed + 2),
    ]
    assert found[0][2].startswith(
        f"no signature covers this line: it comes after log head seq {last_signed}, the "
        "newest the key signed (commit "
    )


def test_a_subtask_commit_no_line_names_is_a_finding() -> None:
    rec = signed([1])
    cut = replace(rec, lines=rec.lines[:2])  # the commit's line and all after it gone
    cut = copy_signature(cut, 0, 1)  # the record commit given a head still in the log
    reasons = [reason for _, _, reason in cut.judged()]
    assert (
        f"commit {cut.ids()[0][:12]} carries subtask T0.0's trailers, but no line of the log "
        "names it"
    ) in reasons


def test_a_record_commit_under_a_signed_one_left_unsigned_is_a_finding() -> None:
    """Signing may start mid-task; once started it may not stop."""
    rec = signed([0, 0, 0])
    later = amend(rec, 1, "unsign", 0)
    assert later.judged() == [("record", None, f"commit {later.ids()[1][:12]} carries no {SIG}")]
    earlier = amend(rec, 0, "unsign", 0)
    assert earlier.judged() == []  # the first commit unsigned: signing began at the second


def test_a_record_commit_given_the_head_of_the_one_under_it_is_a_finding() -> None:
    """A copy of the signature under it passes the signature's check: the order does not."""
    rec = copy_signature(signed([0, 0]), 0, 1)
    assert (
        "record",
        None,
        f"commit {rec.ids()[1][:12]} records log head seq 0, not after seq 0 that commit "
        f"{rec.ids()[0][:12]} under it recorded",
    ) in rec.judged()


def test_without_a_key_only_what_the_commits_say_of_the_log_is_judged() -> None:
    rec = append(signed([1]), 2)
    assert rec.judged(key=False) == []
    assert amend(rec, 0, "head", 0).judged(key=False) != []
