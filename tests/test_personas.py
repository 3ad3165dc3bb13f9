"""`harness agents import`: agent files in, registry entries and personas out, one way."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from harness.registry import Agent

from .conftest import Sample, subtask

REVIEWER = """---
name: code-reviewer
description: Reviews diffs for bugs
tools: Read, Grep
model: sonnet
---
You are a careful reviewer.
"""


def write_agent(sample: Sample, source: str, name: str, text: str) -> Path:
    folder = sample.root / f".{source}" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def test_import_adds_entries_and_personas_and_reimport_touches_only_its_own(
    sample: Sample,
) -> None:
    original = sample.read_json("ai/agents/registry.json")["agents"]
    source_file = write_agent(sample, "claude", "reviewer.md", REVIEWER)
    before = source_file.read_bytes()
    res = sample.cli("agents", "import", "--from", "claude")
    assert res.returncode == 0, res.stderr
    assert "code-reviewer" in res.stdout
    agents = sample.read_json("ai/agents/registry.json")["agents"]
    assert agents[: len(original)] == original  # the user's entries stay as they were
    entry = agents[-1]
    assert entry["id"] == "code-reviewer" and entry["cmd"] == "ai/agents/bin/claude-cli"
    assert entry["args"] == ["--agent-id", "code-reviewer"]  # the shim answers as this entry
    assert entry["source"] == {
        "from": "claude",
        "file": ".claude/agents/reviewer.md",
        "imported_at": "2026-01-01T00:00:00Z",
    }
    persona = sample.root / entry["persona"]
    assert "You are a careful reviewer." in persona.read_text()
    assert (sample.root / "ai/agents/bin/claude-cli").exists()
    assert source_file.read_bytes() == before  # one way: the source is never written

    source_file.write_text(REVIEWER.replace("careful", "strict"))
    write_agent(sample, "claude", "writer.md", REVIEWER.replace("code-reviewer", "writer"))
    assert sample.cli("agents", "import", "--from", "claude").returncode == 0
    agents = sample.read_json("ai/agents/registry.json")["agents"]
    assert [a["id"] for a in agents] == [a["id"] for a in original] + ["code-reviewer", "writer"]
    assert "strict" in persona.read_text()


def test_gemini_agents_import_through_the_gemini_shim(sample: Sample) -> None:
    write_agent(sample, "gemini", "docs.md", REVIEWER.replace("code-reviewer", "docs"))
    assert sample.cli("agents", "import", "--from", "gemini").returncode == 0
    entry = sample.read_json("ai/agents/registry.json")["agents"][-1]
    assert entry["cmd"] == "ai/agents/bin/gemini-cli" and entry["cli"] == "gemini"
    assert {"GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"} <= set(entry["env"])
    assert entry["network"] == "host"  # an imported agent's CLI must reach its model too


def test_bad_agent_files_are_refused_with_nothing_written(sample: Sample) -> None:
    before = (sample.root / "ai/agents/registry.json").read_bytes()
    cases = {
        "no-front.md": "just text\n",
        "no-name.md": "---\ndescription: x\n---\nbody\n",
        "bad-yaml.md": "---\nname: [unclosed\n---\nbody\n",
    }
    for name, text in cases.items():
        path = write_agent(sample, "claude", name, text)
        res = sample.cli("agents", "import", "--from", "claude")
        assert res.returncode == 2, name
        assert len(res.stderr.strip().splitlines()) == 1 and name in res.stderr
        path.unlink()
        assert (sample.root / "ai/agents/registry.json").read_bytes() == before
    assert not (sample.root / "ai/agents/personas").exists()


def test_an_import_may_not_take_the_id_of_a_hand_made_entry(sample: Sample) -> None:
    write_agent(sample, "claude", "s.md", REVIEWER.replace("code-reviewer", "scripted"))
    res = sample.cli("agents", "import", "--from", "claude")
    assert res.returncode == 2 and "'scripted' is already taken" in res.stderr


def test_a_persona_is_passed_to_the_launcher() -> None:
    agent = Agent("a", "bin/x", ">=1", ("r",), ("--k",), (), None, "ai/agents/personas/a.md")
    assert agent.argv(Path("/repo")) == [
        "/repo/bin/x",
        "--k",
        "--persona",
        "/repo/ai/agents/personas/a.md",
    ]
    assert orjson.dumps(agent.args) == b'["--k"]'


# -- an imported agent runs (issue 10, item 2) -----------------------------------------------

FAKES = Path(__file__).resolve().parent / "fakes"
SECURITY = """---
name: security-reviewer
description: Looks for injection and unsafe input handling
---
You are a security reviewer. Report every unchecked input.
"""


def test_an_imported_agent_answers_as_itself_with_its_persona_as_the_brief(
    sample: Sample,
) -> None:
    """The persona's name is a role with no brief of its own: the persona, a person's text,
    is its brief, and the claude shim answers as the registry entry, not as `claude`."""
    write_agent(sample, "claude", "security.md", SECURITY)
    assert sample.cli("agents", "import", "--from", "claude").returncode == 0
    sample.write_plan([subtask("T1", role="security-reviewer", write_scope="none")])
    env = {"PATH": f"{FAKES}:{os.environ['PATH']}"}
    res = sample.cli("next", "demo", env=env)
    assert res.returncode == 0, res.stderr
    assert sample.names()[-1] == "step_completed"
    (invoked,) = [e for e in sample.events() if e["event"] == "subagent_invoked"]
    assert invoked["details"]["subagent"] == "security-reviewer"
    folder = sample.root / "ai/exchanges/demo" / invoked["details"]["call_id"]
    line = orjson.loads((folder / "stdout.ndjson").read_bytes())
    assert line["status"] == "ok" and line["agent_id"] == "security-reviewer"
    prompt = line["result"]["prompt"]
    assert '<<<brief "persona" from person id ' in prompt
    assert "You are a security reviewer. Report every unchecked input." in prompt
    assert prompt.count("You are a security reviewer.") == 1  # the brief, not brief + persona
