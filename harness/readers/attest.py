"""`harness attest`: an in-toto Statement with SLSA provenance for a task's final commit.

Everything in it is read from that commit, never from the working tree, so the statement
is a function of the commit alone: the same commit gives the same bytes on any machine.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson

from harness import __version__
from harness.base import schemas
from harness.base.errors import InvalidInput
from harness.record import progress, protocol
from harness.repository import repo
from harness.repository.layout import Layout

STATEMENT = "https://in-toto.io/Statement/v1"
PREDICATE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://harness.dev/buildtypes/task/v1"
BUILDER = "https://harness.dev/harness"


def statement(layout: Layout, task_id: str) -> dict[str, Any]:
    """The Statement for the newest commit on HEAD carrying `Harness-Task: <task_id>`."""
    git = repo.Repo(layout.root)
    try:
        return _statement(_Commit(git, layout, _final(git, task_id)), task_id)
    finally:
        git.close()


def _final(git: repo.Repo, task_id: str) -> str:
    git.head()  # no commits at all is its own one-line error
    last = git.last_task_commit(task_id)
    if last is None:
        raise InvalidInput(f"task {task_id}: no commit on HEAD carries Harness-Task: {task_id}")
    return last[0]


class _Commit:
    """Reads files as they are in one commit."""

    def __init__(self, git: repo.Repo, layout: Layout, sha: str) -> None:
        self.git, self.layout, self.sha = git, layout, sha
        self.tree = git.tree_of(sha)

    def rel(self, path: Path) -> str:
        return path.relative_to(self.layout.root).as_posix()

    def text(self, rel: str) -> str:
        found = self.git.show(self.sha, rel)
        if found is None:
            raise InvalidInput(f"{rel}: not in commit {self.sha[:12]}")
        return found

    def json(self, rel: str, schema: str) -> Any:
        try:
            data = orjson.loads(self.text(rel))
        except orjson.JSONDecodeError as exc:
            raise InvalidInput(f"{rel} at {self.sha[:12]}: invalid JSON: {exc}") from None
        schemas.validate(schema, data, f"{rel} at {self.sha[:12]}")
        return data

    def sha256(self, rel: str) -> str | None:
        return self.git.blob_hashes(self.sha, [rel])[rel]

    def folders(self, rel: str) -> list[str]:
        return self.git.folders(self.sha, rel)


def _statement(at: _Commit, task_id: str) -> dict[str, Any]:
    layout = at.layout
    log_rel = at.rel(layout.log(task_id))
    events, head, model = _log(at, log_rel, task_id)
    exchanges_rel = at.rel(layout.exchanges(task_id))
    # meta.json holds the sha256 of every other file of its exchange: its digest pins them all.
    metas = {
        call_id: (digest, at.json(f"{exchanges_rel}/{call_id}/meta.json", "exchange-meta"))
        for call_id in at.folders(exchanges_rel)
        if (digest := at.sha256(f"{exchanges_rel}/{call_id}/meta.json")) is not None
    }
    # The branch the task's calls were made on, whatever is checked out now (CI detaches).
    branches = {
        at.json(f"{exchanges_rel}/{call_id}/context.ndjson", "context-envelope")["payload"][
            "branch"
        ]
        for call_id in metas
    }
    branch = branches.pop() if len(branches) == 1 else "HEAD"
    dependencies: list[dict[str, Any]] = [
        {
            "name": "harness",
            "uri": f"pkg:pypi/harness@{__version__}",
            "annotations": {
                "recorded_versions": sorted({m["harness_version"] for _, m in metas.values()})
            },
        },
        *_agents(at, metas),
    ]
    base = next(
        (ev.get("details", {}).get("base") for ev in events if ev["event"] == "subagent_invoked"),
        None,
    )
    if isinstance(base, str):
        dependencies.append(
            {"name": "base", "uri": f"git+commit:{branch}", "digest": {"gitCommit": base}}
        )
    config = {
        rel: {"sha256": digest}
        for rel in (at.rel(layout.config), at.rel(layout.registry), at.rel(layout.tokens))
        if (digest := at.sha256(rel)) is not None
    }
    byproducts = [
        {"name": f"{exchanges_rel}/{call_id}", "digest": {"sha256": digest}}
        for call_id, (digest, _) in sorted(metas.items())
    ]
    byproducts.append({"name": log_rel, "digest": {"sha256": at.sha256(log_rel)}})
    return {
        "_type": STATEMENT,
        "subject": [
            {"name": f"git+commit:{branch}", "digest": {"gitCommit": at.sha}},
            {"name": f"git+tree:{branch}", "digest": {"gitTree": at.tree}},
        ],
        "predicateType": PREDICATE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "task_id": task_id,
                    "plan": at.json(at.rel(layout.plan(task_id)), "plan"),
                },
                "internalParameters": {
                    "files": config,
                    "log_head": head,
                    "uncontained_events": model.uncontained,
                },
                "resolvedDependencies": dependencies,
            },
            "runDetails": {
                "builder": {"id": f"{BUILDER}@{__version__}", "version": {"harness": __version__}},
                "metadata": {
                    "invocationId": f"{task_id}@{head}",
                    "startedOn": events[0]["ts"],
                    "finishedOn": events[-1]["ts"],
                },
                "byproducts": byproducts,
            },
        },
    }


def _log(at: _Commit, rel: str, task_id: str) -> tuple[list[dict[str, Any]], str, protocol.Model]:
    """The events of the log in the commit, its head (the hash of its last line) and what
    the protocol makes of it; a log harness could not have written is refused."""
    model = protocol.Model()
    lines = io.BytesIO(at.text(rel).encode())
    read = list(progress.read(lines, task_id, model, f"{rel} at {at.sha[:12]}"))
    if not read:
        raise InvalidInput(f"{rel} at {at.sha[:12]}: the log is empty")
    return [ln.event for ln in read if ln.event is not None], read[-1].digest, model


def _agents(at: _Commit, metas: dict[str, tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each agent that answered a call: its registry entry and the version each call saw."""
    registry_rel = at.rel(at.layout.registry)
    entries = (
        {a["id"]: a for a in at.json(registry_rel, "registry")["agents"]}
        if at.sha256(registry_rel) is not None
        else {}
    )
    calls: dict[str, dict[str, str]] = {}
    cmds: dict[str, str] = {}
    for call_id, (_, meta) in metas.items():
        calls.setdefault(meta["agent"], {})[call_id] = meta.get("agent_version", "")
        cmds[meta["agent"]] = meta["argv"][0] if meta["argv"] else ""
    found = []
    for agent_id in sorted(calls):
        entry = entries.get(agent_id, {})
        cmd = str(entry.get("cmd", cmds[agent_id]))
        annotations: dict[str, Any] = {"cmd": cmd, "calls": calls[agent_id]}
        if "version" in entry:
            annotations["version_range"] = entry["version"]
        described: dict[str, Any] = {
            "name": f"agent:{agent_id}",
            "uri": f"pkg:generic/{agent_id}",
            "annotations": annotations,
        }
        # A launcher kept in the repository is pinned by content as well as by name.
        launcher = at.sha256(cmd) if cmd and not cmd.startswith("/") else None
        if launcher is not None:
            described["digest"] = {"sha256": launcher}
        found.append(described)
    return found
