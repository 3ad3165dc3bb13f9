"""Small builders tests share: subtasks, plans, hypothesis settings, a plain git runner,
git trees drawn by hypothesis."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from harness.spec.plan import Plan, Subtask

FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def sub(sid: str, *deps: str, **fields: Any) -> Subtask:
    base: dict[str, Any] = {
        "id": sid,
        "role": "localized-impl",
        "goal": f"Goal of {sid}",
        "inputs": ("src/calc.py",),
        "acceptance": (),
        "write_scope": ("src/**",),
        "depends_on": tuple(deps),
        "creates": (),
        "agents": (),
        "token": None,
        "allow_new_deps": False,
        "allow_mode_change": False,
        "allow_api_change": False,
    }
    return Subtask(**(base | fields))


def plan_of(*subtasks: Subtask) -> Plan:
    return Plan("demo", "2026-01-01T00:00:00Z", tuple(subtasks))


class Waiting:
    """A FIFO made at `path` with a writer blocked opening it: the writer goes on only if
    something opens the FIFO to read, so a FIFO harness never opened still has it waiting."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self.writer = threading.Thread(target=lambda: path.open("wb").close(), daemon=True)
        self.writer.start()

    def assert_unopened(self) -> None:
        """Fail if the FIFO was opened; then let the writer go."""
        assert self.writer.is_alive(), f"{self.path} was opened"
        reader = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self.writer.join(5)
        os.close(reader)
        assert not self.writer.is_alive()


def git(root: Path, *args: str) -> str:
    """git in `root` with a throw-away identity; its output, stripped."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


# A git tree as hypothesis draws it: name -> (mode, which of three contents) or a tree below.
# Few names and contents, so two trees drawn apart share entries and whole folders.
LEAF = st.tuples(st.sampled_from(["100644", "100755", "120000", "160000"]), st.integers(0, 2))
NAME = st.sampled_from([b"a", b"a.b", b"b", b"c-\xff", b"d"])
TREES = st.recursive(
    st.dictionaries(NAME, LEAF, max_size=4),
    lambda below: st.dictionaries(NAME, st.one_of(LEAF, below), max_size=4),
    max_leaves=14,
)


def contents(root: Path) -> list[str]:
    """The three blobs a drawn tree's files hold, written to the repository at `root`."""
    return [
        subprocess.run(
            ["git", "hash-object", "-w", "--stdin"],
            cwd=root,
            input=f"{i}\n".encode(),
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
        for i in range(3)
    ]


def drawn_tree(root: Path, spec: dict[bytes, Any], blobs: list[str]) -> str:
    """The tree `spec` describes, made by git mktree; submodules name made-up commits."""
    listing = b""
    for name, value in spec.items():
        if isinstance(value, dict):
            mode, kind, oid = "40000", "tree", drawn_tree(root, value, blobs)
        else:
            mode, which = value
            kind = "commit" if mode == "160000" else "blob"
            oid = f"{which + 1}" * 40 if kind == "commit" else blobs[which]
        listing += f"{mode} {kind} {oid}\t".encode() + name + b"\0"
    done = subprocess.run(
        ["git", "mktree", "-z", "--missing"],
        cwd=root,
        input=listing,
        capture_output=True,
        check=True,
    )
    return done.stdout.decode().strip()
