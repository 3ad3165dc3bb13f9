"""Reading a repository's history: commits, their trees and trailers, what changed, the
user's uncommitted changes, and git's bulk listings as Spools."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import IO

from harness.base import files
from harness.base.errors import HarnessError, InvalidInput
from harness.repository import objects
from harness.repository.process import Git, Spool, git_dir

# A HEAD file as git writes it for a branch with a plain name: a component of letters,
# digits, `_`, `-` and inner dots. Anything else (a symlink, reftable's `.invalid`, names git
# may refuse) is git's to read.
_HEAD = re.compile(
    rb"ref: refs/heads/((?:[A-Za-z0-9_-](?:[A-Za-z0-9._-]*[A-Za-z0-9_-])?/)*"
    rb"[A-Za-z0-9_-](?:[A-Za-z0-9._-]*[A-Za-z0-9_-])?)\n"
)


def _plain_branch(head: Path) -> str | None:
    """The branch a HEAD file names, read without a git process (a landing asks twice);
    None when git must say."""
    found = _HEAD.fullmatch(files.read_untrusted(head, 300) or b"")
    if found is None:
        return None
    parts = found.group(1).split(b"/")
    if any(b".." in part or part.endswith(b".lock") for part in parts):
        return None
    return found.group(1).decode("ascii")


_SPECIAL = (objects.LINK, objects.GITLINK)  # what a change may not write through or over


class History(Git):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        # The tree `files` listed last, with its files and special files.
        self._files: tuple[str, frozenset[str], frozenset[str]] | None = None
        self._files_lock = threading.Lock()

    def head(self) -> str:
        found = self.odb.get("HEAD")
        if found is None:
            raise InvalidInput("the repository has no commits yet")
        if found.kind != "commit":
            raise InvalidInput(f"HEAD names a {found.kind}, not a commit")
        return found.oid

    def identity(self) -> str | None:
        """Who the person at this repository is to git ("Name <email>"), as a commit of
        theirs would say; None when git knows no name or email."""
        # As configured, never guessed from the host name: a verdict names a real person.
        code, out, _ = self.try_git("-c", "user.useConfigOnly=true", "var", "GIT_COMMITTER_IDENT")
        who = out.rpartition(">")[0] + ">" if code == 0 and ">" in out else ""
        return who if who and not who.startswith(" ") and not who.endswith("<>") else None

    def branch(self) -> str:
        """The branch HEAD names; InvalidInput when it names none (detached)."""
        plain = _plain_branch(git_dir(self.root) / "HEAD")
        if plain is not None:
            return plain
        code, out, _ = self.try_git("symbolic-ref", "-q", "HEAD")
        ref = out.rstrip("\n")
        if code != 0 or not ref.startswith("refs/heads/"):
            raise InvalidInput("HEAD is detached: check out a branch first")
        return ref[len("refs/heads/") :]

    def blob_hashes(self, commit: str, paths: Sequence[str]) -> dict[str, str | None]:
        """sha256 of each path's content at `commit`; None where the path is not a file."""
        tree = self.tree_of(commit)  # read once, not again for each path
        found: dict[str, str | None] = {}
        for path in paths:
            data = self.read(tree, path)
            found[path] = None if data is None else hashlib.sha256(data).hexdigest()
        return found

    def show(self, commit: str, path: str) -> str | None:
        """A file's text at `commit` (or in a tree), or None when it is not a regular file
        there."""
        data = self.read(commit, path)
        return None if data is None else data.decode("utf-8", "replace")

    def read(self, commit: str, path: str) -> bytes | None:
        """A file's bytes at `commit` (or in a tree), or None when it is not a regular file
        there."""
        entry = self.odb.entry(commit, path)
        if entry is None or not entry.regular:
            return None
        found = self.odb.get(entry.oid)
        return None if found is None else found.data

    def folders(self, commit: str, path: str) -> list[str]:
        """The names of the folders right under `path` at `commit`, sorted; none where
        `path` is no folder there."""
        entry = self.odb.entry(commit, path)
        if entry is None or entry.kind != "tree":
            return []
        found = self.odb.get(entry.oid)
        listing = objects.entries(found.data, len(entry.oid) // 2) if found is not None else ()
        return sorted(os.fsdecode(name) for name, e in listing if e.kind == "tree")

    def line_counts(self, commit: str, paths: Sequence[str]) -> dict[str, int]:
        found = {}
        for path in paths:
            text = self.show(commit, path)
            if text is not None:
                found[path] = len(text.splitlines())
        return found

    def exists(self, commit: str) -> bool:
        """Whether `commit` names a commit the repository holds."""
        return self.try_git("cat-file", "-e", f"{commit}^{{commit}}")[0] == 0

    def is_ancestor(self, older: str, newer: str) -> bool:
        """Whether `older` is `newer` or one of its ancestors (False when either is unknown)."""
        return self.try_git("merge-base", "--is-ancestor", older, newer)[0] == 0

    def message(self, commit: str) -> str:
        """The commit's message; "" when git cannot read it."""
        return self.try_git("log", "-1", "--format=%B", commit)[1]

    def tree_of(self, commit: str) -> str:
        """The id of the commit's tree."""
        tree = self.odb.commit_tree(commit)
        if tree is None:
            raise HarnessError(f"git: {commit} names no commit")
        return tree

    def summary(self, ref: str) -> str:
        """The commits up to `ref`, newest first, one line each: short id and subject."""
        return self.git("log", "--format=%h %s", ref)

    def tree_without(self, commit: str, top: str) -> str:
        """The commit's top-level tree listing without the entry `top`, as a cache key."""
        listing = self.git("ls-tree", "-z", commit).split("\0")
        return "\0".join(e for e in listing if e and e.split("\t", 1)[1] != top)

    def files(self, commit: str) -> tuple[frozenset[str], frozenset[str]]:
        """Every file of `commit`'s tree, and those of them that are symlinks or submodules.

        The first is one listing; each after it is the one before, moved by the files that
        differ between the two trees (a landing's gate asks once per change, and the tree
        moved by the last change)."""
        tree = self.tree_of(commit)
        with self._files_lock:
            last = self._files
        if last is None:
            every, specials = set(), set()
            for entry in filter(None, self.git("ls-tree", "-r", "-z", tree).split("\0")):
                meta, path = entry.split("\t", 1)
                every.add(path)
                if meta.split(" ")[0] in _SPECIAL:
                    specials.add(path)
        elif last[0] == tree:
            return last[1], last[2]
        else:
            every, specials = set(last[1]), set(last[2])
            for path, _, now in self.odb.changes(last[0], tree):
                every.discard(path)
                specials.discard(path)
                if now is not None:
                    every.add(path)
                    if now.mode in _SPECIAL:
                        specials.add(path)
        found = frozenset(every), frozenset(specials)
        with self._files_lock:
            self._files = (tree, *found)
        return found

    def last_task_commit(
        self, task_id: str, head: str = "HEAD"
    ) -> tuple[str, dict[str, str]] | None:
        """The newest commit up to `head` whose Harness-Task trailer is exactly `task_id`
        (a subtask or record commit), with its Harness trailers."""
        found = self.task_commits(task_id, head, 1)
        return found[0] if found else None

    def task_commits(
        self, task_id: str, head: str = "HEAD", most: int | None = None, records: bool = False
    ) -> list[tuple[str, dict[str, str]]]:
        """The commits up to `head` whose Harness-Task trailer is exactly `task_id`, newest
        first (at most `most`; only record commits with `records`), each with its Harness
        trailers."""
        # A task id is letters, digits and . _ -: only the dot needs escaping.
        pattern = f"^Harness-Task: {task_id.replace('.', '[.]')}[[:space:]]*$"
        limit = () if most is None else (f"-{most}",)
        only = ("--all-match", "--grep=^harness: record ") if records else ()
        code, out, _ = self.try_git(
            "log", *limit, "-z", "--format=%H%x00%B", "-E", f"--grep={pattern}", *only, head
        )
        if code != 0:
            return []
        fields = out.split("\0")
        pairs = [
            (sha, trailers(body)) for sha, body in zip(fields[::2], fields[1::2], strict=False)
        ]
        return [(sha, found) for sha, found in pairs if found.get("Harness-Task") == task_id]

    def commits_between(self, old: str, new: str) -> list[tuple[str, dict[str, str]]]:
        """The commits after `old` up to `new`, newest first, each with its Harness trailers."""
        out = self.git("log", "-z", "--format=%H%x00%B", f"{old}..{new}")
        fields = out.split("\0")
        return [
            (sha, trailers(body))
            for sha, body in zip(fields[::2], fields[1::2], strict=False)
            if sha
        ]

    def task_commit_listing(self, stack: ExitStack, task_id: str, head: str) -> Spool:
        """The task's subtask commits (those carrying a Harness-Call-Id) up to `head`, oldest
        first and parents before children, as NUL-separated records: id, then message."""
        return self.spool(
            stack,
            "log",
            "-z",
            "--reverse",
            "--topo-order",
            "--format=%H%x00%B",
            "--all-match",
            "-F",
            "--grep=Harness-Call-Id: ",
            f"--grep=Harness-Task: {task_id}",
            head,
        )

    def commits_touching(self, path: str, head: str = "HEAD") -> list[str]:
        """The commits up to `head` that changed `path`, newest first."""
        code, out, _ = self.try_git("log", "--format=%H", head, "--", path)
        return out.split() if code == 0 else []

    def dirty(self) -> list[str]:
        """Paths with uncommitted changes, staged or not, tracked or not."""
        out = self.git("status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
        return sorted({entry[3:] for entry in out.split("\0") if len(entry) > 3})

    def find_commit(self, trailer: str, value: str, since: str, until: str = "HEAD") -> str | None:
        """The newest commit after `since` (exclusive) up to `until` whose message holds
        `<trailer>: <value>`."""
        out = self.git(
            "log", "--format=%H", "-F", f"--grep={trailer}: {value}", f"{since}..{until}"
        )
        found = out.split()
        return found[0] if found else None

    def changed(self, commit: str) -> list[str]:
        """Paths a commit changed against its first parent (both ends of a rename)."""
        return self.changed_between(f"{commit}^", commit)

    def changed_between(self, old: str, new: str) -> list[str]:
        """Paths that differ between two commits (both ends of a rename)."""
        return [change.path for change in self.odb.changes(old, new)]

    def working_changes(self, stack: ExitStack, commit: str, paths: Sequence[str]) -> Spool:
        """Tracked files under `paths` whose working copy differs from `commit`, as
        NUL-separated names."""
        return self.spool(stack, "diff", "--name-only", "-z", "--no-renames", commit, "--", *paths)

    def untracked(self, stack: ExitStack, paths: Sequence[str]) -> Spool:
        """Files under `paths` git does not track, ignored ones included, NUL-separated."""
        return self.spool(stack, "ls-files", "--others", "-z", "--", *paths)

    def tree_entries(self, stack: ExitStack, tree: str, paths: Sequence[str] = ()) -> Spool:
        """Every file of `tree` under `paths` (all without), as NUL-separated
        `<mode> <type> <object>\\t<path>` records."""
        return self.spool(stack, "ls-tree", "-r", "-z", "--full-tree", tree, "--", *paths)

    def contents(self, stack: ExitStack, requests: IO[bytes], header: str = "") -> Spool:
        """`git cat-file --batch`: for each line of `requests` (an object id, then anything
        `%(rest)` in `header` repeats), a header line (git's `<id> <type> <size>` by default)
        and the object's content followed by a newline."""
        batch = f"--batch={header}" if header else "--batch"
        return self.spool(stack, "cat-file", batch, stdin=requests)


def trailers(message: str) -> dict[str, str]:
    """Harness-* trailers of a commit message."""
    found = {}
    for line in message.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.startswith("Harness-"):
            found[key] = value.strip()
    return found
