"""`harness plan import`: an Agentfile (seeds 001, 003) or a Glee workflow (seed 000) written
as plan.json, for a person to review and run.

A `.yml`/`.yaml` file is a Glee workflow; its nested workflows are read beside it
(`<name>.yml`, else `<name>.yaml`) and imported as tasks of their own, which its plan runs.
Anything else is an Agentfile; the files its GOAL and AGENT lines name are read relative to
it. Every file read goes through `read_text`, the one reader of both importers (`harness
agents import` too): what an import reads becomes a plan's or a persona's text, committed
and sent to every worker, so it reads only what a person would mean by naming a file.

All plans are converted and validated before any is written, and none replaces an existing
plan.json without `force`, nor ever the plan of a task that has started: a failed import
writes nothing.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from pathlib import Path

from harness.base import files, scope
from harness.base.errors import InvalidInput
from harness.importers import agentfile, glee
from harness.record.ledger import Ledger
from harness.repository.layout import Layout
from harness.spec import plan as plan_mod

# An imported file, and each file it names, is a person's text of modest size.
MAX_BYTES = 1_000_000


def convert(
    layout: Layout,
    source: Path,
    task_id: str,
    created: str,
    inputs: Mapping[str, str],
    role: str,
    write_scope: str | list[str],
) -> dict[str, bytes]:
    """Each plan the file makes, by task id (the imported task's first), as the bytes
    plan.json will hold, each validated as `plan validate` reads it."""
    label = repository_path(layout.root, source)
    text = _required(layout.root, label)
    folder = posixpath.dirname(label)
    if source.suffix in (".yml", ".yaml"):

        def workflow(name: str) -> str | None:
            for suffix in (".yml", ".yaml"):
                found = read_text(layout.root, posixpath.join(folder, f"{name}{suffix}"))
                if found is not None:
                    return found
            return None

        docs = glee.to_plans(
            text,
            label,
            task_id=task_id,
            created=created,
            inputs=inputs,
            role=role,
            write_scope=write_scope,
            read=workflow,
        )
    else:
        # agentfile refuses a path that leaves the repository before asking for it.
        docs = {
            task_id: agentfile.to_plan(
                text,
                label,
                task_id=task_id,
                created=created,
                inputs=inputs,
                role=role,
                write_scope=write_scope,
                read=lambda rel: _required(
                    layout.root, posixpath.normpath(posixpath.join(folder, rel))
                ),
            )
        }
    found: dict[str, bytes] = {}
    for tid, doc in docs.items():
        for sub in doc["subtasks"]:
            # A goal names no files: where it may write, it may also create (the gate
            # refuses a new file no `creates` allows, and an edit to a file not an input).
            if sub.get("write_scope", "none") != "none":
                sub.setdefault("creates", scope.as_list(sub["write_scope"]))
        data = files.pretty(doc)
        plan_mod.load(layout.plan(tid), layout.root, tid, data)
        found[tid] = data
    return found


def write(layout: Layout, plans: Mapping[str, bytes], force: bool) -> list[Path]:
    """Write every plan, or none: each through its task's ledger, as `plan accept` does."""
    for tid in plans:
        rel = layout.rel(layout.plan(tid))
        if layout.log(tid).exists():
            raise InvalidInput(f"task {tid} has started: its plan.json is no longer replaced")
        if layout.plan(tid).exists() and not force:
            raise InvalidInput(f"{rel} exists: give --force to replace it")
    written = []
    for tid, data in plans.items():
        Ledger(layout, tid).write(layout.plan(tid), data)
        written.append(layout.plan(tid))
    return written


def repository_path(root: Path, path: Path) -> str:
    """`path` as given (absolute, or relative to the working folder) as a path from the
    repository's root. Only the folders above the repository are resolved, so a working
    folder reached through a symlink still names a repository path, while a symlink inside
    the repository stays for `read_text` to refuse."""
    full = Path(os.path.abspath(path))
    top = root.resolve()
    # The topmost folder that is the repository: a symlink inside it to its own root is not.
    for above in (*reversed(full.parents), full):
        if above.resolve() == top:
            return full.relative_to(above).as_posix()
    raise InvalidInput(f"{path}: outside the repository")


# Folders whose files are never a person's workflow text, wherever a path points: git's own
# (.git/config holds a remote's credentials) and harness's (ai/: its configuration, registry,
# write tokens, plans and records).
GIT = ".git"
HARNESS = "ai"


def read_text(root: Path, rel: str) -> str | None:
    """The text of the repository file `rel` an import reads; None when there is none.

    Refused with one line naming it: a file of .git (at any depth: a submodule's too) or of
    ai/; a symlink at any component of the path, the folders on the way included; anything
    but a regular file (a FIFO or a device is never opened); more than MAX_BYTES; text that
    is not UTF-8 or that holds a NUL byte.
    """
    parts = rel.split("/")
    if any(part.casefold() == GIT for part in parts):
        raise InvalidInput(f"{rel}: in {GIT}: an import reads none of git's files")
    if parts[0].casefold() == HARNESS:
        raise InvalidInput(f"{rel}: in {HARNESS}/: an import reads none of harness's own files")
    if rel in ("", "."):
        raise InvalidInput(f"{rel or '.'}: not a regular file")
    data = files.read_inside(root, rel, MAX_BYTES, rel)
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{rel}: not UTF-8") from None
    if "\0" in text:
        raise InvalidInput(f"{rel}: holds a NUL byte")
    return text


def _required(root: Path, rel: str) -> str:
    found = read_text(root, rel)
    if found is None:
        raise InvalidInput(f"{rel}: no such file")
    return found
