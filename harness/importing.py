"""`harness plan import`: an Agentfile (seeds 001, 003) or a Glee workflow (seed 000) written
as plan.json, for a person to review and run.

A `.yml`/`.yaml` file is a Glee workflow; its nested workflows are read beside it
(`<name>.yml`, else `<name>.yaml`) and imported as tasks of their own, which its plan runs.
Anything else is an Agentfile; the files its GOAL and AGENT lines name are read relative to
it. Every file read must be a regular file inside the repository: an imported workflow
cannot copy the rest of the machine into a plan, and from there into a prompt.

All plans are converted and validated before any is written, and none replaces an existing
plan.json without `force`, nor ever the plan of a task that has started: a failed import
writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from . import agentfile, files, glee, scope
from . import plan as plan_mod
from .errors import InvalidInput
from .layout import Layout
from .ledger import Ledger

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
    label = _label(layout, source)
    text = _read(layout, source, label)
    if source.suffix in (".yml", ".yaml"):

        def workflow(name: str) -> str | None:
            for suffix in (".yml", ".yaml"):
                path = source.parent / f"{name}{suffix}"
                if path.exists() or path.is_symlink():
                    return _read(layout, path, _label(layout, path))
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
        docs = {
            task_id: agentfile.to_plan(
                text,
                label,
                task_id=task_id,
                created=created,
                inputs=inputs,
                role=role,
                write_scope=write_scope,
                read=lambda rel: _read(layout, source.parent / rel, rel),
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


def _label(layout: Layout, path: Path) -> str:
    """The path from the repository's root (resolved like the root, so a symlinked working
    folder still gives a repository path), else as given."""
    try:
        return layout.rel(path.resolve())
    except ValueError:
        return str(path)


def _read(layout: Layout, path: Path, label: str) -> str:
    """A file an import reads: regular, inside the repository, UTF-8, of modest size."""
    root = layout.root.resolve()
    try:
        inside = path.resolve().is_relative_to(root)
    except OSError:
        inside = False
    if not inside:
        raise InvalidInput(f"{label}: outside the repository")
    data = files.read_untrusted(path.resolve(), MAX_BYTES + 1)
    if data is None:
        raise InvalidInput(f"{label}: no such regular file")
    if len(data) > MAX_BYTES:
        raise InvalidInput(f"{label}: larger than {MAX_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{label}: not UTF-8") from None
