"""`harness run --executor ray` on a real Ray cluster started here (a head and worker nodes,
token authentication on): the same commits and log bytes as the local executor, replay
of the Ray run, a node lost mid-call and the call retried, and the refusals with twins."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.base.errors import InvalidInput

from .conftest import CLOCK, Sample, new_file_patch, ok, scripted, subtask
from .scripted import Scripted, load, repository

pytestmark = pytest.mark.e2e

IDS = ["P1", "P2", "P3", "P4"]
TOKEN = "harness-test-token-0123456789abcdef"  # the cluster's: a driver without it is refused
AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}
HARNESS = [sys.executable, "-m", "harness.cli"]


def _ray() -> Any:
    """Ray, or a skip where it is not installed (CI, which installs it, fails instead)."""
    if os.environ.get("HARNESS_REQUIRE_RAY"):
        import ray

        return ray
    return pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head with no CPU (no task runs there) and one worker node; everything Ray writes
    goes in a short temporary folder (its sockets' paths must stay short), removed after."""
    _ray()
    from ray._raylet import Config
    from ray.cluster_utils import Cluster

    tmp = Path(tempfile.mkdtemp(prefix="hr-", dir="/tmp"))
    saved = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "TMPDIR", *AUTH)}
    # The nodes' temporary folders too: a node removed mid-call leaves its call's behind.
    os.environ.update(RAY_TMPDIR=str(tmp), TMPDIR=str(tmp), **AUTH)
    Config.initialize("")  # Ray read its auth mode when imported: read it again
    made = None
    try:
        made = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 0,
                "temp_dir": str(tmp / "ray"),
                "include_dashboard": False,
            },
        )
        made.add_node(num_cpus=2)
        made.wait_for_nodes()
        made.tmp = tmp
        yield made
    finally:
        if made is not None:
            made.shutdown()
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        Config.initialize("")
        shutil.rmtree(tmp, ignore_errors=True)


def on(made: Any) -> dict[str, str]:
    """The environment of a harness run on the cluster `made`."""
    return {"RAY_ADDRESS": made.address, **AUTH}


def independent(sid: str) -> dict[str, Any]:
    path = f"src/{sid.lower()}.py"
    return subtask(sid, write_scope="src/**", creates=[path])


def creating(sid: str, sleep: float = 0.0, **more: Any) -> dict[str, Any]:
    path = f"src/{sid.lower()}.py"
    return ok(sid, (path, new_file_patch(path, [f"NAME = {sid!r}"]))) | {"sleep_s": sleep, **more}


def parallel(where: Path) -> Sample:
    """Four subtasks, each creating a file, their calls ending in reverse plan order; the
    demo's checks (build, tests twice) on each landing."""
    where.mkdir()
    s = scripted(where)
    s.write_plan([independent(sid) for sid in IDS])
    s.write_script([creating(sid, 0.3 * (len(IDS) - i)) for i, sid in enumerate(IDS)])
    return s


def test_a_run_on_the_cluster_records_what_a_local_run_does(tmp_path: Path, cluster: Any) -> None:
    local, remote = parallel(tmp_path / "local"), parallel(tmp_path / "ray")
    # One script for both, so that their registries, which name it, are the same bytes.
    reg = "ai/agents/registry.json"
    (remote.root / reg).write_bytes((local.root / reg).read_bytes())
    res = local.cli("run", "demo", "--max-parallel", "4")
    assert res.returncode == 0, res.stderr
    started = time.monotonic()
    res = remote.cli("run", "demo", "--max-parallel", "4", "--executor", "ray", env=on(cluster))
    assert res.returncode == 0, res.stderr
    print(f"ray run: {time.monotonic() - started:.1f} s")
    # Every byte recorded is the same: the log, each exchange and the checks' evidence
    # (made on the node, paths written as the repository names them), hence every commit.
    log = "ai/tasks/demo/progress.ndjson"
    assert (remote.root / log).read_bytes() == (local.root / log).read_bytes()
    assert remote.git("rev-parse", "HEAD") == local.git("rev-parse", "HEAD")
    # Nothing of the run was left in the repository but its record.
    assert remote.git("status", "--porcelain") == ""
    res = remote.cli("replay", "demo")
    assert res.returncode == 0, res.stderr


