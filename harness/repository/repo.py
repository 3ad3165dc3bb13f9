"""Every git operation harness performs: the one chokepoint for git.

Repo is one class in parts: process.py runs git (Git, Spool), history.py reads commits and
trees (History), worktree.py compares and syncs the user's files (WorkTree), trees.py
builds trees away from them (Trees); here the branch is written."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import git
from git.exc import InvalidGitRepositoryError, NoSuchPathError

from harness.base import clock
from harness.base.errors import HarnessError, InvalidInput
from harness.repository.history import trailers
from harness.repository.process import LITERAL, Spool, env_without_git, split, stdin_path
from harness.repository.trees import Trees
from harness.repository.worktree import WorkTree

# Callers take these from here, the chokepoint.
__all__ = [
    "Repo",
    "Spool",
    "common_dir",
    "create",
    "env_without_git",
    "find_root",
    "split",
    "trailers",
]


def find_root(start: Path) -> Path:
    try:
        repo = git.Repo(start, search_parent_directories=True)
    except (InvalidGitRepositoryError, NoSuchPathError):
        raise InvalidInput(f"{start}: not inside a git repository (use --repo DIR)") from None
    if repo.working_tree_dir is None:
        raise InvalidInput(f"{start}: a bare repository has no working tree")
    return Path(repo.working_tree_dir)


def common_dir(root: Path) -> Path:
    """The git directory holding the repository's objects and config (a linked worktree's
    `.git` is a file pointing elsewhere)."""
    dotgit = root / ".git"
    if dotgit.is_dir() and not dotgit.is_symlink():
        return dotgit
    found = git.Repo(root)
    try:
        return Path(found.common_dir)
    finally:
        found.close()


class Repo(WorkTree, Trees):
    """One repository, every git command on it; here writing its branch."""

    def commit(
        self, tree: str, parent: str | None, message: str, who: tuple[str, str], ts: str
    ) -> str:
        """A commit object with fixed identity and a recorded date; no ref moves."""
        actor = git.Actor(*who)
        date = f"{int(clock.parse(ts).timestamp())} +0000"
        made = git.Commit.create_from_tree(
            self.repo,
            self.repo.tree(tree),
            message,
            parent_commits=[self.repo.commit(parent)] if parent else [],
            head=False,
            author=actor,
            committer=actor,
            author_date=date,
            commit_date=date,
        )
        return str(made.hexsha)

    def advance(self, branch: str, new: str, old: str) -> None:
        """Move the branch from `old` to `new`, refusing if someone else moved it."""
        code, _, err = self.try_git("update-ref", f"refs/heads/{branch}", new, old)
        if code != 0:
            raise HarnessError(f"branch {branch} moved while harness worked: {err.strip()}")

    def record(
        self,
        taken: Mapping[str, bytes],
        dropped: Sequence[str],
        message: str,
        who: tuple[str, str],
        ts: str,
        index: Path,
    ) -> str | None:
        """Commit on top of HEAD these bytes at these paths, after removing whatever HEAD has
        at or under `dropped`, leaving every other path and change alone; the user's index
        follows the commit for exactly those paths. The bytes go to the object store as they
        are given: nothing is read from the working tree, so nothing changed there after they
        were checked can slip in."""
        head = self.head()
        env = {"GIT_INDEX_FILE": str(index), **LITERAL}
        index.unlink(missing_ok=True)
        try:
            self.git("read-tree", head, env=env)
            if dropped:
                self.git("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *dropped, env=env)
            names = sorted(taken)
            infos = []
            for path, blob in zip(names, self.store([taken[p] for p in names]), strict=True):
                infos += ["--cacheinfo", f"100644,{blob},{path}"]
            for start in range(0, len(infos), 2000):
                chunk = infos[start : start + 2000]
                self.git("update-index", "--add", "--replace", *chunk, env=env)
            tree = self.git("write-tree", env=env).strip()
        finally:
            index.unlink(missing_ok=True)
        if tree == self.repo.commit(head).tree.hexsha:
            return None
        self.index_free()
        made = self.commit(tree, head, message, who, ts)
        self.advance(self.branch(), made, head)
        self.git("reset", "-q", made, "--", *sorted({*taken, *dropped}), env=LITERAL)
        return made

    def store(self, blobs: Sequence[bytes]) -> list[str]:
        """Write these bytes to the object store as blobs, exactly as given (no filters), by
        one git process for all of them; their object ids in the same order."""
        if not blobs:
            return []
        with tempfile.TemporaryDirectory(prefix="harness-blobs-") as held:
            names = []
            for number, data in enumerate(blobs):
                name = Path(held, str(number))
                name.write_bytes(data)
                names.append(stdin_path(str(name)))
            with tempfile.TemporaryFile() as listing:
                listing.write(b"".join(names))
                listing.seek(0)
                out = self.git("hash-object", "-w", "--no-filters", "--stdin-paths", stdin=listing)
        return out.split()


def create(root: Path, branch: str, message: str, who: tuple[str, str], ts: str) -> None:
    """A new repository whose first commit holds every file under `root` (the demo's)."""
    git.Repo.init(root, initial_branch=branch).close()
    made = Repo(root)
    made.git("add", "-A")
    tree = made.git("write-tree").strip()
    made.git("update-ref", f"refs/heads/{branch}", made.commit(tree, None, message, who, ts))
    made.close()
