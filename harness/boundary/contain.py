"""Which sandbox each untrusted command gets in one repository, and what a worker's copy
holds. The mechanism is sandbox.py; this is the policy read from the config and registry."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import orjson

from harness.base import files, scope
from harness.boundary import egress, proc, proxy, registry, sandbox, sessions, worker
from harness.boundary.registry import Agent
from harness.repository.layout import Layout
from harness.repository.repo import Repo
from harness.spec.config import Config


@dataclass(frozen=True)
class Containment:
    layout: Layout
    config: Config

    def box(self, work: Path, home: Path, agent: Agent | None = None) -> sandbox.Box | None:
        """An agent's sandbox, or a verify command's (no agent); None when the config turned
        containment off. Refuses when no sandbox can be made: untrusted code never runs bare
        by accident."""
        if not self.config.contained:
            return None
        sandbox.require()
        hide = (self.layout.root, self.layout.state)
        if agent is not None:
            return replace(agent.box(self.layout.root, work, home, hide), writable=False)
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
        env = worker.env_for(agent, home)
        return registry.probe(agent, self.layout.root, env, box, self.layout.state)

    def call(
        self,
        agent: Agent,
        git: Repo,
        base: str,
        staging: Path,
        timeouts: dict[str, float],
        scratch: Path,
    ) -> proc.Result:
        """Run the agent on the envelope staged in `staging`, in the visible files of `base`
        (read-only: its changes travel in its answer) with a private home; under
        `"network": "proxy"`, with a proxy of its own for the call, whose refusals join the
        call's record (staging/egress.json) with the network it had."""
        home = _fresh(scratch / "home")
        sessions.seed(home, scratch)
        view = self.view(git, base, scratch / "view")
        box = self.box(view, home, agent)
        running = None
        if box is not None and agent.network == "proxy":
            user_home = Path(os.environ.get("HOME", "/nonexistent"))
            rules = egress.rules(agent.cli, worker.env_for(agent, home), agent.egress, user_home)
            running = proxy.Proxy(scratch / "egress", rules).start()
            box = replace(box, egress=running.way_out())
        try:
            ran = worker.run(
                agent,
                self.layout.root,
                view,
                home,
                staging,
                timeouts,
                box,
                self.config.max_output_bytes,
            )
        finally:
            if running is not None:
                running.stop()  # no proxy outlives its call, however the call ended
            if box is None:
                # A worker run bare could have written its copy: the next call starts afresh.
                _held(view).unlink(missing_ok=True)
        if box is not None and agent.network != "none":
            egress.record(staging, agent.network, running.refused if running is not None else ())
        if agent.resume:
            sessions.collect(agent.cli, home, scratch)
        return ran

    def view(self, git: Repo, base: str, folder: Path) -> Path:
        """`folder` made to hold exactly what a worker may see of `base`.

        Kept between calls: moving it to another base rewrites only the paths that differ,
        so a call costs the change, not the size of the repository. A marker beside it names
        what it holds; it is removed before any change and written after, so a copy left
        half-moved by a crash is rebuilt whole."""
        tree = git.tree_of(base)
        visible = list(self.config.visible)
        marker = _held(folder)
        held = orjson.loads(marker.read_bytes()) if marker.is_file() else None
        if held == {"tree": tree, "visible": visible}:
            return folder
        marker.unlink(missing_ok=True)
        if held is not None and held["visible"] == visible and folder.is_dir():
            git.export(tree, folder, keep=self.shown, since=held["tree"])
        else:
            files.wipe(folder)
            git.export(tree, folder, keep=self.shown)
        files.atomic_write(marker, files.dumps({"tree": tree, "visible": visible}))
        return folder


def _fresh(folder: Path) -> Path:
    files.wipe(folder)
    folder.mkdir(parents=True)
    return folder


def _held(view: Path) -> Path:
    """The marker naming what a worker's copy holds; beside it, out of the worker's sight."""
    return view.with_name(view.name + ".held")
