"""`harness agents import`: Claude Code / Gemini CLI agent files into registry entries.

One way: the agent files are read, never written. Each becomes a registry entry launched
through the matching shim, with its body stored as a persona under ai/agents/personas/.
Re-importing replaces only entries an earlier import of the same source made. The files are
read as `plan import` reads its files (importing.read_text): regular files of the
repository, no symlink on the way, the folder itself included, at most 1 MB of UTF-8; any
refused file refuses the whole import, and nothing is written.

An entry runs as itself: its args give the shim `--agent-id <id>`, so the answer names the
registry entry harness called (a shim otherwise answers as `claude` or `gemini`, which
harness refuses as another agent's). Its one capability is its own name, and a plan uses
that name as the role: with no ai/roles/<name>.md and no brief shipped for it, the persona
is the role's brief. It may be, being a person's text from the repository, kept where no
worker's diff may write (ai/); a worker's text is only ever quoted as data, never a brief.
Routed under a role that has a brief (`"agent": "<name>"` on a review subtask, say), the
persona follows that brief.

An agent keeps the limits its file declares. Its tools (Claude's `tools:` and
`disallowedTools:`, a `permissionMode: plan`; Gemini's `tools:` and `policy.tools.exclude`)
become the entry's `tools`, in ai/policy.toml's names: its CLI is offered no other, and an
agent with neither write nor edit is given no subtask that writes (preflight.py). Deny wins:
a tool name harness cannot map (a web tool, an MCP tool, a rule like `Bash(git log:*)`) maps
to nothing, so the agent gets fewer tools than declared, never more; a disallowed rule on a
tool (`Bash(rm:*)`) takes the whole tool away. `*` is every tool. Its `model:` (but
`inherit`, the CLI's own choice) becomes the entry's `model`. What the file declared is kept
as written in the entry's `source.declared`.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.base import files, schemas
from harness.base.errors import InvalidInput
from harness.boundary.launchers import launcher
from harness.boundary.registry import TOOLS, shim_entry
from harness.importers import gleeyaml, importing

SOURCES = {"claude": ".claude/agents", "gemini": ".gemini/agents"}
_FRONT = re.compile(r"\A---\n(.*?)\n---\n?(.*)\Z", re.DOTALL)
_ID = re.compile(r"[^A-Za-z0-9._-]+")
# As schemas/registry.schema.json has a model: never read as a flag of the CLI.
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]{0,199}")
ALL = "*"

# Each CLI's tool names, as harness's: what the CLI would do with that tool, no more.
# A Claude NotebookEdit edits only notebooks, so it grants no edit of every file.
TOOL_NAMES: dict[str, dict[str, str]] = {
    "claude": {
        "Read": "read",
        "Grep": "grep",
        "Glob": "glob",
        "LS": "ls",
        "Edit": "edit",
        "MultiEdit": "edit",
        "Write": "write",
        "Bash": "bash",
    },
    "gemini": {
        "read_file": "read",
        "read_many_files": "read",
        "grep_search": "grep",
        "search_file_content": "grep",  # its name before grep_search
        "glob": "glob",
        "list_directory": "ls",
        "replace": "edit",
        "write_file": "write",
        "run_shell_command": "bash",
    },
}
# Where each file says which tools it may not use: a path of keys into the front matter.
DISALLOWED = {"claude": ("disallowedTools",), "gemini": ("policy", "tools", "exclude")}
# Claude's read-only permission mode: plan mode runs no tool that edits or runs commands.
_PLAN_MODE = ("write", "edit", "bash")


@dataclass(frozen=True)
class Imported:
    id: str
    file: str
    description: str
    body: str
    tools: tuple[str, ...] | None = None  # harness's names; None: none declared
    model: str | None = None
    declared: dict[str, Any] | None = None  # the file's tools and model, as written


def parse(text: str, label: str, source: str) -> Imported:
    """YAML front matter (name and description required; the tools and model it declares)
    and the body, the system prompt."""
    match = _FRONT.match(text.replace("\r\n", "\n"))
    if match is None:
        raise InvalidInput(f"{label}: no YAML front matter between --- lines")
    try:
        front = gleeyaml.load(match.group(1))
    except gleeyaml.Refused as exc:
        line = exc.where[0] + 1  # the front matter starts on the file's second line
        raise InvalidInput(f"{label}: front matter: {exc.what} (line {line})") from None
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
    allowed = _names(front, ("tools",), label)
    denied = _names(front, DISALLOWED[source], label)
    plan_mode = source == "claude" and front.get("permissionMode") == "plan"
    model = _model(front.get("model"), label)
    declared = {
        key: value
        for key, value in (
            ("tools", allowed),
            ("disallowed", denied),
            ("permission_mode", "plan" if plan_mode else None),
            ("model", front.get("model")),
        )
        if value is not None
    }
    limited = allowed is not None or denied is not None or plan_mode
    tools = _tools(source, allowed, denied or [], plan_mode) if limited else None
    body = match.group(2).strip() + "\n"
    return Imported(agent_id, label, description.strip(), body, tools, model, declared or None)


def _names(front: dict[str, Any], keys: tuple[str, ...], label: str) -> list[str] | None:
    """The tool names at `keys` (a list, or one comma-separated string as Claude writes
    them); None when the file names none there."""
    found: Any = front
    for key in keys:
        if not isinstance(found, dict) or found.get(key) is None:
            return None
        found = found[key]
    where = ".".join(keys)
    if isinstance(found, str):
        found = found.split(",")
    if not isinstance(found, list) or not all(isinstance(n, str) for n in found):
        raise InvalidInput(f"{label}: front matter: {where} is not a list of tool names")
    return [n.strip() for n in found if n.strip()]


def _tools(
    source: str, allowed: list[str] | None, denied: list[str], plan_mode: bool
) -> tuple[str, ...]:
    """harness's tools for what the file declares: what `allowed` maps to (all, if it
    names none), less what any of `denied` touches. Matched exactly when allowing and
    case-blind when denying, so a misspelling can only take away."""
    names = TOOL_NAMES[source]
    if allowed is None or ALL in allowed:
        granted = set(TOOLS)
    else:
        granted = {names[n] for n in allowed if n in names}
    blind = {k.casefold(): v for k, v in names.items()}
    for rule in denied:
        tool = rule.split("(", 1)[0].strip()
        if tool == ALL:
            granted.clear()
        elif tool.casefold() in blind:
            granted.discard(blind[tool.casefold()])
    if plan_mode:
        granted -= set(_PLAN_MODE)
    return tuple(t for t in TOOLS if t in granted)


def _model(value: object, label: str) -> str | None:
    if value is None or value == "inherit":
        return None
    if not isinstance(value, str) or not _MODEL.fullmatch(value):
        raise InvalidInput(f"{label}: front matter: model {value!r} is not a model name")
    return value


def run(root: Path, source: str, now: str) -> list[str]:
    """Import every agent file of `source`; return the ids written, in file order."""
    folder = SOURCES[source]
    found = []
    for name in _listed(root, folder):
        rel = f"{folder}/{name}"
        text = importing.read_text(root, rel)
        if text is None:  # gone since it was listed
            raise InvalidInput(f"{rel}: no such file")
        found.append(parse(text, rel, source))
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
        raise InvalidInput(f"{folder}: agent id {clash!r} is already taken")
    kept = [a for a in data["agents"] if a not in ours]
    writes: dict[Path, bytes] = {}
    for item in found:
        persona = f"ai/agents/personas/{item.id}.md"
        writes[root / persona] = f"<!-- {item.description} -->\n{item.body}".encode()
        kept.append(_entry(source, item, persona, now))
    data["agents"] = kept
    schemas.validate("registry", data, "ai/agents/registry.json")
    shim = root / "ai" / "agents" / "bin" / f"{source}-cli"
    if found and not shim.exists():
        writes[shim] = launcher(source).encode()
    writes[registry_path] = files.pretty(data)
    for path in writes:  # every write refused before the first is made
        files.check_folders(root, path)
    for path, content in writes.items():
        files.atomic_write(path, content)
        if path == shim:
            shim.chmod(0o755)
    return ids


def _entry(source: str, item: Imported, persona: str, now: str) -> dict[str, Any]:
    entry: dict[str, Any] = shim_entry(source, item.id)
    entry |= {
        "args": ["--agent-id", item.id],
        "capabilities": [item.id],
        "persona": persona,
        "source": {"from": source, "file": item.file, "imported_at": now},
    }
    if item.tools is not None:
        entry["tools"] = list(item.tools)
    if item.model is not None:
        entry["model"] = item.model
    if item.declared is not None:
        entry["source"]["declared"] = item.declared
    return entry


def _listed(root: Path, folder: str) -> list[str]:
    """The names of the agent files (`*.md`) directly in `folder`, sorted. Each folder on the
    way must be a plain folder: one swapped for a symlink after this look is still refused
    when each file is read, which opens every component without following a symlink."""
    here = root
    parts = folder.split("/")
    for depth, part in enumerate(parts):
        here = here / part
        where = "/".join(parts[: depth + 1])
        try:
            mode = here.lstat().st_mode
        except FileNotFoundError:
            raise InvalidInput(f"{folder}: no such folder") from None
        if stat.S_ISLNK(mode):
            raise InvalidInput(f"{where}: a symlink: an import reads only the repository's own")
        if not stat.S_ISDIR(mode):
            raise InvalidInput(f"{where}: not a folder")
    return sorted(name for name in os.listdir(here) if name.endswith(".md"))