def test_a_node_lost_mid_call_and_mid_check_the_call_retried_the_check_run_again(
    tmp_path: Path, cluster: Any
) -> None:
    from harness.step import rayexec

    s = scripted(tmp_path)
    s.write_plan([independent("P1"), independent("P2")])
    s.write_script([creating("P1"), creating("P2", 4.0)])
    (s.root / "ai/harness.toml").write_text(
        '[identity]\nname = "harness"\nemail = "harness@example.invalid"\n\n'
        # Slow on P1's tree alone (P2's holds src/p2.py too): the node goes under it.
        '[verify]\ntest = "test -e src/p2.py || sleep 3"\n'
    )
    doomed = next(n for n in cluster.worker_nodes)
    left = set(cluster.tmp.glob("harness-*"))
    cmd = [*HARNESS, "run", "demo", "--max-parallel", "2"]
    cmd += ["--executor", "ray", "--quiet", "--repo", str(s.root)]
    env = {**os.environ, "HARNESS_CLOCK": CLOCK, **on(cluster)}
    run = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # P1's checks (3 s) run, and P2's worker sleeps, on the only node: then it goes,
        # and another comes.
        deadline = time.monotonic() + 60
        while not any(e["event"] == "subagent_succeeded" for e in s.events()):
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.1)
        time.sleep(1)
        cluster.remove_node(doomed)
        cluster.add_node(num_cpus=2)
        _, err = run.communicate(timeout=90)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    # What the lost node was running when it went: a call and a check, each killed in the
    # temporary folder it would have removed.
    killed = sorted(p.name.split("-")[1] for p in set(cluster.tmp.glob("harness-*")) - left)
    assert killed == ["call", "check"], killed
    assert run.returncode == 0, err.decode()
    failed = [e for e in s.events() if e["event"] == "subagent_failed"]
    assert [(e["step"], e["status"]) for e in failed] == [("P2", "error")], failed
    assert failed[0]["details"]["kind"] == "retryable"
    assert "lost the machine running the call" in failed[0]["error"]
    lost = [
        orjson.loads(m.read_bytes())
        for m in (s.root / "ai/exchanges/demo").glob("*/meta.json")
        if "lost" in orjson.loads(m.read_bytes())
    ]
    assert (
        len(lost) == 1
        and lost[0]["subtask"] == "P2"
        and lost[0]["lost"] in {why for _, why in rayexec.GONE}
    )
    assert {e["step"] for e in s.events() if e["event"] == "step_completed"} == {"P1", "P2"}
    # P1's checks ran again on the new node, and are said once, at P1's turn.
    assert [e["step"] for e in s.events() if e["event"] == "test_passed"] == ["P1", "P2"]
    res = s.cli("replay", "demo")
    assert res.returncode == 0, res.stderr
    assert s.cli("audit", "demo").returncode == 0


def test_no_ray_no_cluster_or_none_there_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    _ray()
    s = parallel(tmp_path / "s")
    before = s.git("status", "--porcelain")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    # A Python where ray is not installed: a module named ray that says so on import.
    shadow = tmp_path / "noray" / "ray"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError('no ray', name='ray')\n")
    res = subprocess.run(
        [*HARNESS, "run", "demo", "--executor", "ray", "--quiet", "--repo", str(s.root)],
        env={**env, "PYTHONPATH": str(shadow.parent), "RAY_ADDRESS": "127.0.0.1:1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2, res.stderr
    assert "--executor ray needs ray: pip install 'harness[ray]'" in res.stderr, res.stderr
    for address, said in (
        (None, "RAY_ADDRESS is not set"),
        (f"127.0.0.1:{port}", "nothing answers there"),
        ("ray://127.0.0.1:10001", "not host:port"),
    ):
        extra = {} if address is None else {"RAY_ADDRESS": address}
        res = subprocess.run(
            [*HARNESS, "run", "demo", "--executor", "ray", "--quiet", "--repo", str(s.root)],
            env={**env, **extra, "HARNESS_CLOCK": CLOCK},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 2, res.stderr
        assert said in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert not (s.root / "ai/tasks/demo/progress.ndjson").exists()
        assert s.git("status", "--porcelain") == before


def test_a_node_that_cannot_make_the_sandbox_fails_the_call_closed(
    tmp_path: Path, cluster: Any
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: no namespaces here' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    path = os.environ["PATH"]
    os.environ["PATH"] = f"{fake}:{path}"  # what the node's processes start with
    try:
        boxless = cluster.add_node(num_cpus=2)
    finally:
        os.environ["PATH"] = path
    for node in [n for n in cluster.worker_nodes if n is not boxless]:
        cluster.remove_node(node)
    cluster.wait_for_nodes()
    (tmp_path / "s").mkdir()
    s = scripted(tmp_path / "s")
    s.write_plan([independent("P1")])
    s.write_script([creating("P1")])
    res = s.cli("run", "demo", "--executor", "ray", env=on(cluster))
    # As a local run without a sandbox: halted, the worker never run bare, nothing landed.
    assert res.returncode == 1, res.stderr
    assert "no sandbox: bwrap cannot make a sandbox here: bwrap: no namespaces" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not any(e["event"] == "subagent_succeeded" for e in s.events())
    assert not (s.root / "src/p1.py").exists()
    # And a cluster left with no node to run anything on is refused, not waited on.
    cluster.remove_node(boxless)
    res = s.cli("run", "demo", "--executor", "ray", env=on(cluster))
    assert res.returncode == 2, res.stderr
    assert "the cluster has no CPU to run calls and checks on" in res.stderr


def test_a_driver_without_the_clusters_token_is_refused(tmp_path: Path, cluster: Any) -> None:
    s = parallel(tmp_path / "s")
    before = s.git("status", "--porcelain")
    res = s.cli("run", "demo", "--executor", "ray", env={**on(cluster), "RAY_AUTH_TOKEN": "x" * 32})
    assert res.returncode == 2, res.stderr
    assert "the cluster did not take harness" in res.stderr and "RAY_AUTH_MODE=token" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (s.root / "ai/tasks/demo/progress.ndjson").exists()
    assert s.git("status", "--porcelain") == before


def test_an_in_process_worker_is_refused(tmp_path: Path) -> None:
    _ray()
    from harness.step import rayexec

    root = repository(tmp_path, [independent("P1")])
    task = load(root, Scripted({"P1": ["diff"]}))
    with pytest.raises(InvalidInput, match="answered in this process"):
        rayexec.Ray(task, 2)
