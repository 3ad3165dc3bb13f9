"""`harness agents import`: Claude Code / Gemini CLI agent files into registry entries.

One way: the agent files are read, never written. Each becomes a registry entry launched
through the matching shim, with its body stored as a persona under ai/agents/personas/.
Re-importing replaces only entries an earlier import of the same source made.

An entry runs as itself: its args give the shim `--agent-id <id>`, so the answer names the
registry entry harness called (a shim otherwise answers as `claude` or `gemini`, which
harness refuses as another agent's). Its one capability is its own name, and a plan uses
that name as the role: with no ai/roles/<name>.md and no brief shipped for it, the persona
is the role's brief. It may be, being a person's text from the repository, kept where no
worker's diff may write (ai/); a worker's text is only ever quoted as data, never a brief.
Routed under a role that has a brief (`"agent": "<name>"` on a review subtask, say), the
persona follows that brief.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import files, schemas
from .errors import InvalidInput
from .registry import shim_entry
from .workers import launcher

SOURCES = {"claude": ".claude/agents", "gemini": ".gemini/agents"}
_FRONT = re.compile(r"\A---\n(.*?)\n---\n?(.*)\Z", re.DOTALL)
_ID = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Imported:
    id: str
    file: str
    description: str
    body: str


def parse(text: str, label: str) -> Imported:
    """YAML front matter (name and description required) and the body, the system prompt."""
    match = _FRONT.match(text.replace("\r\n", "\n"))
    if match is None:
        raise InvalidInput(f"{label}: no YAML front matter between --- lines")
    try:
        front = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid"
        raise InvalidInput(f"{label}: front matter is not YAML: {problem}{where}") from None
    if not isinstance(front, dict):
        raise InvalidInput(f"{label}: front matter is not a mapping")
    name, description = front.get("name"), front.get("description")
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(f"{label}: front matter: name is required")
    if not isinstance(description, str) or not description.strip():
        raise InvalidInput(f"{label}: front matter: description is required")
    agent_id = _ID.sub("-", name.strip()).strip("-.")[:64]
    if not agent_id:
        raise InvalidInput(f"{label}: name {name!r} gives no usable id")
    return Imported(agent_id, label, description.strip(), match.group(2).strip() + "\n")


def run(root: Path, source: str, now: str) -> list[str]:
    """Import every agent file of `source`; return the ids written, in file order."""
    folder = root / SOURCES[source]
    if not folder.is_dir():
        raise InvalidInput(f"{SOURCES[source]}: no such folder")
    found = [
        parse(path.read_text("utf-8"), path.relative_to(root).as_posix())
        for path in sorted(folder.glob("*.md"))
    ]
    registry_path = root / "ai" / "agents" / "registry.json"
    data: dict[str, Any] = (
        files.load_json(registry_path, "registry", root)
        if registry_path.exists()
        else {"agents": []}
    )
    ours = [a for a in data["agents"] if a.get("source", {}).get("from") == source]
    theirs = {a["id"] for a in data["agents"] if a not in ours}
    ids = [item.id for item in found]
    clash = next((i for i in ids if i in theirs or ids.count(i) > 1), None)
    if clash is not None:
        raise InvalidInput(f"{SOURCES[source]}: agent id {clash!r} is already taken")
    kept = [a for a in data["agents"] if a not in ours]
    shim = root / "ai" / "agents" / "bin" / f"{source}-cli"
    if found and not shim.exists():
        files.atomic_write(shim, launcher(source).encode())
        shim.chmod(0o755)
    for item in found:
        persona = f"ai/agents/personas/{item.id}.md"
        files.atomic_write(root / persona, f"<!-- {item.description} -->\n{item.body}".encode())
        entry = shim_entry(source, item.id)
        entry |= {
            "args": ["--agent-id", item.id],
            "capabilities": [item.id],
            "persona": persona,
            "source": {"from": source, "file": item.file, "imported_at": now},
        }
        kept.append(entry)
    data["agents"] = kept
    schemas.validate("registry", data, "ai/agents/registry.json")
    files.atomic_write(registry_path, files.pretty(data))
    return ids
