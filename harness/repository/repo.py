"""Every git operation harness performs: the one chokepoint for git."""

from __future__ import annotations

import codecs
import hashlib
import io
import os
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

import git
from git.exc import InvalidGitRepositoryError, NoSuchPathError
from gitdb.base import IStream

from harness.base import clock, files
from harness.base.errors import Halted, HarnessError, InvalidInput

# Nothing the repository's configuration names runs inside harness's own git: no hooks, no
# fsmonitor, no external diff (filters are switched off per repository, see Repo.guard).
_PREFIX = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "diff.external=",
    "-c",
    "advice.detachedHead=false",
)
_ENV = {"LC_ALL": "C", "TZ": "UTC", "GIT_TERMINAL_PROMPT": "0"}
# Paths harness passes are names, never pathspecs: a file named `:!x` is not "all but x".
_LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}
_GITLINK = "160000"  # a submodule's commit

# An index entry (mode, object id); None where there is no file.
Entry = tuple[str, str] | None


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


class Repo:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = git.Repo(root)
        self.guard = _filters_off(self.repo)

    def close(self) -> None:
        """Stop GitPython's helper processes (cat-file); a long-lived caller must."""
        self.repo.close()

    def git(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
        """Run git; a failure is a HarnessError carrying git's last line of complaint."""
        code, out, err = self.try_git(*args, cwd=cwd, env=env)
        if code != 0 and "index.lock': File exists" in err:
            raise self._stale_lock(args[0])
        if code != 0:
            tail = (err.strip().splitlines() or [f"exit {code}"])[-1]
            raise HarnessError(f"git {args[0]} failed: {tail}")
        return out

    def try_git(
        self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> tuple[int, str, str]:
        runner = git.Git(str(cwd or self.root))
        code, out, err = runner.execute(
            ["git", *_PREFIX, *self.guard, *args],
            with_extended_output=True,
            with_exceptions=False,
            env={**_ENV, **(env or {})},
            strip_newline_in_stdout=False,
        )
        return int(code), str(out), str(err)

    def spool(self, stack: ExitStack, *args: str, stdin: IO[bytes] | None = None) -> Spool:
        """Start git in the background, its output going to a temporary file; for output
        too large to hold, read once with Spool.result(). The stack reaps the process."""
        return Spool(stack, self.root, (*self.guard, *args), stdin)

    # -- reading ---------------------------------------------------------------------------

    def head(self) -> str:
        try:
            return self.repo.head.commit.hexsha
        except ValueError:
            raise InvalidInput("the repository has no commits yet") from None

    def identity(self) -> str | None:
        """Who the person at this repository is to git ("Name <email>"), as a commit of
        theirs would say; None when git knows no name or email."""
        # As configured, never guessed from the host name: a verdict names a real person.
        code, out, _ = self.try_git("-c", "user.useConfigOnly=true", "var", "GIT_COMMITTER_IDENT")
        who = out.rpartition(">")[0] + ">" if code == 0 and ">" in out else ""
        return who if who and not who.startswith(" ") and not who.endswith("<>") else None

    def branch(self) -> str:
        if self.repo.head.is_detached:
            raise InvalidInput("HEAD is detached: check out a branch first")
        return self.repo.active_branch.name

    def blob_hashes(self, commit: str, paths: Sequence[str]) -> dict[str, str | None]:
        """sha256 of each path's content at `commit`; None where the path is not a file."""
        tree = self.repo.commit(commit).tree
        found: dict[str, str | None] = {}
        for path in paths:
            try:
                blob = tree[path]
            except KeyError:
                found[path] = None
                continue
            ok = blob.type == "blob" and blob.mode & 0o170000 == 0o100000
            found[path] = hashlib.sha256(blob.data_stream.read()).hexdigest() if ok else None
        return found

    def show(self, commit: str, path: str) -> str | None:
        """A file's text at `commit` (or in a tree), or None when it is not a regular file
        there."""
        data = self.read(commit, path)
        return None if data is None else data.decode("utf-8", "replace")

    def read(self, commit: str, path: str) -> bytes | None:
        """A file's bytes at `commit` (or in a tree), or None when it is not a regular file
        there."""
        found = self.repo.rev_parse(commit)
        # A bare tree object from rev_parse has no path, which indexing it needs.
        tree = (
            git.Tree(self.repo, found.binsha, 0o40000, "")
            if isinstance(found, git.Tree)
            else found.tree
        )
        try:
            blob = tree[path]
        except KeyError:
            return None
        if blob.type != "blob" or blob.mode & 0o170000 != 0o100000:
            return None
        data: bytes = blob.data_stream.read()
        return data

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
        return self.git("rev-parse", f"{commit}^{{tree}}").strip()

    def summary(self, ref: str) -> str:
        """The commits up to `ref`, newest first, one line each: short id and subject."""
        return self.git("log", "--format=%h %s", ref)

    def tree_without(self, commit: str, top: str) -> str:
        """The commit's top-level tree listing without the entry `top`, as a cache key."""
        listing = self.git("ls-tree", "-z", commit).split("\0")
        return "\0".join(e for e in listing if e and e.split("\t", 1)[1] != top)

    def paths(self, commit: str) -> frozenset[str]:
        """Every file of `commit`'s tree."""
        return frozenset(
            filter(None, self.git("ls-tree", "-r", "-z", "--name-only", commit).split("\0"))
        )

    def specials(self, commit: str) -> frozenset[str]:
        """Paths that are symlinks or submodules at `commit`."""
        out = self.git("ls-tree", "-r", "-z", commit)
        found = set()
        for entry in filter(None, out.split("\0")):
            meta, path = entry.split("\t", 1)
            if meta.split(" ")[0] in ("120000", "160000"):
                found.add(path)
        return frozenset(found)

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
        out = self.git(
            "diff-tree", "--no-commit-id", "--name-only", "-r", "-z", "--no-renames", old, new
        )
        return sorted(filter(None, out.split("\0")))

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

    def matches(self, path: str, commits: Sequence[str]) -> bool:
        """True when the user's index entry and working file for `path` each equal its
        version in one of `commits`; where a commit has no such file, that means no entry and
        no file (what lies past a symlink or a file on the way is no file, as git sees it)."""
        versions = {self._entry(c, path) for c in commits}
        return self._staged(path) in versions and self._working(path) in versions

    # -- scratch copies ----------------------------------------------------------------------

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
                changes = self.spool(stack, "diff-tree", "-r", "-z", "--no-renames", since, tree)
                found = _changed(split(changes.result()), dest)
            entries = []
            for mode, sha, name in found:
                if not _plain_path(name):
                    raise Halted(f"commit {tree[:12]} holds a path git itself refuses: {name!r}")
                if keep(name):
                    entries.append((mode, sha, name))
            wanted = stack.enter_context(tempfile.TemporaryFile())
            wanted.write(
                b"".join(f"{sha}\n".encode() for mode, sha, _ in entries if mode != _GITLINK)
            )
            wanted.seek(0)
            blobs = self.contents(stack, wanted).result()
            dest.mkdir(parents=True, exist_ok=True)
            links = []
            for mode, _, name in entries:
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                if mode == _GITLINK:
                    target.mkdir(exist_ok=True)
                    continue
                size = int(blobs.readline().split()[2])
                data = blobs.read(size)
                blobs.read(1)
                if mode == "120000":
                    links.append((target, os.fsdecode(data)))
                else:
                    target.write_bytes(data)
                    if mode == "100755":
                        target.chmod(0o755)
            # Links last: no file is ever written through one.
            for target, points_to in links:
                target.symlink_to(points_to)

    def apply_tree(
        self, head: str, patches: Sequence[tuple[str, Path]], index: Path
    ) -> tuple[str | None, str]:
        """The tree of `head` with the (name, patch) pairs applied in order, computed on a
        private index without touching any files; (tree, "") or (None, which patch git
        refused and why)."""
        env = {"GIT_INDEX_FILE": str(index)}
        index.unlink(missing_ok=True)
        try:
            self.git("read-tree", head, env=env)
            for name, patch in patches:
                for mode in ("--check", None):
                    code, _, err = self.try_git(
                        "apply",
                        "--cached",
                        *([mode] if mode else []),
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
            return self.git("write-tree", env=env).strip(), ""
        finally:
            index.unlink(missing_ok=True)

    @contextmanager
    def scratch(self, tree: str, where: Path, git_dir: bool = False) -> Iterator[Path]:
        """A copy of `tree` at `where`, with a `.git` of its own holding one commit of it if
        asked; removed afterwards whatever happens."""
        files.wipe(where)
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
            files.wipe(where)

    def clone_shared(self, dest: Path) -> None:
        """A clone of this repository at `dest` borrowing its objects, with no files checked
        out."""
        self.git("clone", "-q", "--shared", "--no-checkout", str(self.root), str(dest))

    def checkout_new_branch(self, name: str, at: str) -> None:
        """A new branch `name` at `at`, checked out."""
        self.git("checkout", "-q", "-b", name, at)

    # -- writing the branch ----------------------------------------------------------------

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
            self.git("checkout", commit, "--", *ready, env=_LITERAL)
        return blocked

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
        env = {"GIT_INDEX_FILE": str(index), **_LITERAL}
        index.unlink(missing_ok=True)
        try:
            self.git("read-tree", head, env=env)
            if dropped:
                self.git("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *dropped, env=env)
            infos = []
            for path, data in sorted(taken.items()):
                blob = self.repo.odb.store(IStream(git.Blob.type, len(data), io.BytesIO(data)))
                infos += ["--cacheinfo", f"100644,{blob.hexsha.decode()},{path}"]
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
        self.git("reset", "-q", made, "--", *sorted({*taken, *dropped}), env=_LITERAL)
        return made

    def index_free(self) -> None:
        """Halt on a stale index.lock before the branch moves rather than after, when the
        index update that follows a commit would meet it."""
        if self._lock.exists():
            raise self._stale_lock("commit")

    @property
    def _lock(self) -> Path:
        return Path(self.repo.git_dir) / "index.lock"

    def _stale_lock(self, command: str) -> Halted:
        return Halted(
            f"git {command}: {self._lock} exists; if no git is running (a killed harness "
            "leaves it), remove it and run again"
        )

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
        try:
            blob = self.repo.commit(commit).tree[path]
        except KeyError:
            return None
        return (f"{blob.mode:o}", blob.hexsha) if blob.type == "blob" else None

    def _staged(self, path: str) -> Entry:
        """The path's entry in the user's index."""
        out = self.git("ls-files", "-s", "-z", "--", path, env=_LITERAL)
        for record in filter(None, out.split("\0")):
            meta, name = record.split("\t", 1)
            if name == path:
                mode, sha, stage = meta.split(" ")
                # A conflicted entry is the user's business, never a version of ours.
                return (mode, sha) if stage == "0" else ("unmerged", sha)
        return None

    def _working(self, path: str) -> Entry:
        """The working file at `path` as the index would record it; None for no file."""
        if self.in_the_way(path) is not None:
            return None
        full = self.root / path
        try:
            found = full.lstat()
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(found.st_mode):
            target = os.fsencode(os.readlink(full))
            blob = hashlib.sha1(b"blob %d\0%b" % (len(target), target), usedforsecurity=False)
            return "120000", blob.hexdigest()
        if not stat.S_ISREG(found.st_mode):
            return None
        mode = "100755" if found.st_mode & stat.S_IXUSR else "100644"
        return mode, self.git("hash-object", "--", path).strip()

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


class Spool:
    """One git process writing to a temporary file (see Repo.spool)."""

    def __init__(
        self, stack: ExitStack, root: Path, args: Sequence[str], stdin: IO[bytes] | None
    ) -> None:
        self.out = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 -- the stack closes it
        self.proc = subprocess.Popen(
            ["git", *_PREFIX, "-c", "core.quotePath=true", *args],
            cwd=root,
            env={**os.environ, **_ENV},
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=self.out,
            stderr=subprocess.DEVNULL,
        )
        stack.callback(_reap, self.proc)

    def result(self) -> IO[bytes]:
        """The whole output, once git has finished, read from the start."""
        self.proc.wait()
        self.out.seek(0)
        return self.out


def _reap(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def split(stream: IO[bytes], sep: bytes = b"\0") -> Iterator[bytes]:
    """Records of a stream, read 64 KiB at a time, never the whole output at once."""
    rest = b""
    while chunk := stream.read(1 << 16):
        parts = (rest + chunk).split(sep)
        rest = parts.pop()
        yield from parts
    if rest:
        yield rest


def _listed(records: Iterator[bytes]) -> Iterator[tuple[str, str, str]]:
    """(mode, object id, path) of each entry `ls-tree -r -z` lists."""
    for raw in records:
        meta, _, path = raw.partition(b"\t")
        mode, _, sha = meta.decode().split(" ")
        yield mode, sha, path.decode("utf-8", "surrogateescape")


def _changed(records: Iterator[bytes], dest: Path) -> Iterator[tuple[str, str, str]]:
    """(mode, object id, path) of each entry a raw `diff-tree -r -z` says is new or changed,
    once every path it names is gone from `dest`, and the folders they leave empty: so a
    file can become a folder and a folder a file."""
    found = []
    for meta in records:
        path = next(records).decode("utf-8", "surrogateescape")
        _, mode, _, sha, status = meta.decode().lstrip(":").split(" ")
        found.append((mode, sha, path, status))
    for _, _, path, _ in found:
        target = dest / path
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            files.wipe(target)
    for _, _, path, _ in sorted(found, key=lambda f: -f[2].count("/")):
        parent = (dest / path).parent
        while parent != dest:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent
    return ((mode, sha, path) for mode, sha, path, status in found if status != "D")


def _plain_path(name: str) -> bool:
    """A tree path with no empty, `.`, `..` or `.git` part (git refuses these on checkout)."""
    return not name.startswith("/") and all(
        part not in ("", ".", "..") and part.lower() != ".git" for part in name.split("/")
    )


def _filters_off(repo: git.Repo) -> tuple[str, ...]:
    """`-c` options that blank every filter driver the configuration defines, so reading or
    writing a file never runs a command named there."""
    names: set[str] = set()
    reader = repo.config_reader()
    for section in reader.sections():
        kind, _, name = section.partition(" ")
        if kind == "filter" and name:
            names.add(name.strip('"'))
    return tuple(
        arg
        for name in sorted(names)
        for setting in ("clean=", "smudge=", "process=", "required=false")
        for arg in ("-c", f"filter.{name}.{setting}")
    )


def unquote(path: bytes) -> str:
    """A path as git prints it: C-quoted when it holds unusual bytes (core.quotePath)."""
    if path.startswith(b'"') and path.endswith(b'"'):
        path = codecs.escape_decode(path[1:-1])[0]
    return path.decode("utf-8", "surrogateescape")


def create(root: Path, branch: str, message: str, who: tuple[str, str], ts: str) -> None:
    """A new repository whose first commit holds every file under `root` (the demo's)."""
    git.Repo.init(root, initial_branch=branch).close()
    made = Repo(root)
    made.git("add", "-A")
    tree = made.git("write-tree").strip()
    made.git("update-ref", f"refs/heads/{branch}", made.commit(tree, None, message, who, ts))
    made.close()


def trailers(message: str) -> dict[str, str]:
    """Harness-* trailers of a commit message."""
    found = {}
    for line in message.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.startswith("Harness-"):
            found[key] = value.strip()
    return found


def env_without_git() -> None:
    """Drop inherited GIT_* variables once, so they can't redirect harness's git calls."""
    for name in [n for n in os.environ if n.startswith("GIT_")]:
        del os.environ[name]
