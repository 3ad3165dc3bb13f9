"""The user's index and working files, as harness compares and syncs them: never through a
symlink, never over something of the user's."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Sequence

from harness.repository.history import History
from harness.repository.process import LITERAL, stdin_path

# An index entry (mode, object id); None where there is no file.
Entry = tuple[str, str] | None
# Paths per git command line, well under the system's limit on its length.
_CHUNK = 2000


class WorkTree(History):
    def unmatched(self, paths: Sequence[str], commits: Sequence[str]) -> list[str]:
        """The paths whose user's index entry or working file is not its version in any of
        `commits`; where a commit has no such file, that means no entry and no file (what lies
        past a symlink or a file on the way is no file, as git sees it). One git process reads
        the index for all paths and one hashes the working files, whatever their number; a
        working file is hashed only where the index entry matched."""
        versions = {path: {self._entry(c, path) for c in commits} for path in paths}
        staged = self._staged(paths)
        working = self._working([p for p in paths if staged.get(p) in versions[p]])
        return [p for p in paths if p not in working or working[p] not in versions[p]]

    def sync(self, commit: str, paths: Sequence[str]) -> list[str]:
        """Make the user's index and files match `commit` for exactly these paths, deletions
        first so that a file may become a folder and a folder a file. Nothing is written
        through a symlink or over something of the user's (a file on the way, a folder that is
        not empty where the file goes): such a path is left as it is and returned."""
        gone = [p for p in paths if self._entry(commit, p) is None]
        if gone:
            self.git("update-index", "--force-remove", "--", *gone)
            for path in gone:
                self._remove(path)
        blocked = [p for p in paths if p not in gone and not self._clear(p)]
        ready = [p for p in paths if p not in gone and p not in blocked]
        if ready:
            self.git("checkout", commit, "--", *ready, env=LITERAL)
        return blocked

    def in_the_way(self, path: str) -> str | None:
        """The first folder of `path` that in the working tree is a symlink or a file, or None.
        Each part is looked at with lstat, after its parent proved a real folder, so no link
        is ever followed."""
        parts = path.split("/")
        for end in range(1, len(parts)):
            folder = "/".join(parts[:end])
            try:
                found = os.lstat(self.root / folder)
            except FileNotFoundError:
                return None
            if not stat.S_ISDIR(found.st_mode):
                return folder
        return None

    def _entry(self, commit: str, path: str) -> Entry:
        """The path's entry in `commit`."""
        found = self.odb.entry(commit, path)
        return (found.mode, found.oid) if found is not None and found.kind == "blob" else None

    def _staged(self, paths: Sequence[str]) -> dict[str, Entry]:
        """The paths' entries in the user's index; a path with none is left out."""
        wanted = set(paths)
        found: dict[str, Entry] = {}
        for start in range(0, len(paths), _CHUNK):
            chunk = paths[start : start + _CHUNK]
            out = self.git("ls-files", "-s", "-z", "--", *chunk, env=LITERAL)
            for record in filter(None, out.split("\0")):
                meta, name = record.split("\t", 1)
                # A conflicted name has a record per stage: the first one stands for it.
                if name in wanted and name not in found:
                    mode, sha, stage = meta.split(" ")
                    # A conflicted entry is the user's business, never a version of ours.
                    found[name] = (mode, sha) if stage == "0" else ("unmerged", sha)
        return found

    def _working(self, paths: Sequence[str]) -> dict[str, Entry]:
        """The working files at `paths` as the index would record them; None for no file.
        The regular files go to one `git hash-object --stdin-paths`, which hashes each as
        `git hash-object -- <path>` would (the same attributes and conversions)."""
        found: dict[str, Entry] = {}
        regular: list[tuple[str, str]] = []
        for path in paths:
            found[path] = None
            if self.in_the_way(path) is not None:
                continue
            full = self.root / path
            try:
                seen = full.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(seen.st_mode):
                target = os.fsencode(os.readlink(full))
                blob = hashlib.sha1(b"blob %d\0%b" % (len(target), target), usedforsecurity=False)
                found[path] = "120000", blob.hexdigest()
            elif stat.S_ISREG(seen.st_mode):
                regular.append((path, "100755" if seen.st_mode & stat.S_IXUSR else "100644"))
        if regular:
            with tempfile.TemporaryFile() as names:
                names.write(b"".join(stdin_path(path) for path, _ in regular))
                names.seek(0)
                shas = self.git("hash-object", "--stdin-paths", stdin=names).split()
            for (path, mode), sha in zip(regular, shas, strict=True):
                found[path] = mode, sha
        return found

    def _remove(self, path: str) -> None:
        """Delete the working file at `path`, never through a link nor a folder, and the
        folders that leaves empty, as git does."""
        if self.in_the_way(path) is not None:
            return
        full = self.root / path
        if full.is_symlink() or full.is_file():
            full.unlink()
        folder = full.parent
        while folder != self.root:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent

    def _clear(self, path: str) -> bool:
        """Whether a file may be written at `path`: no symlink or file on its way, and no
        folder where it goes (an empty one is removed, as git would)."""
        if self.in_the_way(path) is not None:
            return False
        full = self.root / path
        if full.is_dir() and not full.is_symlink():
            try:
                full.rmdir()
            except OSError:
                return False
        return True
