"""Every git operation harness performs: the one chokepoint for git.

Repo is one class in parts: process.py runs git (Git, Spool), history.py reads commits and
trees (History), worktree.py compares and syncs the user's files (WorkTree), trees.py
builds trees away from them (Trees); here the branch is written."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.base import clock
from harness.base.errors import HarnessError, InvalidInput
from harness.repository.history import trailers
from harness.repository.objects import commit_object
from harness.repository.process import (
    LITERAL,
    Spool,
    env_without_git,
    git_dir,
    run_git,
    split,
    stdin_path,
)
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
    """The top of the working tree `start` is in, as git finds it."""
    outside = InvalidInput(f"{start}: not inside a git repository (use --repo DIR)")
    if not start.is_dir():
        raise outside
    code, out, _ = run_git(start, "rev-parse", "--show-toplevel")
    if code != 0:
        code, bare, _ = run_git(start, "rev-parse", "--is-bare-repository")
        if code == 0 and bare.strip() == "true":
            raise InvalidInput(f"{start}: a bare repository has no working tree")
        raise outside
    return Path(out.rstrip("\n"))


def common_dir(root: Path) -> Path:
    """The git directory holding the repository's objects and config (a linked worktree's
    `.git` is a file pointing elsewhere)."""
    return git_dir(root, common=True)


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
        date = f"{int(clock.parse(ts).timestamp())} +0000"
        raw = commit_object(tree, [parent] if parent else [], who, date, message)
        signature = None if self.sign is None else self.sign(raw)
        if signature is not None:
            raw = with_signature(raw, signature)
        with tempfile.TemporaryFile() as held:
            held.write(raw)
            held.seek(0)
            # git checks the object is a well-formed commit before it stores it.
            return self.git("hash-object", "-t", "commit", "-w", "--stdin", stdin=held).strip()

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
        found = self.odb.get(sha)
        if found is None or found.kind != "commit":
            raise HarnessError(f"git: {sha} names no commit")
        return found.data

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
        if tree == self.tree_of(head):
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
    # Only the armor's last line end goes: any other byte is the signature's own.
    folded = signature.strip("\n").replace("\n", "\n ").encode("utf-8", "surrogateescape")
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
    if not signature:
        return unsigned, None
    # Given back byte for byte by a replay (with_signature), whatever bytes a commit that
    # was not harness's carries.
    return unsigned, b"\n".join(signature).decode("utf-8", "surrogateescape")


def holding(root: Path, pack: bytes) -> Repo:
    """A new repository at `root` holding the objects of `pack` (Trees.objects) and nothing
    else: no commit of its own, no ref, no files checked out."""
    _init(root)
    made = Repo(root)
    made.take(pack)
    return made


def create(root: Path, branch: str, message: str, who: tuple[str, str], ts: str) -> None:
    """A new repository whose first commit holds every file under `root` (the demo's)."""
    _init(root, "--initial-branch", branch)
    made = Repo(root)
    made.git("add", "-A")
    tree = made.git("write-tree").strip()
    made.git("update-ref", f"refs/heads/{branch}", made.commit(tree, None, message, who, ts))
    made.close()


def _init(root: Path, *options: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    code, _, err = run_git(root, "init", "-q", *options)
    if code != 0:
        raise HarnessError(f"git init failed: {(err.strip().splitlines() or [''])[-1]}")
