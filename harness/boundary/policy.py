"""ai/policy.toml: what each agent's tools may touch, in seed 003's form.

    default_deny = true            # a tool without a section is off
    [read]                         # read, write, edit, glob, grep, ls: tools on paths
    enabled = true
    allow = ["$WORKSPACE/**"]      # path globs; $WORKSPACE or ~ may start one
    deny = ["~/.ssh/*"]
    [bash]
    allowlist = ["pytest *"]       # command patterns
    denylist = ["git push *"]
    [web_fetch] [web_search] [memory_read] [memory_write]   # enabled (and the seed's
                                   # allow_domains and rate_limit, accepted and unused)

What it means for one registry agent (`Policy.effective`):
- A tool is off when its section says `enabled = false`, or when `default_deny` is set and
  the file has no section for it. A path tool whose `allow` is empty, or missing under
  default_deny, may touch nothing, so it is off too; so is the shell with an empty
  allowlist, or none under default_deny.
- The shell: the registry entry's `commands` grant, the policy bounds. A listed command is
  kept when the shell is on, no denylist pattern names it and, when there is an allowlist,
  one of its patterns does. Deny is checked first and always wins.
- The policy only takes away: no CLI gets a tool it would not get without a policy file
  (web and memory tools are never given), and without the file nothing changes.
- A registry entry's `tools` (an imported agent's declared tools) takes away the same way,
  policy file or not: a tool it does not name is off, and without "bash" every command.

A command pattern is a glob over a command's words joined by single spaces, and names every
command starting with the words it names: `git log` and `git log *` both name `git log -3`,
never `git logs`. A relative path glob is relative to $WORKSPACE, the throw-away copy the
CLI works in; `~` is the CLI's home.

The sandbox shows a shim nothing of ai/ but ai/roles/, so an agent's part of the policy
reaches its shim as one launch argument, `--policy JSON` (`Effective.wire`), which the shim
turns into its CLI's flags and checks what the CLI reports having done against.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from harness.base import files, schemas
from harness.base.errors import InvalidInput
from harness.boundary import commands, launchers
from harness.boundary.registry import Agent

if TYPE_CHECKING:  # each shim imports this module, and must start without git (layout's)
    from harness.repository.layout import Layout

LABEL = "ai/policy.toml"
PATH_TOOLS = ("read", "write", "edit", "glob", "grep", "ls")
TOOLS = (*PATH_TOOLS, "web_fetch", "web_search", "memory_read", "memory_write")
# The keys of a section that allow and deny: paths for the path tools, commands for bash.
_KEYS = {tool: ("allow", "deny") for tool in PATH_TOOLS} | {"bash": ("allowlist", "denylist")}
WORKSPACE = "$WORKSPACE"


@dataclass(frozen=True)
class Rules:
    """What a tool that is on may touch: `allow` None is anything the sandbox shows."""

    allow: tuple[str, ...] | None
    deny: tuple[str, ...] = ()


@dataclass(frozen=True)
class Effective:
    """One agent's part of the policy: what its shim is told."""

    commands: tuple[str, ...]  # the registry's commands the policy keeps
    denied: tuple[str, ...]  # command patterns refused even within those
    tools: dict[str, Rules]  # the tools that are on, but the shell (see commands)

    def wire(self) -> str:
        """The `--policy` argument: canonical JSON, so the same policy is the same argv."""
        tools = {t: {"allow": r.allow, "deny": r.deny} for t, r in self.tools.items()}
        doc = {"commands": self.commands, "deny_commands": self.denied, "tools": tools}
        return files.dumps(doc).decode()

    @classmethod
    def from_wire(cls, text: str) -> Effective:
        """The `--policy` argument read back; ValueError names what is wrong with it."""
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise ValueError("not JSON") from None
        if not isinstance(doc, dict) or set(doc) != {"commands", "deny_commands", "tools"}:
            raise ValueError("not an object of commands, deny_commands and tools")
        tools = doc["tools"]
        if not isinstance(tools, dict) or not set(tools) <= set(TOOLS):
            raise ValueError(f"tools: only {', '.join(TOOLS)}")
        rules = {}
        for name, value in tools.items():
            if not isinstance(value, dict) or set(value) != {"allow", "deny"}:
                raise ValueError(f"tools.{name}: not an object of allow and deny")
            where = f"tools.{name}"
            allow = None if value["allow"] is None else _strings(value["allow"], where)
            rules[name] = Rules(allow, _strings(value["deny"], where))
        commands = _strings(doc["commands"], "commands")
        return cls(commands, _strings(doc["deny_commands"], "deny_commands"), rules)

    def within(self, tools: Sequence[str] | None) -> Effective:
        """This part cut to the tools a registry entry limits its agent to (None: no limit):
        a tool it does not name is off, and without "bash" so is every command."""
        if tools is None:
            return self
        kept = {t: r for t, r in self.tools.items() if t in tools}
        return Effective(self.commands if "bash" in tools else (), self.denied, kept)

    def path_refusal(self, tool: str, path: str, workspace: str, home: str) -> str | None:
        """Why the CLI's `tool` may not touch `path` (absolute, or relative to the
        workspace), or None: the tool is off, a deny glob matches (first), or allow globs
        are given and none does."""
        rules = self.tools.get(tool)
        if rules is None:
            return f"the policy turns {tool} off"
        where = _absolute(path, workspace)
        deny = [_absolute(expand(g, workspace, home), workspace) for g in rules.deny]
        if _path_matches(where, deny):
            return f"a deny glob of [{tool}] matches it"
        if rules.allow is not None:
            allow = [_absolute(expand(g, workspace, home), workspace) for g in rules.allow]
            if not _path_matches(where, allow):
                return f"no allow glob of [{tool}] matches it"
        return None


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: not a list of strings")
    return tuple(value)


