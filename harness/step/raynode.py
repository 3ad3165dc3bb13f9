"""What a node of a Ray cluster runs for `--executor ray` (rayexec.py): one worker call, or
one change's checks, in a throw-away repository made from the objects the driver sent.

Everything arrives and leaves as bytes: the objects of the trees worked on (a pack, no
history), the envelope and the agent's own files in; the files the call wrote, or the
checks' verdict, out. The call runs through the same Containment as a local one, in the
sandbox made here: a node that cannot make one fails the call as a local run would, never
running the worker bare. Nothing is written outside a temporary folder removed at the end.
This module imports no Ray: the driver wraps its functions as Ray tasks.
"""

from __future__ import annotations

import tempfile
from pathlib import Path, PurePosixPath

from harness.base import folders
from harness.boundary import proc, sessions
from harness.boundary.contain import Containment
from harness.boundary.registry import Agent
from harness.checks import sequence
from harness.repository import repo
from harness.repository.layout import Layout
from harness.spec.config import Config

# A folder's regular files by their path below it ("a/b.json"), as bytes.
Files = dict[str, bytes]
# A file of the agent's own (its launcher, its persona): its bytes and whether it executes.
Own = dict[str, tuple[bytes, bool]]


def answer(
    agent: Agent,
    config: Config,
    base: str,
    pack: bytes,
    own: Own,
    staged: Files,
    session: Files,
    timeouts: dict[str, float],
) -> tuple[proc.Result, Files, Files]:
    """Run the call staged in `staged` (its `stdin`) on `base`: its result, the files it
    wrote beside the envelope (the answer, its stderr, an egress record) and the session
    store its CLI left (for a retry to resume)."""
    with tempfile.TemporaryDirectory(prefix="harness-call-") as tmp:
        root = Path(tmp) / "repo"
        git = repo.holding(root, pack)
        try:
            for rel, (data, runs) in own.items():
                path = root / checked(rel)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                path.chmod(0o755 if runs else 0o644)
            layout = Layout(root)
            staging, scratch = layout.state / "staging", layout.state / "call"
            put(staging, staged)
            if session:
                put(scratch / sessions.IN, session)
            result = Containment(layout, config).call(agent, git, base, staging, timeouts, scratch)
            wrote = {k: v for k, v in taken(staging).items() if k != "stdin"}
            return result, wrote, taken(scratch / sessions.OUT)
        finally:
            git.close()
            folders.remove(root)  # what a sandboxed command left unwritable, too


def check(work: sequence.Work, pack: bytes) -> sequence.Verdict:
    """The change's checks (sequence.run) on the trees of `work`, whose objects `pack`
    holds, each in the sandbox made here; the verdict holds all they said, as bytes."""
    with tempfile.TemporaryDirectory(prefix="harness-check-") as tmp:
        root = Path(tmp) / "repo"
        git = repo.holding(root, pack)
        try:
            layout = Layout(root)
            scratch, cache = layout.state / "checks", layout.state / "coverage"
            scratch.mkdir(parents=True)
            box = Containment(layout, work.config).box
            return sequence.run(work, git, box, scratch, cache)
        finally:
            git.close()
            folders.remove(root)


def checked(rel: str) -> str:
    """`rel` if it names a path below a folder (no `..`, not absolute), else ValueError."""
    path = PurePosixPath(rel)
    if path.is_absolute() or not path.parts or ".." in path.parts:
        raise ValueError(f"not a path below a folder: {rel!r}")
    return path.as_posix()


def taken(folder: Path) -> Files:
    """The regular files below `folder` (none when it is absent); links are not followed."""
    if not folder.is_dir():
        return {}
    found = folders.entries(folder, folders.COPY_DEPTH, folders.COPY_ENTRIES, read=True)
    return {item.rel: item.data or b"" for item in found if item.kind == "file"}


def put(folder: Path, found: Files) -> None:
    """Write `found` (as `taken` read it) under `folder`, which is made afresh."""
    folders.remove(folder)
    folder.mkdir(parents=True)
    for rel, data in found.items():
        path = folder / checked(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
