"""How harness runs git: the options and environment every call carries, Git (one
repository's git commands, the core every part of Repo stands on), Spool (git in the
background, its output in a temporary file, read in records), and paths written for git to
read on its input."""

from __future__ import annotations

import codecs
import os
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import IO, BinaryIO

import git

from harness.base.errors import Halted, HarnessError

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
_ENV = {"LC_ALL": "C", "TZ": "UTC", "GIT_TERMINAL_PROMPT": "0"}
# Paths harness passes are names, never pathspecs: a file named `:!x` is not "all but x".
LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}


class Git:
    """One repository's git, every command run the same guarded way."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = git.Repo(root)
        self.guard = _filters_off(self.repo)

    def close(self) -> None:
        """Stop GitPython's helper processes (cat-file); a long-lived caller must."""
        self.repo.close()

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
        """Run git, its input read from `stdin` (a real file) if given: (exit code, output,
        complaints)."""
        runner = git.Git(str(cwd or self.root))
        code, out, err = runner.execute(
            ["git", *_PREFIX, *self.guard, *args],
            istream=stdin,
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


def env_without_git() -> None:
    """Drop inherited GIT_* variables once, so they can't redirect harness's git calls."""
    for name in [n for n in os.environ if n.startswith("GIT_")]:
        del os.environ[name]


def stdin_path(path: str) -> bytes:
    """`path` as a line `git hash-object --stdin-paths` reads back whole: C-quoted, so that a
    line end, a carriage return or a leading quote in it stays part of the name."""
    raw = os.fsencode(path).replace(b"\\", b"\\\\").replace(b'"', b'\\"')
    return b'"' + raw.replace(b"\n", b"\\n").replace(b"\r", b"\\r") + b'"\n'
