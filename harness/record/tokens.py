"""ai/agents/write_tokens.json: scoped, expiring permissions to change files."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from harness.base import clock, files, schemas, scope
from harness.base.errors import Halted, InvalidInput
from harness.record.ledger import Ledger

DEFAULT: dict[str, object] = {"tokens": []}
_TTL = re.compile(r"^(\d+)([smhd])$")
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


@dataclass(frozen=True)
class Token:
    id: str
    paths: tuple[str, ...]
    expires: str
    one_shot: bool
    revoked: bool
    spent: dict[str, str] | None

    def usable_at(self, ts: str) -> str | None:
        """None when the token may be used at `ts`, else why not."""
        if self.revoked:
            return f"token {self.id} is revoked"
        if self.one_shot and self.spent is not None:
            return f"one-shot token {self.id} was spent by {self.spent['commit'][:12]}"
        if clock.parse(ts) >= clock.parse(self.expires):
            return f"token {self.id} expired at {self.expires}"
        return None

    def row(self, ts: str) -> dict[str, object]:
        """The token as `harness tokens list --json` shows it, with whether it is usable at
        `ts` and why not."""
        why = self.usable_at(ts)
        return {
            "id": self.id,
            "paths": list(self.paths),
            "expires": self.expires,
            "one_shot": self.one_shot,
            "revoked": self.revoked,
            "spent": self.spent,
            "usable": why is None,
            "why": why,
        }

    def covers(self, globs: Sequence[str]) -> bool:
        return all(any(scope.covers(p, g) for p in self.paths) for g in globs)


def load(path: Path, root: Path, raw: bytes | None = None) -> list[Token]:
    """The tokens in `path` (or in `raw`, its bytes as already read); none without a file."""
    tokens = [_token(t) for t in _raw(path, root, raw)["tokens"]]
    ids = [t.id for t in tokens]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup is not None:
        raise InvalidInput(f"ai/agents/write_tokens.json: duplicate token id {dup!r}")
    return tokens


def _token(t: dict[str, Any]) -> Token:
    if not clock.readable(t["expires"]):
        raise InvalidInput(
            f"ai/agents/write_tokens.json: token {t['id']}: expires {t['expires']} is no instant"
        )
    return Token(
        id=t["id"],
        paths=tuple(t["paths"]),
        expires=t["expires"],
        one_shot=t["one_shot"],
        revoked=t.get("revoked", False),
        spent=t.get("spent"),
    )


def select(
    tokens: list[Token], named: str | None, globs: Sequence[str], ts: str
) -> tuple[Token | None, str | None]:
    """The subtask's named token, else the first usable one covering `globs` (its
    write_scope and creates, which may repeat a glob); with why not."""
    globs = list(dict.fromkeys(globs))
    if named is not None:
        token = next((t for t in tokens if t.id == named), None)
        if token is None:
            return None, f"token {named} does not exist"
        if not token.covers(globs):
            return None, f"token {named} does not cover {', '.join(globs)}"
        return token, token.usable_at(ts)
    for token in tokens:
        if token.usable_at(ts) is None and token.covers(globs):
            return token, None
    paths = " ".join(shlex.quote(g) for g in globs)
    return None, (
        f"no usable token covers {', '.join(globs)} "
        f"(issue one: harness tokens issue --paths {paths} --ttl 2h)"
    )


def _save(
    path: Path, data: dict[str, Any], write: Callable[[Path, bytes], None] = files.atomic_write
) -> None:
    schemas.validate("write-tokens", data, "ai/agents/write_tokens.json")
    write(path, files.pretty(data))


def _raw(path: Path, root: Path, raw: bytes | None = None) -> dict[str, Any]:
    if raw is None:
        raw = files.read_regular(path, "ai/agents/write_tokens.json", root)
    if raw is None:
        return {"tokens": []}
    data: dict[str, Any] = files.load_json(path, "write-tokens", root, raw)
    return data


def issue(path: Path, root: Path, paths: list[str], ttl: str, one_shot: bool, now: str) -> str:
    match = _TTL.match(ttl)
    if not match:
        raise InvalidInput(f"--ttl {ttl!r}: expected a number and a unit s, m, h or d (e.g. 2h)")
    try:
        delta = timedelta(**{_UNIT[match.group(2)]: int(match.group(1))})
        expires = (clock.parse(now) + delta).strftime(clock.FORMAT)
    except OverflowError:
        raise InvalidInput(f"--ttl {ttl!r}: it would expire after the year 9999") from None
    data = _raw(path, root)
    taken = {t["id"] for t in data["tokens"]}
    token_id = next(f"W{n}" for n in range(1, len(taken) + 2) if f"W{n}" not in taken)
    entry = {"id": token_id, "paths": paths, "expires": expires, "one_shot": one_shot}
    data["tokens"].append(entry)
    _save(path, data)
    return token_id


def revoke(path: Path, root: Path, token_id: str) -> None:
    data = _raw(path, root)
    entry = next((t for t in data["tokens"] if t["id"] == token_id), None)
    if entry is None:
        raise InvalidInput(f"no token {token_id!r}")
    entry["revoked"] = True
    _save(path, data)


def spend(
    ledger: Ledger, path: Path, root: Path, token_id: str, task_id: str, call_id: str, commit: str
) -> None:
    """Mark a one-shot token used; idempotent for the same commit, refused for another."""
    data = _raw(path, root, ledger.read(path))
    entry = next((t for t in data["tokens"] if t["id"] == token_id), None)
    if entry is None or not entry["one_shot"]:
        return
    mark = {"task_id": task_id, "call_id": call_id, "commit": commit}
    if entry.get("spent") == mark:
        return
    if "spent" in entry:
        raise Halted(f"one-shot token {token_id} was already spent")
    entry["spent"] = mark
    _save(path, data, ledger.write)
