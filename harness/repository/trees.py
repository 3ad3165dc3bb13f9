"""Trees away from the user's files: a tree exported byte for byte, patches applied on a
private index, a scratch copy, a shared clone."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from harness.base import folders
from harness.base.errors import Halted, HarnessError
from harness.repository.history import History
from harness.repository.objects import GITLINK, LINK, Changed
from harness.repository.process import split

# Blobs a copy takes through the shared object reader, one request each, rather than a
# process of its own (a few milliseconds, as long as ~50 requests).
_FEW = 50


class Trees(History):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        # Private index -> the tree it holds, and its file's signature when written.
        self._indexes: dict[Path, tuple[str, tuple[int, ...]]] = {}
        self._indexes_lock = threading.Lock()

    def export(
        self,
        tree: str,
        dest: Path,
        keep: Callable[[str], bool] = lambda _: True,
        since: str | None = None,
    ) -> None:
        """Write the files of `tree` that `keep` accepts under `dest`, byte for byte from the
        object store: no filters, no checkout, no `.git`; a copy shares nothing with the
        repository. Submodules become empty folders.

        With `since`, `dest` holds that tree's export (by the same `keep`): only the paths
        that differ are removed and written again, so the cost is the change's, not the
        tree's."""
        with ExitStack() as stack:
            if since is None:
                found = _listed(split(self.tree_entries(stack, tree).result()))
            else:
                found = _changed(self.odb.changes(since, tree), dest)
            entries = []
            for mode, sha, name in found:
                if not _plain_path(name):
                    raise Halted(f"commit {tree[:12]} holds a path git itself refuses: {name!r}")
                if keep(name):
                    entries.append((mode, sha, name))
            blobs = self._blobs(stack, [sha for mode, sha, _ in entries if mode != GITLINK])
            dest.mkdir(parents=True, exist_ok=True)
            links = []
            for mode, _, name in entries:
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                if mode == GITLINK:
                    target.mkdir(exist_ok=True)
                    continue
                data = next(blobs)
                if mode == LINK:
                    links.append((target, os.fsdecode(data)))
                else:
                    target.write_bytes(data)
                    if mode == "100755":
                        target.chmod(0o755)
            # Links last: no file is ever written through one.
            for target, points_to in links:
                target.symlink_to(points_to)

    def _blobs(self, stack: ExitStack, shas: list[str]) -> Iterator[bytes]:
        """The blobs' contents in order: a few through the repository's object reader, more
        through a `git cat-file --batch` of their own, which streams them."""
        if len(shas) <= _FEW:
            for sha in shas:
                found = self.odb.get(sha)
                if found is None or found.kind != "blob":
                    raise HarnessError(f"git blob {sha} is missing")
                yield found.data
            return
        wanted = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 -- the stack closes it
        wanted.write(b"".join(f"{sha}\n".encode() for sha in shas))
        wanted.seek(0)
        blobs = self.contents(stack, wanted).result()
        for sha in shas:
            header = blobs.readline().split()
            if len(header) != 3 or header[1] != b"blob":
                raise HarnessError(f"git blob {sha} is missing")
            yield blobs.read(int(header[2]))
            blobs.read(1)

    def apply_tree(
        self, head: str, patches: Sequence[tuple[str, Path]], index: Path
    ) -> tuple[str | None, str]:
        """The tree of `head` with the (name, patch) pairs applied in order, computed on a
        private index without touching any files; (tree, "") or (None, which patch git
        refused and why).

        The index is kept holding the tree made: the next change, made on that tree (the
        commit of this one), is applied to it as it is, without reading the tree again."""
        env = {"GIT_INDEX_FILE": str(index)}
        base = self.tree_of(head)
        made = None
        with self._indexes_lock:
            held = self._indexes.pop(index, None)
        try:
            # Only an index this process wrote and no one has touched since: anything else
            # (a killed run's, one moved or rewritten) is made again from the tree.
            if held is None or held != (base, _signature(index)):
                index.unlink(missing_ok=True)
                self.git("read-tree", base, env=env)
            for name, patch in patches:
                # One apply, no `--check` first: git checks the whole patch before it writes
                # the index and says the same when it refuses.
                code, _, err = self.try_git(
                    "apply",
                    "--cached",
                    # Whitespace is the repository's business (its linters), not the
                    # gate's: a fixture may need a trailing blank.
                    "--whitespace=nowarn",
                    str(patch),
                    env=env,
                )
                if code != 0:
                    # git names the staging patch by its path on this machine: the
                    # record names the change instead, the same in any folder.
                    said = err.replace(str(patch), name)
                    why = (said.strip().splitlines() or [f"exit {code}"])[0]
                    return None, f"git apply refused {name}: {why}"
            made = self.git("write-tree", env=env).strip()
            return made, ""
        finally:
            signature = None if made is None else _signature(index)
            if made is None or signature is None:
                index.unlink(missing_ok=True)
            else:
                with self._indexes_lock:
                    self._indexes[index] = (made, signature)

    @contextmanager
    def scratch(self, tree: str, where: Path, git_dir: bool = False) -> Iterator[Path]:
        """A copy of `tree` at `where`, with a `.git` of its own holding one commit of it if
        asked; removed afterwards whatever happens."""
        folders.remove(where)
        self.export(tree, where)
        if git_dir:
            own = {
                "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_AUTHOR_DATE": "1970-01-01T00:00:00Z",
                "GIT_COMMITTER_DATE": "1970-01-01T00:00:00Z",
            }
            who = ("-c", "user.name=harness", "-c", "user.email=harness@localhost")
            self.git("init", "-q", "-b", "scratch", cwd=where, env=own)
            self.git("add", "-A", cwd=where, env=own)
            self.git(*who, "commit", "-q", "--allow-empty", "-m", "scratch", cwd=where, env=own)
        try:
            yield where
        finally:
            folders.remove(where)

    def objects(self, revs: Sequence[str]) -> bytes:
        """A pack of `revs` (commits or trees) and every tree and blob they hold, without
        their history: what another repository needs to read them (repo.holding). Nothing
        is written here, not even a ref."""
        with ExitStack() as stack:
            listing = self.spool(stack, "rev-list", "--objects", "--no-walk", *revs)
            listed = listing.result()
            packing = self.spool(stack, "pack-objects", "-q", "--stdout", stdin=listed)
            pack = packing.result().read()
            if listing.proc.returncode or packing.proc.returncode:
                raise HarnessError(f"git could not pack {' '.join(r[:12] for r in revs)}")
            return pack

    def take(self, pack: bytes) -> None:
        """Store the objects of `pack` (made by `objects`, in another repository)."""
        with tempfile.TemporaryFile() as given:
            given.write(pack)
            given.seek(0)
            self.git("index-pack", "--stdin", stdin=given)

    def clone_shared(self, dest: Path) -> None:
        """A clone of this repository at `dest` borrowing its objects, with no files checked
        out."""
        self.git("clone", "-q", "--shared", "--no-checkout", str(self.root), str(dest))

    def checkout_new_branch(self, name: str, at: str) -> None:
        """A new branch `name` at `at`, checked out."""
        self.git("checkout", "-q", "-b", name, at)


