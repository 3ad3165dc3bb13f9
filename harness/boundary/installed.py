"""Where an agent CLI is installed, and what of it a sandbox must show for it to start.

A CLI on the user's PATH is almost never a plain file: `npm install -g`, a user prefix, nvm
or a project's `node_modules/.bin` put a symlink there that leads into a package folder, which
needs its dependencies and a runtime (node); Claude's own installer links to a native binary
in a versions folder. The sandbox shows none of the user's home, so binding the PATH folder is
not enough. This module follows the command to its real file and names exactly what it needs,
read-only: the package and the packages it depends on as node would find them, the runtime
its `#!` line asks for, and the CLI's own non-secret settings in the home.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

# Each CLI's own settings: what it reads of the home that holds no secret (its keys come from
# the environment or from files the registry names in `read`), so it behaves inside the
# sandbox as its user configured it. Each is (where in the user's home, where in the
# sandbox's home). gemini's lands beside the place gemini reads it: its shim writes that
# file, the user's settings with its own on top (a settings file gemini would take from the
# system or the workspace must be owned by root or sit in a trusted workspace, neither of
# which a sandbox offers).
SETTINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "claude": ((".claude/settings.json", ".claude/settings.json"),),
    "codex": ((".codex/config.toml", ".codex/config.toml"),),
    "gemini": ((".gemini/settings.json", ".gemini/user-settings.json"),),
}

# Where each CLI keeps its sessions under its home (harness/sessions.py).
SESSIONS: dict[str, tuple[str, ...]] = {
    "claude": (".claude/projects",),
    "codex": (".codex/sessions",),
    "gemini": (".gemini/tmp",),
    "opencode": (".local/share/opencode",),
    "copilot": (".copilot/session-state",),
}

# How each CLI is installed, for the fix a missing one is reported with.
PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
    "opencode": "opencode-ai",
    "copilot": "@github/copilot",
}

# Host programs a CLI needs beside itself, and when: claude runs the commands the registry
# allows in its own Bash sandbox, which needs socat, and refuses to start without it.
NEEDS_FOR_COMMANDS: dict[str, tuple[str, ...]] = {"claude": ("socat",)}

# A hostile or broken package tree could name dependencies without end.
MAX_PACKAGES = 4000
# Enough of a file to read its `#!` line.
HEAD = 256


@dataclass(frozen=True)
class Install:
    """One CLI as the sandbox must show it: `binds` (host path, path inside) read-only, and
    `programs` (name, host file) linked from BIN so a lookup on PATH finds them."""

    command: str
    program: Path
    binds: tuple[tuple[Path, Path], ...]
    programs: tuple[tuple[str, Path], ...]
    settings: tuple[tuple[str, str], ...]  # (in the user's home, in the sandbox's), if present


class NotInstalled(Exception):
    """The command cannot be found or followed: the message says what, in one line."""


def find(command: str, path: str, home: Path) -> Install:
    """`command` (a name looked up on `path`, or an absolute file) as the sandbox must show
    it. Raises NotInstalled with what is missing."""
    found = command if os.path.isabs(command) else shutil.which(command, path=path)
    if found is None or not os.path.isfile(found):
        named = PACKAGES.get(Path(command).name)
        fix = f" (npm install -g {named})" if named else ""
        raise NotInstalled(f"{command} not found on PATH{fix}")
    real = Path(os.path.realpath(found))
    shown: dict[Path, Path] = {}  # inside the sandbox -> on the host
    package = package_root(real)
    for tree in [package, *dependencies(package)] if package else [real]:
        shown[tree] = tree
    programs = [(Path(command).name, real)]
    runtime = interpreter(real)
    if runtime is not None:
        name, via_env = runtime
        where = shutil.which(name, path=path) if via_env else name
        if where is None:
            raise NotInstalled(f"{command} needs {name}, which is not on PATH")
        runtime_real = Path(os.path.realpath(where))
        # A runtime that is itself a script is a version manager's shim (pyenv's, say),
        # which works only with the manager's whole state: the sandbox's PATH finds one.
        if interpreter(runtime_real) is None:
            tree = _prefix(runtime_real)
            # `~/.local/bin/node` would make all of ~/.local its install: the binary alone.
            if tree.parent == Path(os.path.realpath(home)):
                tree = runtime_real
            shown[tree] = tree
            if via_env:
                programs.append((name, runtime_real))
            elif Path(name) != runtime_real:
                shown[Path(name)] = runtime_real  # an absolute `#!` path resolves inside too
    for host in shown.values():
        _refuse_home(host, home, command)
    return Install(
        command=command,
        program=real,
        binds=tuple(sorted((host, seen) for seen, host in shown.items() if not _system(seen))),
        programs=tuple(programs),
        settings=SETTINGS.get(Path(command).name, ()),
    )


def missing_for_commands(command: str, path: str) -> list[str]:
    """The host programs `command` needs to run allowed shell commands that are not on
    `path`."""
    needed = NEEDS_FOR_COMMANDS.get(Path(command).name, ())
    return [name for name in needed if shutil.which(name, path=path) is None]


def package_root(real: Path) -> Path | None:
    """The npm package folder holding `real`: the nearest folder with a package.json that
    sits in node_modules (or in a scope folder there)."""
    for folder in real.parents:
        parent = folder.parent
        in_modules = parent.name == "node_modules" or (
            parent.name.startswith("@") and parent.parent.name == "node_modules"
        )
        if in_modules and (folder / "package.json").is_file():
            return folder
    return None


def dependencies(package: Path) -> list[Path]:
    """Every package `package` needs, found as node finds them: in its own node_modules,
    then in each node_modules above it. Optional ones that are absent (another platform's
    binary) are skipped."""
    seen: set[Path] = {package}
    queue = [package]
    found: list[Path] = []
    while queue:
        current = queue.pop(0)
        for name in _needs(current):
            where = _resolve(current, name)
            if where is None or where in seen:
                continue
            if len(seen) >= MAX_PACKAGES:
                raise NotInstalled(f"{package}: more than {MAX_PACKAGES} packages to follow")
            seen.add(where)
            found.append(where)
            queue.append(where)
    return found


def _needs(package: Path) -> Iterator[str]:
    try:
        doc = orjson.loads((package / "package.json").read_bytes()[: 4 << 20])
    except (OSError, orjson.JSONDecodeError):
        return
    if not isinstance(doc, dict):
        return
    for key in ("dependencies", "optionalDependencies"):
        names = doc.get(key)
        if isinstance(names, dict):
            yield from (n for n in names if isinstance(n, str) and _plain(n))


def _plain(name: str) -> bool:
    """A package name that is one folder or one scoped pair: nothing that walks elsewhere."""
    parts = name.split("/")
    return (
        0 < len(parts) <= 2
        and all(p not in ("", ".", "..") for p in parts)
        and (len(parts) == 1 or parts[0].startswith("@"))
    )


def _resolve(start: Path, name: str) -> Path | None:
    for folder in [start, *start.parents]:
        if folder.name == "node_modules":
            continue
        candidate = folder / "node_modules" / name
        if (candidate / "package.json").is_file():
            return Path(os.path.realpath(candidate))
    return None


def interpreter(real: Path) -> tuple[str, bool] | None:
    """The runtime a script's `#!` line names, and whether it is looked up on PATH
    (`#!/usr/bin/env node`, `#!/usr/bin/env -S node --flag`); None for a binary."""
    try:
        with real.open("rb") as fh:
            head = fh.read(HEAD)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        rest = [w for w in words[1:] if not w.startswith("-")]
        return (rest[0], True) if rest else None
    return words[0], False


def _prefix(runtime: Path) -> Path:
    """The install a runtime belongs to: `<prefix>/bin/node` needs `<prefix>/lib` too."""
    return runtime.parent.parent if runtime.parent.name == "bin" else runtime.parent


def _system(path: Path) -> bool:
    """Already in every sandbox, read-only."""
    return any(path == top or top in path.parents for top in (Path("/usr"), Path("/etc")))


def _refuse_home(tree: Path, home: Path, command: str) -> None:
    """A CLI's tree may lie in the home, never be it or hold it: that would show it all."""
    home = Path(os.path.realpath(home))
    if tree == Path("/") or tree == home or tree in home.parents:
        raise NotInstalled(f"{command}: its install at {tree} would show the whole home")
