"""ai/agents/registry.json: which agents exist, how to start them, what roles they take."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.base import files
from harness.base.errors import Halted, InvalidInput
from harness.boundary import egress, installed, launchers, probes, proc, sandbox
from harness.spec import limits

# The roles every shim can take: each CLI reads, edits files and answers in JSON.
CODING = ("localized-impl", "micro-refactor", "test-author", "doc-writer", "codegen", "review")
# The shims `harness init` registers: capabilities, and the variables each CLI may see: its
# own keys, and what a gateway, proxy or cloud user points it with. A cloud's credentials
# (AWS keys, a Google credentials file) are the caller's for everything else too: a user of
# Bedrock or Vertex names them in the entry's env or read, where nobody else hands them out.
SHIMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "claude": (
        (*CODING, "plan", "orchestrate", "audit", "merge"),
        (
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_MODEL",
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_USE_VERTEX",
            "ANTHROPIC_VERTEX_PROJECT_ID",
            "CLOUD_ML_REGION",
            "AWS_REGION",
        ),
    ),
    "codex": (
        (*CODING, "plan", "orchestrate", "audit", "merge"),
        ("CODEX_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_MODEL"),
    ),
    "gemini": (
        (*CODING, "audit"),
        (
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_GEMINI_BASE_URL",
            "GEMINI_MODEL",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "GOOGLE_GENAI_USE_VERTEXAI",
        ),
    ),
    # Its shim defines an OpenAI-compatible provider from OPENCODE_BASE_URL, whose key
    # opencode itself reads from OPENCODE_API_KEY.
    "opencode": (
        (*CODING, "audit"),
        ("OPENCODE_API_KEY", "OPENCODE_BASE_URL", "OPENCODE_MODEL"),
    ),
    # GitHub's tokens, or a model provider of the user's own (BYOK).
    "copilot": (
        (*CODING, "audit"),
        (
            "COPILOT_GITHUB_TOKEN",
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "COPILOT_MODEL",
            "COPILOT_PROVIDER_BASE_URL",
            "COPILOT_PROVIDER_API_KEY",
            "COPILOT_PROVIDER_TYPE",
            "COPILOT_PROVIDER_WIRE_API",
        ),
    ),
}


# The tools an entry's `tools` may name, as ai/policy.toml names them, and "bash", the shell
# (which runs only the entry's `commands`). Without `tools` an agent gets what any does.
TOOLS = ("read", "write", "edit", "glob", "grep", "ls", "bash")
WRITE_TOOLS = frozenset({"write", "edit"})


def shim_entry(name: str, agent_id: str | None = None) -> dict[str, object]:
    """A registry entry for one shim, launched from ai/agents/bin/<name>-cli. Its CLI must
    reach its model's API, so its network goes through harness's proxy for the call, to
    that API only (egress.py); its files stay boxed, and `cli` has harness bind the CLI as
    installed."""
    entry: dict[str, object] = {
        "id": agent_id or name,
        "cmd": f"ai/agents/bin/{name}-cli",
        "cli": name,
        "version": ">=0.1",
        "capabilities": list(SHIMS[name][0]),
        "env": list(SHIMS[name][1]),
        "network": "proxy",
    }
    return entry


def default(shims: list[str]) -> dict[str, object]:
    """A registry of the named shims."""
    return {"agents": [shim_entry(name) for name in shims]}


_VERSION = re.compile(r"\d+(?:\.\d+)+(?:[.-]?(?:a|b|rc|dev|post)\d*)*")


@dataclass(frozen=True)
class Agent:
    id: str
    cmd: str
    version: str
    capabilities: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[str, ...]
    timeouts: dict[str, float] | None
    persona: str | None = None
    commands: tuple[str, ...] = ()
    # "none": loopback only; "proxy": only what `egress` names and the model API, through
    # harness's proxy for the call (egress.py); "host": the host's whole network
    network: str = "none"
    egress: tuple[str, ...] = ()  # host:port it may reach beside its model API, under "proxy"
    read: tuple[str, ...] = ()  # host files its sandbox may read: "~/x" or an absolute path
    policy: tuple[str, ...] | None = None  # launch args from ai/policy.toml (policy.py)
    cli: str | None = None  # the agent CLI its command drives, bound as installed
    resume: bool = False  # a retry continues the CLI's own session (sessions.py)
    tools: tuple[str, ...] | None = None  # the only TOOLS it is offered; None: no limit
    model: str | None = None  # the model its CLI is told to use; None: the CLI's own choice
    # Its own limits over [sandbox.limits] (spec/limits.py), for its calls only
    limits: dict[str, int | None] = field(default_factory=dict)

    @property
    def writes(self) -> bool:
        """Whether it may be given a subtask that writes: its tools, if limited, edit files."""
        return self.tools is None or bool(WRITE_TOOLS & set(self.tools))

    def argv(self, root: Path) -> list[str]:
        """How to start it: the command, its args, its persona file and model if it has
        them, and the shell commands it may run; under a policy (or a limit of its tools,
        policy.apply), what that decided instead, which names the commands it keeps."""
        persona = ["--persona", str(root / self.persona)] if self.persona else []
        model = ["--model", self.model] if self.model else []
        allowed = [arg for c in self.commands for arg in ("--allow-command", c)]
        shell = allowed if self.policy is None else list(self.policy)
        return [str(self.executable(root)), *self.args, *persona, *model, *shell]

    def executable(self, root: Path) -> Path:
        path = Path(self.cmd)
        return path if path.is_absolute() else root / path

    def box(self, root: Path, work: Path, home: Path, hide: tuple[Path, ...]) -> sandbox.Box:
        """Its sandbox: `work` and `home`, its program and persona, the files it may read,
        and its CLI as installed with that CLI's own settings."""
        own = [self.executable(root), *([root / self.persona] if self.persona else [])]
        user_home = Path(os.environ.get("HOME", "/nonexistent"))
        read = [(p[2:], p[2:]) for p in self.read if p.startswith("~/")]
        install = self.install(root, hide)
        settings = list(install.settings) if install else []
        return sandbox.Box(
            work=work,
            home=home,
            network=self.network == "host",
            files=tuple(own + [Path(p) for p in self.read if not p.startswith("~/")]),
            home_files=tuple(
                (user_home / src, dest) for src, dest in dict.fromkeys(settings + read)
            ),
            hide=hide,
            binds=install.binds if install else (),
            programs=install.programs if install else (),
        )

    def install(self, root: Path, hide: tuple[Path, ...] = ()) -> installed.Install | None:
        """Its CLI as found on the caller's PATH, or None when the entry names none; Halted
        with what is missing when it cannot be found, or when its install would show the
        repository's .git or ai/ or harness's own state."""
        if self.cli is None:
            return None
        user_home = Path(os.environ.get("HOME", "/nonexistent"))
        path = os.environ.get("PATH", os.defpath)
        try:
            found = installed.find(self.cli, path, user_home)
        except installed.NotInstalled as exc:
            raise Halted(f"agent {self.id}: {exc}") from None
        lacking = installed.missing_for_commands(self.cli, path) if self.commands else []
        if lacking:
            raise Halted(
                f"agent {self.id}: {self.cli} runs its allowed commands in a sandbox of its own, "
                f"which needs {', '.join(lacking)} on the host (apt-get install "
                f"{' '.join(lacking)})"
            )
        for host, _ in found.binds:
            if _exposes(host, root) or any(_holds(host, Path(h)) for h in hide if h != root):
                raise Halted(
                    f"agent {self.id}: {self.cli} is installed at {host}, inside what "
                    "no sandbox may show"
                )
        return found


