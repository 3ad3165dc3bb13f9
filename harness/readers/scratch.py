"""The scratch clone a replay runs in, seeded with the recorded exchanges, and the inputs
(plan, config, registry, tokens) each recorded line was written with."""

from __future__ import annotations

import bisect
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from harness.base import files, folders
from harness.base.errors import InvalidInput
from harness.repository import repo
from harness.repository.layout import Layout

Event = dict[str, Any]


class Inputs:
    """The plan, config, registry and tokens each recorded line was written with.

    Every command that logs ends in a record commit holding the very bytes it parsed of
    them, and naming its last line (Harness-Log-Head). So line i was written with the inputs
    of the oldest record commit naming line i or a later one; lines past the last record
    commit (a command killed before it recorded) with the files as they are now. A person's
    edit to the plan between epochs, or a token revoked since, replays as it happened.
    """

    def __init__(
        self, layout: Layout, source: repo.Repo, task_id: str, recorded: list[Event], last: str
    ) -> None:
        self.task_id, self.recorded = task_id, recorded
        self.paths = [layout.rel(p) for p in (layout.plan(task_id), layout.config, layout.registry)]
        self.tokens = layout.rel(layout.tokens)
        lines = {d: i for i, d in enumerate([*(e["prev"] for e in recorded[1:]), last])}
        self.commits: list[tuple[int, str]] = []
        for sha, found in source.task_commits(task_id, source.head(), records=True):
            at = lines.get(found.get("Harness-Log-Head", ""))
            if at is not None:
                self.commits.append((at, sha))
        self.commits.sort()
        self.now = {
            rel: files.read_regular(layout.root / rel, rel, layout.root) for rel in self.all
        }

    @property
    def all(self) -> list[str]:
        return [*self.paths, self.tokens]

    def source(self, seq: int) -> tuple[str | None, int | None]:
        """The record commit whose inputs line `seq` was written with (None: today's files)
        and how many lines the log held when that commit was made (None: all)."""
        at = bisect.bisect_left(self.commits, (seq, ""))
        if at == len(self.commits):
            return None, None
        line, sha = self.commits[at]
        return sha, line + 1

    def seed(self, scratch: Layout, sha: str | None, seq: int) -> None:
        """Write the inputs of `sha` into the scratch clone, with the one-shot spends of calls
        the replay has not applied yet undone (it spends them again as it applies them)."""
        applied = {
            str(e["details"].get("call_id"))
            for e in self.recorded[:seq]
            if e["event"] == "subagent_diffs_applied"
        }
        git = repo.Repo(scratch.root)  # a clone sharing the source's objects
        try:
            found = {rel: self.now[rel] if sha is None else git.read(sha, rel) for rel in self.all}
        finally:
            git.close()
        for rel, data in found.items():
            target = scratch.root / rel
            if data is None:
                target.unlink(missing_ok=True)
                continue
            if rel == self.tokens:
                data = _unspent(data, self.task_id, applied)
            # Replaces whatever the base commit has there (a symlink too), never through it.
            files.atomic_write(target, data)


def _unspent(data: bytes, task_id: str, applied: set[str]) -> bytes:
    """The token store with this task's spends undone but those of calls in `applied`."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data  # refused with its own line when the task loads it
    tokens = doc.get("tokens") if isinstance(doc, dict) else None
    for token in tokens if isinstance(tokens, list) else []:
        spent = token.get("spent") if isinstance(token, dict) else None
        if not isinstance(spent, dict) or spent.get("task_id") != task_id:
            continue
        if spent.get("call_id") not in applied:
            del token["spent"]
    return files.pretty(doc)


@contextmanager
def scratch_clone(source: Path, base: str) -> Iterator[Path]:
    """A throw-away clone sharing the source's objects, on a branch at `base`."""
    top = Path(tempfile.mkdtemp(prefix="harness-replay-"))
    root = top / "repo"
    try:
        git = repo.Repo(source)
        try:
            git.clone_shared(root)
        finally:
            git.close()
        scratch = repo.Repo(root)
        try:
            scratch.checkout_new_branch("harness-replay", base)
        finally:
            scratch.close()
        yield root
    finally:
        folders.remove(top)


def seed_exchanges(source: Layout, scratch: Layout, task_id: str) -> None:
    """Every recorded exchange, and no log or checklist: the replay writes its own. Only
    regular files are copied, each reached without following a symlink: anything else in
    the record (a link out of the repository, say) stops the replay."""
    folders.remove(scratch.exchanges(task_id))
    for rel, found in files.walk(source.root, source.rel(source.exchanges(task_id))):
        if isinstance(found, str):
            raise InvalidInput(f"{rel}: {found}: a record holds only regular files")
        target = scratch.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(found)
    log = scratch.log(task_id)
    log.unlink(missing_ok=True)
    scratch.checklist(task_id).unlink(missing_ok=True)
