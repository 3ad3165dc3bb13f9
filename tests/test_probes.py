"""The version probe cached per agent binary across commands (issue 24, item 5)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.base.errors import Halted
from harness.boundary import probes, proc, registry
from harness.boundary.registry import Agent

from .conftest import Sample


def counting(folder: Path, version: str = "1.2.3") -> tuple[Agent, Path]:
    """An agent whose `--version` adds a line to a file beside it, and that file."""
    counter = folder / "calls"
    exe = folder / "agent"
    exe.write_text(f'#!/bin/sh\necho x >> "{counter}"\necho "agent {version}"\n')
    exe.chmod(0o755)
    return Agent("a", str(exe), ">=1", ("review",), (), (), None), counter


def calls(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    state(root).mkdir(parents=True)
    return root


def probe(agent: Agent, root: Path, **env: str) -> str:
    return registry.probe(
        agent, root, proc.base_env(root / "home", list(env), env), None, state(root)
    )


def state(root: Path) -> Path:
    return root / ".git" / "harness"


def cache_of(root: Path) -> Path:
    return state(root) / probes.NAME


def test_a_second_command_does_not_probe_again(sample: Sample, tmp_path: Path) -> None:
    sample.uncontain()
    agent, counter = counting(tmp_path)
    entry = {"id": "a", "cmd": agent.cmd, "version": ">=1", "capabilities": ["review"]}
    sample.write_json("ai/agents/registry.json", {"agents": [entry]})
    first = sample.cli("registry", "check")
    second = sample.cli("registry", "check")
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stdout == second.stdout == "a\tok\t1.2.3\t>=1\n"
    assert calls(counter) == 1


def test_the_cache_holds_digests_and_outputs_only(repo: Path, tmp_path: Path) -> None:
    agent, counter = counting(tmp_path)
    assert probe(agent, repo, SECRET="s3cr3t") == probe(agent, repo, SECRET="s3cr3t") == "1.2.3"
    assert calls(counter) == 1
    text = cache_of(repo).read_text()
    assert "s3cr3t" not in text and str(tmp_path) not in text


def test_a_touched_or_replaced_binary_is_probed_again(repo: Path, tmp_path: Path) -> None:
    agent, counter = counting(tmp_path)
    probe(agent, repo)
    exe = Path(agent.cmd)
    stat = exe.stat()
    os.utime(exe, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    probe(agent, repo)
    assert calls(counter) == 2
    # The same bytes and times in a new file: another inode, another ctime.
    fresh = tmp_path / "agent.new"
    fresh.write_bytes(exe.read_bytes())
    fresh.chmod(0o755)
    now = exe.stat()
    os.utime(fresh, ns=(now.st_atime_ns, now.st_mtime_ns))
    fresh.replace(exe)
    probe(agent, repo)
    assert calls(counter) == 3
    probe(agent, repo)
    assert calls(counter) == 3


def test_what_the_probe_is_given_is_part_of_its_key(repo: Path, tmp_path: Path) -> None:
    agent, counter = counting(tmp_path)
    probe(agent, repo, KEY="one")
    probe(agent, repo, KEY="two")
    probe(agent, repo, KEY="one")
    assert calls(counter) == 2
    # HOME is a fresh folder per probe: it never decides.
    env = proc.base_env(tmp_path / "elsewhere", ["KEY"], {"KEY": "one"})
    registry.probe(agent, repo, env, None, state(repo))
    assert calls(counter) == 2


def test_a_cached_version_is_still_held_against_the_range(repo: Path, tmp_path: Path) -> None:
    agent, counter = counting(tmp_path)
    probe(agent, repo)
    with pytest.raises(Halted, match=r"version 1\.2\.3 outside >=2"):
        probe(Agent("a", agent.cmd, ">=2", ("review",), (), (), None), repo)
    assert calls(counter) == 1


def test_a_failed_probe_is_not_kept(repo: Path, tmp_path: Path) -> None:
    agent, counter = counting(tmp_path, "none")
    for _ in range(2):
        with pytest.raises(Halted, match="no version"):
            probe(agent, repo)
    assert calls(counter) == 2
    assert not cache_of(repo).exists()


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[]",
        b'{"probes": {}}',
        b'{"probes": [["short", "agent 9.9.9"]]}',
        b'{"probes": [["' + b"a" * 64 + b'", 1]]}',
        b'{"probes": [["' + b"A" * 64 + b'", "agent 9.9.9"]]}',
        b'{"probes": [["' + b"a" * 64 + b'", "agent 9.9.9", "more"]]}',
        b'{"probes": ["' + b"a" * 64 + b'"]}',
    ],
)
def test_a_corrupt_cache_is_ignored(repo: Path, tmp_path: Path, content: bytes) -> None:
    agent, counter = counting(tmp_path)
    cache_of(repo).write_bytes(content)
    assert probe(agent, repo) == "1.2.3"
    assert calls(counter) == 1
    assert probe(agent, repo) == "1.2.3"
    assert calls(counter) == 1


def test_a_cache_that_is_a_symlink_is_not_read(repo: Path, tmp_path: Path) -> None:
    agent, counter = counting(tmp_path)
    probe(agent, repo)
    held = tmp_path / "held.json"
    cache_of(repo).replace(held)
    cache_of(repo).symlink_to(held)
    probe(agent, repo)
    assert calls(counter) == 2


def test_the_cache_keeps_the_newest_entries(repo: Path, tmp_path: Path) -> None:
    agent, counter = counting(tmp_path)
    for n in range(probes.KEEP + 1):
        probe(agent, repo, N=str(n))
    assert len(probes.load(cache_of(repo))) == probes.KEEP
    probe(agent, repo, N=str(probes.KEEP))
    probe(agent, repo, N="0")
    assert calls(counter) == probes.KEEP + 2


def test_the_cli_a_shim_drives_is_part_of_its_key(repo: Path, tmp_path: Path) -> None:
    agent, counter = counting(tmp_path)
    package = tmp_path / "lib" / "node_modules" / "fakecli"
    package.mkdir(parents=True)
    (package / "package.json").write_text('{"version": "1.0.0"}')
    (package / "cli.sh").write_text("#!/bin/sh\n")
    (package / "cli.sh").chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fakecli").symlink_to(package / "cli.sh")
    shim = Agent("a", agent.cmd, ">=1", ("review",), (), (), None, cli="fakecli")
    path = f"{bin_dir}:{os.environ['PATH']}"
    for _ in range(2):
        registry.probe(
            shim, repo, proc.base_env(repo / "home", [], {"PATH": path}), None, state(repo)
        )
    assert calls(counter) == 1
    # An update that rewrites the package's version but not its entry script.
    (package / "package.json").write_text('{"version": "1.0.1"}')
    registry.probe(shim, repo, proc.base_env(repo / "home", [], {"PATH": path}), None, state(repo))
    assert calls(counter) == 2


def test_a_state_folder_that_cannot_be_written_only_leaves_the_cache_out(
    repo: Path, tmp_path: Path
) -> None:
    agent, counter = counting(tmp_path)
    state(repo).rmdir()
    state(repo).write_text("")  # a file where the folder should be
    assert probe(agent, repo) == probe(agent, repo) == "1.2.3"
    assert calls(counter) == 2
