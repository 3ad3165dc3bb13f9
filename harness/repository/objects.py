"""Reading a repository's objects without a process each: one `git cat-file --batch`,
started at first use and stopped by close(), and git's tree and commit formats read from the
bytes it gives. A revision is resolved when it is asked for, so a ref moved in between is
seen moved."""

from __future__ import annotations

import os
import subprocess
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from harness.base.errors import HarnessError

_KINDS = frozenset({b"blob", b"tree", b"commit", b"tag"})
TREE = "40000"
LINK = "120000"
GITLINK = "160000"  # a submodule's commit


class Found(NamedTuple):
    """An object: its id, its type and its bytes."""

    oid: str
    kind: str
    data: bytes


class Entry(NamedTuple):
    """A tree's entry: its mode as git writes it (100644, 100755, 120000, 40000, 160000) and
    the id of the object it names."""

    mode: str
    oid: str

    @property
    def kind(self) -> str:
        return "tree" if self.mode == TREE else "commit" if self.mode == GITLINK else "blob"

    @property
    def regular(self) -> bool:
        """A file (not a link, a folder or a submodule)."""
        return int(self.mode, 8) & 0o170000 == 0o100000


class Changed(NamedTuple):
    """A file that differs between two trees: its path, and its entry in each (None where
    it has none)."""

    path: str
    old: Entry | None
    new: Entry | None


class Objects:
    """One `git cat-file --batch` for a repository, shared by threads one request at a time."""

    def __init__(self, argv: Sequence[str], root: Path, env: Mapping[str, str]) -> None:
        self._argv = [*argv, "cat-file", "--batch"]
        self._root, self._env = root, env
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def get(self, rev: str) -> Found | None:
        """The object `rev` names, or None when it names none."""
        if not rev or "\n" in rev or "\0" in rev:
            return None
        with self._lock:
            proc = self._started()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(rev.encode("utf-8", "surrogateescape") + b"\n")
                proc.stdin.flush()
                header = proc.stdout.readline()
                parts = header.split()
                # "<rev> missing" or "<rev> ambiguous" (a rev may hold spaces) names nothing.
                if len(parts) != 3 or parts[1] not in _KINDS or not parts[2].isdigit():
                    if not header.endswith((b" missing\n", b" ambiguous\n")):
                        raise HarnessError(f"git cat-file answered {header[:80]!r}")
                    return None
                size = int(parts[2])
                data = proc.stdout.read(size)
                if len(data) != size or proc.stdout.read(1) != b"\n":
                    raise HarnessError("git cat-file stopped in the middle of an object")
            except (OSError, ValueError) as exc:
                self.close()
                raise HarnessError(f"git cat-file failed: {exc}") from None
            except HarnessError:
                # Out of step with git's answers: the next request starts a new process.
                self.close()
                raise
        return Found(parts[0].decode(), parts[1].decode(), data)

    def commit_tree(self, rev: str) -> str | None:
        """The id of the tree of the commit (or the tree) `rev` names; None when it names
        neither."""
        found = self.get(rev)
        if found is None or found.kind not in ("commit", "tree"):
            return None
        return found.oid if found.kind == "tree" else tree_line(found.data)

    def entry(self, rev: str, path: str) -> Entry | None:
        """The entry at `path` (slash-separated) in the tree of the commit or tree `rev`;
        None where there is none. A `rev` naming neither is an error, never an empty tree:
        a sync would take every path for deleted."""
        tree = self._tree(rev)
        parts = path.split("/")
        if "" in parts:
            return None
        found = Entry(TREE, tree)
        for part in parts:
            if found.mode != TREE:
                return None
            named = self._listing(found.oid).get(os.fsencode(part))
            if named is None:
                return None
            found = named
        return found

    def changes(self, old: str, new: str) -> list[Changed]:
        """The files that differ between the trees of the commits (or trees) `old` and
        `new`, as `git diff-tree -r --no-renames` lists them: a submodule is one file, and
        a file that became a folder is that file gone and each file of the folder new.
        Only the trees that differ are read, so the cost is the change's. By path."""
        found: list[Changed] = []
        todo: list[tuple[str | None, str | None, bytes]] = [(self._tree(old), self._tree(new), b"")]
        while todo:  # not recursion: a hostile tree may nest deeper than Python's stack
            left_id, right_id, prefix = todo.pop()
            if left_id == right_id:
                continue
            left, right = self._listing(left_id), self._listing(right_id)
            for name in left.keys() | right.keys():
                was, now = left.get(name), right.get(name)
                if was == now:
                    continue
                path = prefix + name
                below = (
                    was.oid if was is not None and was.mode == TREE else None,
                    now.oid if now is not None and now.mode == TREE else None,
                )
                if below != (None, None):
                    todo.append((*below, path + b"/"))
                if below[0] is not None:
                    was = None
                if below[1] is not None:
                    now = None
                if was is not None or now is not None:
                    found.append(Changed(path.decode("utf-8", "surrogateescape"), was, now))
        return sorted(found, key=lambda change: change.path)

    def _tree(self, rev: str) -> str:
        tree = self.commit_tree(rev)
        if tree is None:
            raise HarnessError(f"git: {rev[:80]!r} names no commit or tree")
        return tree

    def _listing(self, tree: str | None) -> dict[bytes, Entry]:
        """A tree's entries by name; none for no tree."""
        if tree is None:
            return {}
        found = self.get(tree)
        if found is None or found.kind != "tree":
            raise HarnessError(f"git tree {tree} is missing")
        return dict(entries(found.data, len(tree) // 2))

    def close(self) -> None:
        _stop(self._proc)
        self._proc = None

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                self._argv,
                cwd=self._root,
                env={**os.environ, **self._env},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            # An Objects nobody closed stops its process when it goes, not at exit.
            weakref.finalize(self, _stop, self._proc)
        return self._proc


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None:
        return
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def entries(data: bytes, oid_size: int) -> Iterator[tuple[bytes, Entry]]:
    """A tree object's entries, (name, Entry), in the order git stores them: each is
    `<mode> <name>\\0` and the object id's `oid_size` bytes."""
    at = 0
    try:
        while at < len(data):
            space = data.index(b" ", at)
            end = data.index(b"\0", space)
            oid = data[end + 1 : end + 1 + oid_size]
            if len(oid) != oid_size:
                raise ValueError("an object id cut short")
            yield data[space + 1 : end], Entry(f"{int(data[at:space], 8):o}", oid.hex())
            at = end + 1 + oid_size
    except ValueError as exc:
        raise HarnessError(f"a git tree object is malformed: {exc}") from None


def tree_line(commit: bytes) -> str:
    """The tree id a commit object's first line names."""
    first = commit.partition(b"\n")[0]
    if not first.startswith(b"tree "):
        raise HarnessError("a git commit object does not start with its tree")
    return first[len(b"tree ") :].decode("ascii", "replace")


def commit_object(
    tree: str, parents: Sequence[str], who: tuple[str, str], date: str, message: str
) -> bytes:
    """The bytes of a commit object by `who` (author and committer) at `date` ("<seconds>
    +0000"), the message as given: as git hashes it, and byte for byte as GitPython wrote it
    before harness wrote its own."""
    for value in who:
        # Either would move the header's boundaries: another line, or another email.
        if any(char in value for char in "<>\n"):
            raise HarnessError(f"a commit identity may not hold '<', '>' or a line end: {value!r}")
    name, email = who
    head = [f"tree {tree}", *(f"parent {p}" for p in parents)]
    head += [f"author {name} <{email}> {date}", f"committer {name} <{email}> {date}"]
    return ("\n".join(head) + "\n\n" + message).encode()
