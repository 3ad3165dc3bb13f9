"""How harness runs git: the options and environment every call carries, Git (one
repository's git commands and its objects, the core every part of Repo stands on), Spool
(git in the background, its output in a temporary file, read in records), and paths written
for git to read on its input."""

from __future__ import annotations

import codecs
import os
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import IO, BinaryIO

from harness.base.errors import Halted, HarnessError
from harness.repository.objects import Objects

# Nothing the repository's configuration names runs inside harness's own git: no hooks, no
# fsmonitor, no external diff (filters are switched off per repository, see Git.guard).
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
_ENV = {"LANGUAGE": "C", "LC_ALL": "C", "TZ": "UTC", "GIT_TERMINAL_PROMPT": "0"}
# Paths harness passes are names, never pathspecs: a file named `:!x` is not "all but x".
LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}


def run_git(
    cwd: Path, *args: str, env: dict[str, str] | None = None, stdin: BinaryIO | None = None
) -> tuple[int, str, str]:
    """Run git in `cwd` with harness's options and environment, its input read from `stdin`
    (a real file) if given: (exit code, output, complaints)."""
    done = subprocess.run(
        ["git", *_PREFIX, *args],
        cwd=cwd,
        env={**os.environ, **_ENV, **(env or {})},
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    err = done.stderr.decode("utf-8", "surrogateescape")
    return done.returncode, done.stdout.decode("utf-8", "surrogateescape"), err


class Git:
    """One repository's git, every command run the same guarded way."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.guard = _filters_off(root)
        self.odb = Objects(["git", *_PREFIX, *self.guard], root, _ENV)

    def close(self) -> None:
        """Stop the repository's `git cat-file --batch`; a long-lived caller must."""
        self.odb.close()

    def git(
        self,
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        stdin: BinaryIO | None = None,
    ) -> str:
        """Run git; a failure is a HarnessError carrying git's last line of complaint."""
        code, out, err = self.try_git(*args, cwd=cwd, env=env, stdin=stdin)
        if code != 0 and "index.lock': File exists" in err:
            raise self._stale_lock(args[0])
        if code != 0:
            tail = (err.strip().splitlines() or [f"exit {code}"])[-1]
            raise HarnessError(f"git {args[0]} failed: {tail}")
        return out

    def try_git(
        self,
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        stdin: BinaryIO | None = None,
    ) -> tuple[int, str, str]:
        """run_git in the repository (or `cwd`), its filters off."""
        return run_git(cwd or self.root, *self.guard, *args, env=env, stdin=stdin)

    def spool(self, stack: ExitStack, *args: str, stdin: IO[bytes] | None = None) -> Spool:
        """Start git in the background, its output going to a temporary file; for output
        too large to hold, read once with Spool.result(). The stack reaps the process."""
        return Spool(stack, self.root, (*self.guard, *args), stdin)

    def index_free(self) -> None:
        """Halt on a stale index.lock before the branch moves rather than after, when the
        index update that follows a commit would meet it."""
        if self._lock.exists():
            raise self._stale_lock("commit")

    @property
    def _lock(self) -> Path:
        return git_dir(self.root) / "index.lock"

    def _stale_lock(self, command: str) -> Halted:
        return Halted(
            f"git {command}: {self._lock} exists; if no git is running (a killed harness "
            "leaves it), remove it and run again"
        )


class Spool:
    """One git process writing to a temporary file (see Git.spool)."""

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


def _filters_off(root: Path) -> tuple[str, ...]:
    """`-c` options that blank every filter driver the configuration defines (every file git
    reads for this repository, its includes too), so reading or writing a file never runs a
    command named there."""
    _, listed, _ = run_git(root, "config", "-z", "--name-only", "--get-regexp", r"^filter\.")
    names = set()
    for key in listed.split("\0"):
        # filter.<name>.<setting>: the name may itself hold dots.
        name = key.partition(".")[2].rpartition(".")[0]
        if name:
            names.add(name)
    return tuple(
        arg
        for name in sorted(names)
        for setting in ("clean=", "smudge=", "process=", "required=false")
        for arg in ("-c", f"filter.{name}.{setting}")
    )


def git_dir(root: Path, common: bool = False) -> Path:
    """The git directory of the working tree at `root` (with `common`, the one holding the
    objects and config, which a linked worktree shares): `.git` itself when it is a folder,
    else where git says."""
    dotgit = root / ".git"
    if dotgit.is_dir() and not dotgit.is_symlink():
        return dotgit
    which = "--git-common-dir" if common else "--absolute-git-dir"
    code, out, _ = run_git(root, "rev-parse", "--path-format=absolute", which)
    if code != 0:
        raise HarnessError(f"{root}: not a git repository")
    return Path(out.rstrip("\n"))


def unquote(path: bytes) -> str:
    """A path as git prints it: C-quoted when it holds unusual bytes (core.quotePath)."""
    if path.startswith(b'"') and path.endswith(b'"'):
        path = codecs.escape_decode(path[1:-1])[0]
    return path.decode("utf-8", "surrogateescape")


def env_without_git() -> None:
    """Drop inherited GIT_* variables once, so they can't redirect harness's git calls."""
    for name in [n for n in os.environ if n.startswith("GIT_")]:
        del os.environ[name]


def stdin_path(path: str) -> bytes:
    """`path` as a line `git hash-object --stdin-paths` reads back whole: C-quoted, so that a
    line end, a carriage return or a leading quote in it stays part of the name."""
    raw = os.fsencode(path).replace(b"\\", b"\\\\").replace(b'"', b'\\"')
    return b'"' + raw.replace(b"\n", b"\\n").replace(b"\r", b"\\r") + b'"\n'