def load(path: Path, root: Path, raw: bytes | None = None) -> list[Agent]:
    data = files.load_json(path, "registry", root, raw)
    agents = [
        Agent(
            id=a["id"],
            cmd=a["cmd"],
            version=a["version"],
            capabilities=tuple(a["capabilities"]),
            args=tuple(a.get("args", [])),
            env=tuple(a.get("env", [])),
            timeouts=a.get("timeouts"),
            persona=a.get("persona"),
            commands=tuple(a.get("commands", [])),
            network=a.get("network", "none"),
            egress=tuple(a.get("egress", [])),
            read=tuple(a.get("read", [])),
            cli=a.get("cli"),
            resume=bool(a.get("resume", False)),
            tools=tuple(a["tools"]) if "tools" in a else None,
            model=a.get("model"),
            limits=limits.parse(
                a.get("limits", {}), f"ai/agents/registry.json: agent {a['id']}: limits"
            ),
        )
        for a in data["agents"]
    ]
    seen: set[str] = set()
    for agent in agents:
        if agent.id in seen:
            raise InvalidInput(f"ai/agents/registry.json: duplicate agent id {agent.id!r}")
        seen.add(agent.id)
        for target in agent.egress:
            try:
                egress.target_of(target)
            except ValueError as exc:
                raise InvalidInput(
                    f"ai/agents/registry.json: agent {agent.id}: egress {target!r}: {exc}"
                ) from None
        for named in agent.read:
            if not named.startswith("~/") and _exposes(Path(named), root):
                raise InvalidInput(
                    f"ai/agents/registry.json: agent {agent.id}: read {named!r} would show "
                    "it the repository itself"
                )
        try:
            SpecifierSet(agent.version)
        except InvalidSpecifier:
            raise InvalidInput(
                f"ai/agents/registry.json: agent {agent.id}: bad version range {agent.version!r}"
            ) from None
    return agents


