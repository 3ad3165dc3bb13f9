"""The registry's version range is about the agent CLI a shim drives (issue 10, item 3)."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from harness.base.errors import Halted, InvalidInput
from harness.boundary.registry import Agent, check_version, load

from .conftest import Sample, subtask

ROOT = Path(__file__).resolve().parent.parent
FAKES = ROOT / "tests" / "fakes"


def agent(version: str) -> Agent:
    return Agent("claude", "ai/agents/bin/claude-cli", version, ("review",), (), (), None)


@pytest.mark.parametrize(
    ("out", "wanted", "seen"),
    [
        ("claude 2.1.330 via claude-cli 0.1.0\n", ">=2.0.34", "2.1.330"),
        ("codex 0.169.0 via codex-cli 0.1.0\n", ">=0.1", "0.169.0"),
        ("scripted-cli 0.1.0\n", ">=0.1", "0.1.0"),
        ("2.1.0rc1 (Claude Code)\n", ">=2.0.34", "2.1.0rc1"),
    ],
)
def test_the_first_version_reported_is_the_one_in_range(out: str, wanted: str, seen: str) -> None:
    assert check_version(agent(wanted), out) == seen


@pytest.mark.parametrize(
    ("out", "wanted", "words"),
    [
        ("claude 2.0.1 via claude-cli 0.1.0\n", ">=2.0.34", "version 2.0.1 outside >=2.0.34"),
        ("claude-cli (no digits here)\n", ">=0.1", "no version in `--version` output"),
    ],
)
def test_a_version_out_of_range_or_missing_is_one_line(out: str, wanted: str, words: str) -> None:
    with pytest.raises(Halted) as caught:
        check_version(agent(wanted), out)
    message = str(caught.value)
    assert message.startswith("agent claude: ") and words in message
    assert "\n" not in message


# -- through the CLI, with the fake claude reporting a version like the real one ---------------


def use_claude(sample: Sample, version: str = ">=2.0.34") -> None:
    """The seed's claude entry: the range is about Claude Code, not about the shim."""
    entry = {
        "id": "claude",
        "cmd": str(ROOT / "agents" / "claude-cli"),
        "version": version,
        "capabilities": ["localized-impl"],
        "env": ["FAKE_CLAUDE_VERSION"],
    }
    sample.write_json("ai/agents/registry.json", {"agents": [entry]})


def fake(version: str) -> dict[str, str]:
    return {"PATH": f"{FAKES}:{os.environ['PATH']}", "FAKE_CLAUDE_VERSION": version}


def test_registry_check_shows_the_cli_version_in_range(sample: Sample) -> None:
    use_claude(sample)
    res = sample.cli("registry", "check", env=fake("2.1.330"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout == "claude\tok\t2.1.330\t>=2.0.34\n"


def test_registry_check_refuses_a_cli_below_the_range_in_one_line(sample: Sample) -> None:
    use_claude(sample)
    res = sample.cli("registry", "check", env=fake("2.0.1"))
    assert res.returncode == 1
    assert res.stdout == "claude\tFAIL\tagent claude: version 2.0.1 outside >=2.0.34\n"


def test_a_missing_cli_fails_the_probe_whatever_the_range(sample: Sample, tmp_path: Path) -> None:
    use_claude(sample, ">=0")
    bare = tmp_path / "bin"  # a PATH with git, python and a shell but no claude
    bare.mkdir()
    for tool in ("git", "sh", "python3", "bwrap"):
        found = shutil.which(tool)
        if found:
            (bare / tool).symlink_to(found)
    res = sample.cli("registry", "check", env={"PATH": str(bare)})
    assert res.returncode == 1
    assert res.stdout.startswith("claude\tFAIL\tagent claude: ")
    assert res.stdout.endswith("failed: claude not found on PATH\n")


def test_next_records_the_cli_version_and_refuses_one_out_of_range(sample: Sample) -> None:
    use_claude(sample)
    sample.write_plan([subtask("T1", write_scope="none")])
    low = sample.cli("next", "demo", env=fake("2.0.1"))
    assert low.returncode == 1
    said = [line for line in low.stderr.splitlines() if "2.0.1" in line]
    assert said == [
        "harness: pre-flight of task demo: 1 problem(s), no worker called: "
        "subtask T1: agent claude: version 2.0.1 outside >=2.0.34"
    ]
    assert sample.events() == []  # refused before the run: nothing logged, nothing to resume
    res = sample.cli("next", "demo", env=fake("2.1.330"))
    assert res.returncode == 0, res.stderr
    (invoked,) = [e for e in sample.events() if e["event"] == "subagent_invoked"]
    meta = sample.root / "ai/exchanges/demo" / invoked["details"]["call_id"] / "meta.json"
    assert orjson.loads(meta.read_bytes())["agent_version"] == "2.1.330"


def test_an_entrys_tools_and_model_are_read_and_its_model_reaches_the_launcher(
    tmp_path: Path,
) -> None:
    entry = {"id": "r", "cmd": "bin/r", "version": ">=1", "capabilities": ["review"]}
    limited = entry | {"tools": ["read", "grep"], "model": "opus"}
    path = tmp_path / "registry.json"
    path.write_bytes(orjson.dumps({"agents": [entry, limited | {"id": "s"}]}))
    free, reviewer = load(path, tmp_path)
    assert (free.tools, free.model, free.writes) == (None, None, True)
    assert (reviewer.tools, reviewer.model, reviewer.writes) == (("read", "grep"), "opus", False)
    assert reviewer.argv(tmp_path) == [str(tmp_path / "bin/r"), "--model", "opus"]
    assert replace(reviewer, tools=("read", "edit")).writes
    for bad in ({"tools": ["Read"]}, {"model": "--yolo"}, {"tools": ["read", "read"]}):
        path.write_bytes(orjson.dumps({"agents": [entry | bad]}))
        with pytest.raises(InvalidInput, match=r"^registry.json: \$\.agents\[0\]\.(tools|model)"):
            load(path, tmp_path)
