"""Which sandbox each untrusted command gets in one repository, and what a worker's copy
holds. The mechanism is sandbox.py; this is the policy read from the config and registry."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

import orjson

from harness.base import files, folders, scope
from harness.base.errors import HarnessError
from harness.boundary import egress, proc, proxy, registry, sandbox, sessions, worker
from harness.boundary.held import Held
from harness.boundary.registry import Agent
from harness.repository.layout import Layout
from harness.repository.repo import Repo
from harness.spec.config import Config


class Ahead:
    """Sandboxes started ahead (held.Held), at most one per worker folder, each for the next
    call made there: started as a call ends, while its answer is taken and landed, so the
    next call's sandbox is up when its turn comes. One that is for another command, or that
    binds a folder or file made anew since, is dropped: a bind shows what it was made on."""

    def __init__(self) -> None:
        self._ready: dict[Path, tuple[Held, _Pinned]] = {}
        self._lock = threading.Lock()

    def take(self, scratch: Path, key: tuple[object, ...], box: sandbox.Box) -> Held | None:
        with self._lock:
            found = self._ready.pop(scratch, None)
        if found is None:
            return None
        ready, pinned = found
        same = ready.key == key and pinned.still(_bound(box))
        pinned.close()
        if same:
            return ready
        ready.drop()
        return None

    def hold(self, scratch: Path, ready: Held, box: sandbox.Box) -> None:
        pinned = _Pinned(_bound(box))
        with self._lock:
            found = self._ready.pop(scratch, None)
            self._ready[scratch] = (ready, pinned)
        if found is not None:
            found[1].close()
            found[0].drop()

    def drop(self) -> None:
        """Every sandbox still held, ended unused."""
        with self._lock:
            found, self._ready = list(self._ready.values()), {}
        for ready, pinned in found:
            pinned.close()
            ready.drop()


def _bound(box: sandbox.Box) -> tuple[Path, ...]:
    """What a box binds from the host for its command: its folders and the files it shows."""
    return (
        box.work,
        box.home,
        *box.files,
        *(host for host, _ in box.home_files),
        *(host for host, _ in box.binds),
    )


class _Pinned:
    """Paths held open as bwrap binds them (through symlinks), so each is known again by
    its inode: while one is open, nothing made in its place can be given its inode number.
    A bind shows the file or folder it was made on, not one put there since."""

    def __init__(self, paths: tuple[Path, ...]) -> None:
        self._fds: list[int] = []
        for path in paths:
            try:
                self._fds.append(os.open(path, os.O_PATH))
            except OSError:
                self._fds.append(-1)  # not there: only a bind that may be missing skips it

    def still(self, paths: tuple[Path, ...]) -> bool:
        """Whether each path is still what was pinned, or still missing."""
        for fd, path in zip(self._fds, paths, strict=True):
            try:
                now = path.stat()
            except OSError:
                now = None
            if fd < 0 or now is None:
                if (fd < 0) != (now is None):
                    return False
                continue
            held = os.fstat(fd)
            if (held.st_dev, held.st_ino) != (now.st_dev, now.st_ino):
                return False
        return True

    def close(self) -> None:
        for fd in self._fds:
            if fd >= 0:
                os.close(fd)
        self._fds = [-1] * len(self._fds)


@dataclass(frozen=True)
class Containment:
    layout: Layout
    config: Config
    # Set for a run of many calls (executors.Local): each call's end starts the next one's
    # sandbox, ended by Ahead.drop when the run ends.
    ahead: Ahead | None = field(default=None, compare=False)

    def box(self, work: Path, home: Path, agent: Agent | None = None) -> sandbox.Box | None:
        """An agent's sandbox, or a verify command's (no agent); None when the config turned
        containment off. Refuses when no sandbox can be made: untrusted code never runs bare
        by accident."""
        if not self.config.contained:
            return None
        sandbox.require()
        hide = (self.layout.root, self.layout.state)
        limits = self.config.sandbox_limits
        if agent is not None:
            box = agent.box(self.layout.root, work, home, hide)
            return replace(box, writable=False, limits=limits.merged(agent.limits))
        network = not self.config.verify.isolate_network
        return sandbox.Box(work=work, home=home, network=network, hide=hide, limits=limits)

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
        home = scratch / "home"
        view = self.view(git, base, scratch / "view")
        box = self.box(view, home, agent)
        ahead = self.ahead if box is not None and agent.network != "proxy" else None
        ready = None
        if ahead is not None and box is not None:
            argv, env = agent.argv(self.layout.root), worker.env_for(agent, home)
            ready = ahead.take(scratch, Held.key_for(box, argv, view, env), box)
        if ready is None:
            _fresh(home)  # else hold() made it for this call, and it is as made
        sessions.seed(home, scratch)
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
                ready,
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
        if ahead is not None and box is not None:
            self.hold(ahead, agent, scratch, box)
        return ran

    def hold(self, ahead: Ahead, agent: Agent, scratch: Path, box: sandbox.Box) -> None:
        """Start the sandbox of the next call made in `scratch`, on the same folders: its
        home made afresh now, its copy moved to the call's base before it goes."""
        env = worker.env_for(agent, _fresh(box.home))
        try:
            ready = Held(box, agent.argv(self.layout.root), box.work, env)
        except (HarnessError, OSError):
            return  # harness is stopping, or no sandbox would start: the call starts one
        ahead.hold(scratch, ready, box)

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
            folders.remove(folder)
            git.export(tree, folder, keep=self.shown)
        files.atomic_write(marker, files.dumps({"tree": tree, "visible": visible}))
        return folder


def _fresh(folder: Path) -> Path:
    folders.remove(folder)
    folder.mkdir(parents=True)
    return folder


def _held(view: Path) -> Path:
    """The marker naming what a worker's copy holds; beside it, out of the worker's sight."""
    return view.with_name(view.name + ".held")
