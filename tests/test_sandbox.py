"""The sandbox mechanism through the process chokepoint: what a boxed command can and cannot do."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.base.errors import Halted
from harness.boundary import egress, proc, proxy, sandbox


def sh(
    box: sandbox.Box, command: str, soft_s: float | None = None, hard_s: float | None = None
) -> tuple[proc.Result, str]:
    out = box.work.parent / "out"
    env = proc.base_env(box.home)
    res = proc.shell(
        command,
        cwd=box.work,
        env=env,
        stdout=out,
        stderr=out,
        box=box,
        soft_s=soft_s,
        hard_s=hard_s,
    )
    return res, out.read_text()


def test_only_the_work_folder_and_home_are_writable(box: sandbox.Box, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    planted = "/etc/harness-sandbox-test"
    _, out = sh(
        box,
        f"echo in > kept; echo h > $HOME/h; echo x > {outside}; echo y > {planted}; "
        "pwd; echo $HOME",
    )
    assert (box.work / "kept").read_text() == "in\n" and (box.home / "h").is_file()
    assert not outside.exists() and not Path(planted).exists()
    assert out.splitlines()[-2:] == ["/sandbox/work", "/sandbox/home"]


def test_the_home_and_hidden_trees_are_not_there(box: sandbox.Box, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("canary-beside")
    _, out = sh(box, f"cat {tmp_path}/secret.txt; cat {box.work.parent}/secret.txt; echo end")
    assert "canary-beside" not in out and out.count("No such file") == 2
    # The twin: a file harness put in the copy is there.
    (box.work / "mine.txt").write_text("canary-inside")
    _, out = sh(box, "cat mine.txt")
    assert out == "canary-inside"


def test_no_network_but_loopback(box: sandbox.Box) -> None:
    _, out = sh(box, "tail -n +3 /proc/net/dev | cut -d: -f1")
    assert [line.strip() for line in out.splitlines()] == ["lo"]


@pytest.mark.parametrize("command", ["setsid sleep 60 & exit 0", "(sleep 60 &) ; exit 0"])
def test_daemons_are_a_leak_and_are_killed(box: sandbox.Box, command: str) -> None:
    res, _ = sh(box, command)
    assert res.code == 0 and res.leaked and res.survivors


def test_waited_children_are_no_leak(box: sandbox.Box) -> None:
    res, _ = sh(box, "sleep 0.1 & wait")
    assert res.code == 0 and not res.leaked


def test_soft_timeout_terminates_the_command(box: sandbox.Box) -> None:
    res, _ = sh(box, "sleep 30", soft_s=0.5, hard_s=10)
    assert res.timed_out == "soft" and res.code == -15


def test_hard_timeout_kills_a_command_ignoring_term(box: sandbox.Box) -> None:
    res, _ = sh(box, "trap '' TERM; while :; do sleep 0.05; done", soft_s=0.3, hard_s=1)
    assert res.timed_out == "hard"


def test_init_cannot_be_inspected_from_inside(box: sandbox.Box) -> None:
    # Not dumpable: its environment and fds (the report) are out of the command's reach,
    # while the command's own are readable.
    _, out = sh(
        box,
        "cat /proc/1/environ >/dev/null 2>&1 && echo init; "
        "cat /proc/self/environ >/dev/null && echo self",
    )
    assert out.split() == ["self"]


def test_a_missing_program_exits_127(box: sandbox.Box) -> None:
    out = box.work.parent / "out"
    res = proc.run(
        ["no-such-program"], cwd=box.work, env=proc.base_env(box.home), stderr=out, box=box
    )
    assert res.code == 127 and "cannot execute" in out.read_text()


def test_a_read_only_work_cannot_be_written(box: sandbox.Box) -> None:
    (box.work / "kept").write_text("base\n")
    ro = replace(box, writable=False)
    script = "echo x > kept; echo y > new; echo z > $HOME/ok"
    proc.run(["/bin/sh", "-c", script], cwd=box.work, env=proc.base_env(box.home), box=ro)
    assert (box.work / "kept").read_text() == "base\n" and not (box.work / "new").exists()
    assert (box.home / "ok").read_text() == "z\n"


def test_no_bwrap_fails_closed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    sandbox.problem.cache_clear()
    try:
        assert sandbox.problem() == "bwrap is not installed"
        with pytest.raises(Halted, match=r"install bubblewrap.*mode = \"off\""):
            sandbox.require()
        assert sandbox.diagnose()["sandbox"].startswith("does not work")
    finally:
        sandbox.problem.cache_clear()


def test_a_command_gets_sigpipe_back(box: sandbox.Box) -> None:
    """Python ignores SIGPIPE; a pipeline inside must end quietly, as it does from a shell."""
    res, out = sh(box, "yes | head -n 1")
    assert res.code == 0 and out == "y\n"


def test_a_way_out_is_loopback_and_the_proxy_variables_only(
    box: sandbox.Box, tmp_path: Path
) -> None:
    """A box with an egress keeps its own network namespace (loopback only); the command
    sees the proxy variables, the socket it reaches the proxy by and nothing of the folder
    that holds it; the forwarder is threads of init, so no process is left behind."""
    running = proxy.Proxy(tmp_path / "state" / "egress", egress.Rules()).start()
    try:
        boxed = replace(box, egress=running.way_out())
        res, out = sh(
            boxed,
            "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; env | grep -i _proxy= | sort; "
            f"test -S {sandbox.EGRESS_SOCKET} && echo socket; ls {tmp_path}/state || echo hidden",
        )
    finally:
        running.stop()
    url = "http://127.0.0.1:3128"
    assert out.splitlines() == [
        "lo",
        f"ALL_PROXY={url}",
        f"HTTPS_PROXY={url}",
        f"HTTP_PROXY={url}",
        "NO_PROXY=",
        f"all_proxy={url}",
        f"http_proxy={url}",
        f"https_proxy={url}",
        "no_proxy=",
        "socket",
        f"ls: cannot access '{tmp_path}/state': No such file or directory",
        "hidden",
    ]
    assert res.code == 0 and not res.leaked


def test_the_proxy_port_is_one_no_tunnel_takes(tmp_path: Path) -> None:
    way = sandbox.Egress(tmp_path / "s", (("127.0.0.1", 3128, "x:3128"), ("::1", 3129, "x:3129")))
    assert way.port == 3130 and ("HTTPS_PROXY", "http://127.0.0.1:3130") in way.env()
    assert sandbox.Egress(tmp_path / "s").port == sandbox.PROXY_PORT


def test_a_box_with_a_way_out_runs_under_init(box: sandbox.Box, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="init"):
        sandbox.prefix(replace(box, egress=sandbox.Egress(tmp_path / "s")), sandbox.WORK)
