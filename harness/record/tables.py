"""The two tables protocol.Model keeps for a log of any length, one entry per call and per
subtask done, packed: an audit of 25k subtasks holds 50k entries, and each Python object
an entry is made of costs 28 to 56 bytes more.

Ids as harness makes them (a call id's 64 hex digits, a commit's 40) are kept as their
bytes (`compact`); anything else a log may hold, hostile or not, is kept as it is and
reads back the same.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

_HEX = re.compile(r"[0-9a-f]+")  # lower case only: bytes.hex() gives it back as it was
_CALL, _COMMIT = 32, 20  # bytes of a compact call id and commit id
_SEQ = 48  # bits of a call's seq in its packed entry: no log has 2**48 lines


def compact(value: Any) -> Any:
    """A hex id as harness makes them (a call id's 64 digits, a commit's 40) as its bytes,
    under half the memory of the string; anything else as it is (expand undoes it)."""
    if isinstance(value, str) and len(value) in (40, 64) and _HEX.fullmatch(value):
        return bytes.fromhex(value)
    return value


def expand(value: Any) -> Any:
    """The value `compact` was given (an event's values are JSON, so never bytes)."""
    return value.hex() if isinstance(value, bytes) else value


class Completed:
    """What a subtask's step_completed names, and where it was fed."""

    __slots__ = ("_call", "_commit", "at")

    def __init__(self, call_id: Any, commit: Any, at: int) -> None:
        self._call, self._commit, self.at = compact(call_id), compact(commit), at

    @property
    def call_id(self) -> Any:
        return expand(self._call)

    @property
    def commit(self) -> Any:
        return expand(self._commit)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.call_id, self.commit, self.at))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Completed) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Completed(call_id={self.call_id!r}, commit={self.commit!r}, at={self.at!r})"


class Done(Mapping[str, Completed]):
    """Subtask id -> what its step_completed named. A completion naming a call id and a
    commit as harness makes them is kept as one bytes object (call, commit, seq: 93 bytes);
    any other as a Completed."""

    def __init__(self) -> None:
        self._table: dict[str, bytes | Completed] = {}

    def add(self, step: str, call_id: Any, commit: Any, at: int) -> None:
        call, made = compact(call_id), compact(commit)
        regular = (
            isinstance(call, bytes)
            and len(call) == _CALL
            and isinstance(made, bytes)
            and len(made) == _COMMIT
        )
        # One string for the id however many tables name it: a reader's table of the plan
        # interns its ids too.
        step = sys.intern(step) if type(step) is str else step
        self._table[step] = (
            call + made + at.to_bytes(8, "big") if regular else Completed(call_id, commit, at)
        )

    def __getitem__(self, step: str) -> Completed:
        kept = self._table[step]
        if isinstance(kept, Completed):
            return kept
        end = _CALL + _COMMIT
        return Completed(kept[:_CALL].hex(), kept[_CALL:end].hex(), int.from_bytes(kept[end:]))

    def __contains__(self, step: object) -> bool:
        return step in self._table  # asked of every event: the dict's own test

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


class Calls(MutableMapping[str | bytes, tuple[int, str]]):
    """Call id (compact) -> (seq of its subagent_invoked, its outcome as the log says: "ok",
    a failure's kind, "" while it has none). An entry is one int: the seq, and above it the
    outcome's number in a table of the outcomes seen, a handful in any log harness wrote."""

    def __init__(self) -> None:
        self._table: dict[str | bytes, int] = {}
        self._said: list[str] = [""]
        self._number: dict[str, int] = {"": 0}

    def __getitem__(self, key: str | bytes) -> tuple[int, str]:
        packed = self._table[key]
        return packed & ((1 << _SEQ) - 1), self._said[packed >> _SEQ]

    def __setitem__(self, key: str | bytes, value: tuple[int, str]) -> None:
        seq, said = value
        number = self._number.get(said)
        if number is None:
            number = self._number[said] = len(self._said)
            self._said.append(said)
        self._table[key] = number << _SEQ | seq

    def __delitem__(self, key: str | bytes) -> None:
        del self._table[key]

    def __contains__(self, key: object) -> bool:
        return key in self._table

    def __iter__(self) -> Iterator[str | bytes]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)
