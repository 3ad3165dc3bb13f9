"""`--executor ray`: a run's worker calls and checks as Ray tasks on an existing cluster,
the one RAY_ADDRESS names (`pip install 'harness[ray]'`); README "Running on a Ray cluster".

harness, the driver, stays the only writer. A node is sent bytes: the objects of the trees
it works on (Trees.objects: the commit or trees and what they hold, no history, no ref
written anywhere), the envelope and the agent's own files; it runs the call or the checks
in its own sandbox in a throw-away repository (raynode.py) and sends back the files the
call wrote, or the checks' verdict. Ray's retries are off (max_retries=0): a node that
dies under a call is a retryable failure of that call (executing.Lost), harness's retry
rules deciding; under a check, the check simply runs again, being recorded only at its turn.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import ray
from ray import exceptions as rayerr

from harness.base import files
from harness.base.errors import InvalidInput
from harness.boundary import proc, sessions
from harness.boundary.registry import Agent
from harness.checks import sequence
from harness.repository import repo
from harness.step import executing, raynode
from harness.step.task import Task

ADDRESS = "RAY_ADDRESS"
LOSSES = 3  # runs of one check lost with their node before it runs here instead
KEPT = 16  # packs of bases kept in the cluster's object store for calls still to come
AUTH = (
    "a cluster with token authentication (Ray's default) wants RAY_AUTH_MODE=token and its "
    "token in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token"
)
# Why a task's result never came: what the exchange of a call so lost says (no host in it).
GONE: tuple[tuple[type[Exception], str], ...] = (
    (rayerr.NodeDiedError, "its Ray node died"),
    (rayerr.WorkerCrashedError, "its Ray worker process died"),
    (rayerr.OutOfMemoryError, "Ray killed its worker process for memory"),
    (rayerr.ObjectLostError, "what it was sent was lost with a Ray node"),
    (rayerr.TaskCancelledError, "it was cancelled"),
)

T = TypeVar("T")


def connect() -> None:
    """Join the cluster RAY_ADDRESS names, once per process; bad input when it names none,
    or nothing answers there, or the cluster turns harness away. Never starts a cluster."""
    if ray.is_initialized():
        return
    address = os.environ.get(ADDRESS, "").strip()
    what = f"--executor ray: {ADDRESS}={address}"
    if not address:
        raise InvalidInput(
            f"--executor ray: {ADDRESS} is not set: name the cluster's head as host:port "
            "(its GCS port, 6379 unless `ray start --head --port` said otherwise)"
        )
    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit():
        raise InvalidInput(
            f"{what}: not host:port (harness joins the cluster from one of its machines, "
            "as a driver; Ray Client addresses, ray://, are not supported)"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        # Checked first: ray.init waits minutes for a cluster that is not there.
        raise InvalidInput(
            f"{what}: nothing answers there ({exc.strerror or exc}); start the cluster "
            "first (`ray start --head`): harness never starts one"
        ) from None
    # Something answers, so a GCS that turns harness away (a token missing or wrong) is told
    # in seconds, not Ray's 20.
    os.environ.setdefault("RAY_gcs_server_port_wait_time_s", "5")
    try:
        with muted():
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except (ConnectionError, RuntimeError, rayerr.RayError) as exc:
        said = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InvalidInput(f"{what}: the cluster did not take harness: {said}; {AUTH}") from None
    # Ray leaves this one untyped: it returns {resource: amount} over the live nodes.
    resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
    if resources.get("CPU", 0) < 1:
        # Each call and check takes a CPU: with none, they would wait for ever, unsaid.
        raise InvalidInput(f"{what}: the cluster has no CPU to run calls and checks on")


@contextmanager
def muted() -> Iterator[None]:
    """Standard error (the file, fd 2) sent nowhere: Ray's C++ core warns there while it
    connects, whatever its log level says, and would bury the one line harness says."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as sink:
            os.dup2(sink.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class Ray:
    """Calls and checks as Ray tasks, each in a thread of this process that waits for it:
    `slots` calls and twice that many checks at once, as Local runs them."""

    def __init__(self, task: Task, slots: int) -> None:
        if task.worker is not None:
            raise InvalidInput(
                "--executor ray runs the registry's agents in their sandbox on the cluster's "
                "nodes; this run's calls are answered in this process"
            )
        connect()
        self.root, self.config, self.contain = task.layout.root, task.config, task.contain
        self.cache = task.layout.state / "coverage"
        self.threads = ThreadPoolExecutor(3 * slots, thread_name_prefix="harness-ray")
        self.lock = threading.Lock()
        self.packs: dict[str, ray.ObjectRef[bytes]] = {}  # base commit -> its objects, sent
        self.running: set[ray.ObjectRef[Any]] = set()
        self.closed = False
        self.answering = ray.remote(max_retries=0, num_cpus=1)(raynode.answer)
        self.checking = ray.remote(max_retries=0, num_cpus=1)(raynode.check)

    def call(self, call: executing.Call) -> Future[proc.Result]:
        return self.threads.submit(self.called, call)

    def check(self, work: sequence.Work, scratch: Path) -> Future[sequence.Verdict]:
        return self.threads.submit(self.checked, work, scratch)

    def close(self) -> None:
        """Cancel what still runs on the cluster (the caller stopped what runs here), then
        wait for the threads that wait for it."""
        with self.lock:
            self.closed = True
            running = list(self.running)
        for ref in running:
            ray.cancel(ref, force=True)
        self.threads.shutdown(wait=True)

    def called(self, call: executing.Call) -> proc.Result:
        """The call run on a node: its answer written into call.staging, the session store
        its CLI left into call.scratch, as a local call leaves them."""
        proc.pause(call.wait_s)
        staged = raynode.taken(call.staging)
        session = raynode.taken(call.scratch / sessions.IN)
        ref = self.answering.remote(
            call.agent,
            self.config,
            call.base,
            self.pack(call.base),
            own(call.agent, self.root),
            staged,
            session,
            call.timeouts,
        )
        result, wrote, kept = self.wait(ref)
        for name, data in wrote.items():
            files.atomic_write(call.staging / raynode.checked(name), data)
        if kept:
            raynode.put(call.scratch / sessions.OUT, kept)
        return result

    def checked(self, work: sequence.Work, scratch: Path) -> sequence.Verdict:
        """The change's checks on a node; run again when their node is lost, and here after
        LOSSES such runs."""
        git = repo.Repo(self.root)
        try:
            pack = git.objects([work.head, work.tree])
        finally:
            git.close()
        sent = ray.put(pack)
        for _ in range(LOSSES):
            try:
                verdict: sequence.Verdict = self.wait(self.checking.remote(work, sent))
                return verdict
            except executing.Lost:
                if self.closed:
                    raise
        return executing.checked(self.root, self.contain, work, scratch, self.cache)

    def pack(self, base: str) -> ray.ObjectRef[bytes]:
        """The objects of `base` in the cluster's store, sent once for all its calls."""
        with self.lock:
            found = self.packs.get(base)
        if found is not None:
            return found
        git = repo.Repo(self.root)
        try:
            sent = ray.put(git.objects([base]))
        finally:
            git.close()
        with self.lock:
            self.packs[base] = sent
            while len(self.packs) > KEPT:
                del self.packs[next(iter(self.packs))]
        return sent

    def wait(self, ref: ray.ObjectRef[T]) -> T:
        """The task's result; what it raised on the node raised here as itself, and a
        task that never ended as executing.Lost."""
        with self.lock:
            if self.closed:
                ray.cancel(ref, force=True)
            self.running.add(ref)
        try:
            return ray.get(ref)
        except rayerr.RayTaskError as exc:
            cause = exc.cause
            raise cause if isinstance(cause, Exception) else exc from None
        except rayerr.RayError as exc:
            why = next((w for kind, w in GONE if isinstance(exc, kind)), None)
            raise executing.Lost(why or f"Ray failed it ({type(exc).__name__})") from None
        finally:
            with self.lock:
                self.running.discard(ref)


def own(agent: Agent, root: Path) -> raynode.Own:
    """The agent's own files in the repository (its launcher, its persona) as they are in
    the working tree, where a local call runs them from; a program named by an absolute
    path must be installed on the nodes, as its CLI must."""
    found: raynode.Own = {}
    for rel in (agent.cmd, agent.persona):
        if rel is None or Path(rel).is_absolute():
            continue
        path = root / rel
        data = files.read_regular(path, rel, root)
        if data is None:
            raise InvalidInput(f"agent {agent.id}: {rel} not found")
        found[raynode.checked(Path(rel).as_posix())] = (data, os.access(path, os.X_OK))
    return found