def _exposes(path: Path, root: Path) -> bool:
    """The path is the repository, holds it, or lies in its .git or ai/."""
    real, top = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    inside = [top / ".git", top / "ai"]
    return real == top or real in top.parents or any(real == p or p in real.parents for p in inside)


def _holds(path: Path, other: Path) -> bool:
    """`path` is `other` or a folder above it, or lies inside it."""
    real, top = Path(os.path.realpath(path)), Path(os.path.realpath(other))
    return real == top or real in top.parents or top in real.parents


def route(agents: list[Agent], role: str, agent_id: str | None) -> Agent | None:
    """The named agent, else the first, whose capabilities include the role: naming an
    agent picks among those that take the role, it never lends one a role."""
    return next((a for a in agents if role in a.capabilities and agent_id in (None, a.id)), None)


def probe(
    agent: Agent, root: Path, env: dict[str, str], box: sandbox.Box | None, state: Path | None
) -> str:
    """Run `cmd --version` (in its sandbox) and check what it reports against the range;
    return the version seen, which each call's exchange records as `agent_version`. With
    harness's `state` folder, what it printed is kept there for the next command, which
    runs it again only if the agent's files or environment changed (probes.py).

    A shim reports the version of the agent CLI it drives first (`claude 2.1.330 via
    claude-cli 0.1.0`): the range is about that CLI, as in seed 004's `">=2.0.34"`, never
    about the shim. A shim whose CLI is missing or names no version exits non-zero.
    """
    exe = agent.executable(root)
    if not exe.is_file():
        raise Halted(f"agent {agent.id}: {agent.cmd} not found")
    if launchers.exposed(exe):
        raise Halted(
            f"agent {agent.id}: {agent.cmd} runs its shim with `python -m` alone, which "
            "imports a harness/ folder of the worker's copy first: make it `python -I -m` "
            "(or delete it and run `harness init`)"
        )
    cache = state / probes.NAME if state is not None else None
    entries = probes.load(cache) if cache is not None else {}
    digest = probes.key(exe, _drives(agent, env, box), env, box is not None)
    if digest is not None and digest in entries:
        return check_version(agent, entries[digest])
    cwd = box.work if box is not None else root
    code, out, err = proc.capture([str(exe), "--version"], cwd=cwd, env=env, timeout_s=30, box=box)
    if code != 0:
        tail = (err or out).strip().splitlines()[-1:] or [f"exit {code}"]
        raise Halted(f"agent {agent.id}: `{agent.cmd} --version` failed: {tail[0]}")
    version = check_version(agent, out)
    if cache is not None and digest is not None:
        probes.store(cache, entries, digest, out)
    return version


def _drives(agent: Agent, env: dict[str, str], box: sandbox.Box | None) -> list[Path]:
    """The files a shim's `--version` reads beside its own: its CLI as found on the PATH it
    is given, what its sandbox links in (the CLI and its runtime), and the package.json of
    an npm package among them (an update may leave the entry script as it was)."""
    found = shutil.which(agent.cli, path=env.get("PATH", os.defpath)) if agent.cli else None
    programs = [host for _, host in box.programs] if box is not None else []
    drives = ([Path(os.path.realpath(found))] if found else []) + programs
    packages = {root for p in drives if (root := installed.package_root(p)) is not None}
    return drives + sorted(root / "package.json" for root in packages)


def version_in(text: str) -> Version | None:
    """The first version number in `text`, or None."""
    found = _VERSION.search(text)
    try:
        return Version(found.group(0)) if found else None
    except InvalidVersion:
        return None


def check_version(agent: Agent, out: str) -> str:
    """The first version in a `--version` output, if the agent's range holds it; else a
    one-line Halted."""
    version = version_in(out)
    if version is None:
        shown = out.strip()[:80]
        raise Halted(f"agent {agent.id}: no version in `--version` output {shown!r}")
    if version not in SpecifierSet(agent.version, prereleases=True):
        raise Halted(f"agent {agent.id}: version {version} outside {agent.version}")
    return str(version)