def _listed(records: Iterator[bytes]) -> Iterator[tuple[str, str, str]]:
    """(mode, object id, path) of each entry `ls-tree -r -z` lists."""
    for raw in records:
        meta, _, path = raw.partition(b"\t")
        mode, _, sha = meta.decode().split(" ")
        yield mode, sha, path.decode("utf-8", "surrogateescape")


def _changed(changes: list[Changed], dest: Path) -> Iterator[tuple[str, str, str]]:
    """(mode, object id, path) of each file that is new or changed, once every path that
    differs is gone from `dest`, and the folders they leave empty: so a file can become a
    folder and a folder a file."""
    for change in changes:
        target = dest / change.path
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            folders.remove(target)
    for change in sorted(changes, key=lambda c: -c.path.count("/")):
        parent = (dest / change.path).parent
        while parent != dest:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent
    return ((c.new.mode, c.new.oid, c.path) for c in changes if c.new is not None)


def _signature(path: Path) -> tuple[int, ...] | None:
    """What tells a file rewritten or replaced from the one that was there: its inode, size
    and change time; None when there is none."""
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


def _plain_path(name: str) -> bool:
    """A tree path with no empty, `.`, `..` or `.git` part (git refuses these on checkout)."""
    return not name.startswith("/") and all(
        part not in ("", ".", "..") and part.lower() != ".git" for part in name.split("/")
    )
