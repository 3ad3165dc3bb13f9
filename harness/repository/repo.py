"""Every git operation harness performs: the one chokepoint for git.

Repo is one class in parts: process.py runs git (Git, Spool), history.py reads commits and
trees (History), worktree.py compares and syncs the user's files (WorkTree), trees.py
builds trees away from them (Trees); here the branch is written."""

from __future__ import annotations

import io
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import git
from git.exc import InvalidGitRepositoryError, NoSuchPathError
from gitdb import IStream

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
    "holding",
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


# Gives the armored signature git carries in a commit's gpgsig header for the commit
# object's bytes, or None to leave it unsigned.
CommitSigner = Callable[[bytes], str | None]


class Repo(WorkTree, Trees):
    """One repository, every git command on it; here writing its branch."""

    # Set by a step whose person named a key, and by a replay, which gives back the
    # signatures the recorded commits carry: no other commit is signed.
    sign: CommitSigner | None = None

    def commit(
        self, tree: str, parent: str | None, message: str, who: tuple[str, str], ts: str
    ) -> str:
        """A commit object with fixed identity and a recorded date (signed when `sign`
        says); no ref moves."""
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
        if self.sign is None:
            return str(made.hexsha)
        raw = self.commit_bytes(made.hexsha)
        signature = self.sign(raw)
        if signature is None:
            return str(made.hexsha)
        signed = with_signature(raw, signature)
        stored = self.repo.odb.store(IStream(b"commit", len(signed), io.BytesIO(signed)))
        return bytes(stored.hexsha).decode()

    def recorded_signatures(self, task_id: str) -> dict[bytes, str]:
        """The signature each signed commit of the task on HEAD carries, by the bytes it
        covers (the commit without it)."""
        found = {}
        for sha, _ in self.task_commits(task_id):
            unsigned, signature = without_signature(self.commit_bytes(sha))
            if signature is not None:
                found[unsigned] = signature
        return found

    def commit_bytes(self, sha: str) -> bytes:
        """The commit object's bytes, as git hashes them."""
        data: bytes = self.repo.odb.stream(bytes.fromhex(sha)).read()
        return data

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


def with_signature(raw: bytes, signature: str) -> bytes:
    """The commit object `raw` with `signature` in a gpgsig header after its last header,
    each further line of it indented by one space, as git writes and reads it."""
    headers, _, body = raw.partition(b"\n\n")
    folded = signature.strip().replace("\n", "\n ").encode()
    return headers + b"\ngpgsig " + folded + b"\n\n" + body


def without_signature(raw: bytes) -> tuple[bytes, str | None]:
    """The commit object `raw` without its gpgsig header, and that signature (None when it
    has none): what the signature covers, and the signature."""
    headers, _, body = raw.partition(b"\n\n")
    kept: list[bytes] = []
    signature: list[bytes] = []
    inside = False  # on the gpgsig header's continuation lines
    for line in headers.split(b"\n"):
        if line.startswith(b"gpgsig "):
            inside = True
            signature.append(line[len(b"gpgsig ") :])
        elif inside and line.startswith(b" "):
            signature.append(line[1:])
        else:
            inside = False
            kept.append(line)
    unsigned = b"\n".join(kept) + b"\n\n" + body
    return unsigned, "\n".join(x.decode() for x in signature) if signature else None


def holding(root: Path, pack: bytes) -> Repo:
    """A new repository at `root` holding the objects of `pack` (Trees.objects) and nothing
    else: no commit of its own, no ref, no files checked out."""
    git.Repo.init(root).close()
    made = Repo(root)
    made.take(pack)
    return made


def create(root: Path, branch: str, message: str, who: tuple[str, str], ts: str) -> None:
    """A new repository whose first commit holds every file under `root` (the demo's)."""
    git.Repo.init(root, initial_branch=branch).close()
    made = Repo(root)
    made.git("add", "-A")
    tree = made.git("write-tree").strip()
    made.git("update-ref", f"refs/heads/{branch}", made.commit(tree, None, message, who, ts))
    made.close()
