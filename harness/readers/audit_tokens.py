"""The audit of the write tokens a task's log names: each existed (in the store, or as the
store last held it on HEAD's history), covered its subtask and had not expired when used,
and a one-shot token was applied once, by the call and commit its spent mark names."""

from __future__ import annotations

from typing import Any

from harness.base.errors import InvalidInput
from harness.readers.findings import Findings
from harness.record import tokens
from harness.record.protocol import short
from harness.repository import repo
from harness.repository.layout import Layout

Event = dict[str, Any]


class TokenAudit:
    def __init__(self, layout: Layout, task_id: str, git: repo.Repo, found: Findings) -> None:
        self.layout, self.task_id, self.git, self.add = layout, task_id, git, found.add
        self.tokens: dict[str, tokens.Token] | None = None
        self.past_tokens: dict[str, tokens.Token] | None = None  # read on a first miss
        self.covered: dict[tuple[str, tuple[str, ...]], bool] = {}
        self.shots: dict[str, tuple[int, str, str]] = {}  # one-shot token: seq, call, commit

    def read(self) -> None:
        try:
            known = tokens.load(self.layout.tokens, self.layout.root)
        except InvalidInput as exc:
            self.add("token", None, str(exc))
            return
        self.tokens = {t.id: t for t in known}

    def use(
        self, i: int, ev: Event, globs: tuple[str, ...] | None, token_id: object, what: str
    ) -> None:
        """The token existed, covered the subtask and had not expired when it was used."""
        if self.tokens is None:
            return  # the token file is unreadable, which is a finding already
        token = self.known(token_id) if isinstance(token_id, str) else None
        if token is None:
            self.add(
                "token", i, f"token {token_id} is not in ai/agents/write_tokens.json or its history"
            )
            return
        # Both are schema-checked timestamps of one fixed width, so text order is time order.
        if ev["ts"][:19] >= token.expires[:19]:
            self.add(
                "token",
                i,
                f"token {token.id} {what} at {ev['ts']}, after it expired at {token.expires}",
            )
        if globs is None:
            return
        key = (token.id, globs)
        if key not in self.covered:
            self.covered[key] = token.covers(globs)
        if not self.covered[key]:
            self.add("token", i, f"token {token.id} does not cover {', '.join(globs)}")

    def spend(self, i: int, token: str, call: object, commit: object) -> None:
        """A one-shot token is applied once; the call and commit that did are kept for its
        spent mark (check_spent)."""
        found = (self.tokens or {}).get(token)
        if found is not None and found.one_shot:
            first = self.shots.get(token)
            if first is not None:
                self.add(
                    "token", i, f"one-shot token {token} applied again (first at seq {first[0]})"
                )
            else:
                self.shots[token] = (i, str(call), str(commit))

    def known(self, token_id: str) -> tokens.Token | None:
        """The token as the store holds it; else as the store last held it on HEAD's history:
        a token removed after its use was what the use was judged by, as replay reads it."""
        found = (self.tokens or {}).get(token_id)
        if found is None:
            if self.past_tokens is None:
                self.past_tokens = self.read_past()
            found = self.past_tokens.get(token_id)
        return found

    def read_past(self) -> dict[str, tokens.Token]:
        path = self.layout.tokens
        rel = self.layout.rel(path)
        past: dict[str, tokens.Token] = {}
        for sha in self.git.commits_touching(rel):  # newest first: the latest form wins
            data = self.git.read(sha, rel)
            try:
                known = [] if data is None else tokens.load(path, self.layout.root, data)
            except InvalidInput:
                continue  # a version harness would have refused could not have been used
            for token in known:
                past.setdefault(token.id, token)
        return past

    def check_spent(self) -> None:
        """A one-shot token's spent mark names the call and commit that applied it here."""
        for token in sorted((self.tokens or {}).values(), key=lambda t: t.id):
            mark, used = token.spent, self.shots.get(token.id)
            if not token.one_shot or mark is None:
                continue
            if mark["task_id"] != self.task_id:
                if used is not None:
                    self.add(
                        "token",
                        used[0],
                        f"one-shot token {token.id} is marked spent by task {mark['task_id']}",
                    )
            elif used is None:
                self.add(
                    "token",
                    None,
                    f"one-shot token {token.id} is marked spent by call "
                    f"{short(mark['call_id'])}, which this log never applied",
                )
            elif (mark["call_id"], mark["commit"]) != used[1:]:
                self.add(
                    "token",
                    used[0],
                    f"one-shot token {token.id} is marked spent by commit "
                    f"{short(mark['commit'])}, not {short(used[2])}",
                )
