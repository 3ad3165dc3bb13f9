"""The body of a patch: its hunks held to the line counts their headers state, and the whole
cross-checked by a second, independent parser."""

from __future__ import annotations

import re

from unidiff.patch import PatchSet

HUNK = re.compile(r"@@ -\d{1,9}(?:,(\d{1,9}))? \+\d{1,9}(?:,(\d{1,9}))? @@(?: .*)?")


class Malformed(ValueError):
    """A patch body that does not hold to its hunk headers, or that the second parser reads
    differently."""


def count_hunks(body: list[str]) -> int:
    """Count hunks, holding every line to the counts its hunk header states."""
    at, hunks = 0, 0
    while at < len(body):
        top = HUNK.fullmatch(body[at])
        if top is None:
            raise Malformed(_stray(body, at))
        old, new = int(top[1] or 1), int(top[2] or 1)
        if old == new == 0:
            raise Malformed("empty hunk")
        at += 1
        while old > 0 or new > 0:
            if at == len(body):
                raise Malformed("hunk count mismatch (truncated hunk)")
            tag = body[at][:1]
            old -= tag in ("", " ", "-")
            new -= tag in ("", " ", "+")
            if tag not in ("", " ", "-", "+", "\\"):
                raise Malformed("garbage in hunk")
            if old < 0 or new < 0:
                raise Malformed("hunk count mismatch")
            at += 1
        while at < len(body) and body[at].startswith("\\"):
            at += 1
        hunks += 1
    return hunks


def _stray(body: list[str], at: int) -> str:
    line, after = body[at], body[at + 1] if at + 1 < len(body) else ""
    if line.startswith("@@"):
        return "bad hunk header"
    if line.startswith("diff ") or (line.startswith("--- ") and after.startswith("+++ ")):
        return "more than one file in entry"
    if line[:1] in ("", " ", "-", "+"):
        return "hunk count mismatch (hunk longer than its header)"
    return "garbage after hunk"


def cross_check(patch: str, hunks: int) -> None:
    # A second, independent parser: both must see one file with the same hunks.
    try:
        parsed = PatchSet.from_string(patch)
    except Exception:  # any parser failure means the patch is not plainly well-formed
        raise Malformed("malformed patch") from None
    if len(parsed) != 1:
        raise Malformed("more than one file in entry")
    if parsed[0].is_binary_file or len(parsed[0]) != hunks:
        raise Malformed("malformed patch")
