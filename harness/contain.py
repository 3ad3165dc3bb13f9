"""Which sandbox each untrusted command gets in one repository, and what a worker's copy
holds. The mechanism is sandbox.py; this is the policy read from the config and registry."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from . import files, proc, registry, sandbox, scope, worker
from .config import Config
from .layout import Layout
from .registry import Agent
from .repo import Repo


@dataclass(frozen=True)
class Containment:
    layout: Layout
    config: Config

    def box(
        self, work: Path, home: Path, agent: Agent | None = None, readonly: tuple[str, ...] = ()
    ) -> sandbox.Box | None:
        """An agent's sandbox, or a verify command's (no agent); None when the config turned
        containment off. Refuses when no sandbox can be made: untrusted code never runs bare
        by accident."""
        if not self.config.contained:
            return None
        sandbox.require()
        hide = (self.layout.root, self.layout.state)
        if agent is not None:
            return replace(agent.box(self.layout.root, work, home, hide), readonly=readonly)
        network = not self.config.verify.isolate_network
        return sandbox.Box(work=work, home=home, network=network, hide=hide)

    def shown(self, path: str) -> bool:
        """What a worker's copy holds: the visible files, but of ai/ only the role briefs."""
        if path.startswith("ai/") and not path.startswith("ai/roles/"):
            return False
        return scope.matches(path, self.config.visible)

    def probe(self, agent: Agent, scratch: Path) -> str:
        """The agent's `--version`, asked inside its sandbox."""
        home, work = _fresh(scratch / "home"), _fresh(scratch / "work")
        box = self.box(work, home, agent)
        return registry.probe(agent, self.layout.root, worker.env_for(agent, home), box)

    def call(
        self,
        agent: Agent,
        git: Repo,
        base: str,
        staging: Path,
        timeouts: dict[str, float],
        scratch: Path,
    ) -> proc.Result:
        """Run the agent on the envelope staged in `staging`, in a copy of the visible files
        of `base` (readonly ones bound read-only) with a private home."""
        home, work = _fresh(scratch / "home"), scratch / "work"
        files.wipe(work)
        try:
            seen = git.export(base, work, keep=self.shown)
            readonly = tuple(p for p in seen if scope.matches(p, self.config.readonly))
            box = self.box(work, home, agent, readonly)
            return worker.run(agent, self.layout.root, work, home, staging, timeouts, box)
        finally:
            files.wipe(work)


def _fresh(folder: Path) -> Path:
    files.wipe(folder)
    folder.mkdir(parents=True)
    return folder