@dataclass(frozen=True)
class Policy:
    """ai/policy.toml as read and checked."""

    default_deny: bool
    sections: dict[str, dict[str, Any]]

    def rules(self, tool: str) -> Rules | None:
        """The tool's rules when it is on; None when it is off."""
        section = self.sections.get(tool)
        if section is None:
            return None if self.default_deny else Rules(None)
        if not section.get("enabled", True):
            return None
        if tool not in _KEYS:
            return Rules(None)
        allow_key, deny_key = _KEYS[tool]
        allow = section.get(allow_key)
        if allow == [] or (allow is None and self.default_deny):
            return None
        return Rules(None if allow is None else tuple(allow), tuple(section.get(deny_key, ())))

    def effective(self, listed: Sequence[str]) -> Effective:
        """An agent's part, given the shell commands its registry entry lists."""
        shell = self.rules("bash")
        tools = {t: r for t in TOOLS if (r := self.rules(t)) is not None}
        if shell is None:
            return Effective((), (), tools)
        kept = tuple(
            c
            for c in listed
            if commands.denial(c, shell.deny) is None
            and (shell.allow is None or any(commands.matches(c, p) for p in shell.allow))
        )
        return Effective(kept, shell.deny, tools)


def load(layout: Layout) -> Policy | None:
    """ai/policy.toml read and checked; None when there is none (no policy: as before)."""
    raw = files.read_regular(layout.policy, LABEL, layout.root)
    if raw is None:
        return None
    data = files.load_toml(raw, LABEL)
    schemas.validate("policy", data, LABEL)
    for tool in PATH_TOOLS:
        for key in ("allow", "deny"):
            for i, found in enumerate(data.get(tool, {}).get(key, [])):
                problem = _variable_problem(found)
                if problem is not None:
                    raise InvalidInput(f"{LABEL}: $.{tool}.{key}[{i}]: {found!r}: {problem}")
    sections = {k: dict(v) for k, v in data.items() if isinstance(v, dict)}
    return Policy(bool(data.get("default_deny", False)), sections)


def _variable_problem(path_glob: str) -> str | None:
    if path_glob.startswith("~") and not (path_glob == "~" or path_glob.startswith("~/")):
        return "~ stands alone or before a /: ~user is not expanded"
    rest = path_glob.removeprefix(WORKSPACE) if _starts(path_glob, WORKSPACE) else path_glob
    if "$" in rest:
        return f"only {WORKSPACE}, at the start, is expanded"
    return None


def _starts(path_glob: str, var: str) -> bool:
    return path_glob == var or path_glob.startswith(var + "/")


# The longest `--policy` argument: Linux refuses to start a program with a longer one.
MAX_ARG = 100_000


# What no ai/policy.toml means: every tool on, as far as the policy goes.
_NONE = Policy(default_deny=False, sections={})


def apply(agents: list[Agent], found: Policy | None, root: Path) -> list[Agent]:
    """The agents with their part of the policy as launch arguments; as they are without
    one, but for an agent whose registry entry limits its `tools`, which gets that limit
    the same way. A harness shim gets it all as `--policy`; any other program speaks only
    `--allow-command`, so it gets the commands the policy keeps that way."""
    applied = []
    for agent in agents:
        if found is None and agent.tools is None:
            applied.append(agent)
            continue
        part = (found or _NONE).effective(agent.commands).within(agent.tools)
        if launchers.shim_of(agent.executable(root)) is None:
            args = tuple(arg for c in part.commands for arg in ("--allow-command", c))
        else:
            args = ("--policy", part.wire())
            if len(args[1].encode()) > MAX_ARG:
                raise InvalidInput(
                    f"{LABEL}: agent {agent.id}'s part is over {MAX_ARG} bytes, more than "
                    "its command line can carry"
                )
        applied.append(replace(agent, policy=args))
    return applied


# -- commands ---------------------------------------------------------------------------------


def refusal(command: str, allowed: Iterable[str], denied: Iterable[str]) -> str | None:
    """Why a command a CLI ran is refused, or None when it may run: it is too long to check,
    a denylist pattern names a command it may run, in any form (checked first:
    commands.denial), no allowed prefix names it with every option in it that runs another
    program (commands.allowance), or it holds shell syntax."""
    if len(command.split()) > commands.MAX_WORDS:  # the checks take time as its square
        return f"over {commands.MAX_WORDS} words, more than harness checks"
    hit = commands.denial(command, denied)
    if hit is not None:
        return f"the policy denies ({hit})"
    words = commands.plain(command)
    return "not on the allowlist" if words is None else commands.allowance(words, allowed)


# -- paths ------------------------------------------------------------------------------------


def expand(path_glob: str, workspace: str, home: str) -> str:
    """The glob with a leading $WORKSPACE or ~ replaced by the folder it stands for."""
    for var, value in ((WORKSPACE, workspace), ("~", home)):
        if _starts(path_glob, var):
            return (value.rstrip("/") + path_glob[len(var) :]) or "/"
    return path_glob


def _absolute(path: str, workspace: str) -> str:
    return path if path.startswith("/") else f"{workspace.rstrip('/')}/{path}"


def _path_matches(path: str, globs: list[str]) -> bool:
    # Imported here, as in scope.py: most commands never judge a path against the policy.
    from wcmatch import glob

    # A leading ! is part of a name here, never a negation.
    flags = glob.GLOBSTAR | glob.DOTGLOB
    return bool(globs) and glob.globmatch(path, globs, flags=flags)
