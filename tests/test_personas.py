"""`harness agents import`: agent files in, registry entries and personas out, one way."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.base.errors import InvalidInput
from harness.boundary.registry import Agent
from harness.importers import personas
from harness.workers import gemini, shim

from .conftest import Sample, subtask
from .test_importing import snapshot

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
        "declared": {"tools": ["Read", "Grep"], "model": "sonnet"},  # as written
    }
    assert (entry["tools"], entry["model"]) == (["read", "grep"], "sonnet")  # harness's names
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
    assert entry["network"] == "proxy"  # an imported agent's CLI must reach its model too


def test_bad_agent_files_are_refused_with_nothing_written(sample: Sample) -> None:
    before = (sample.root / "ai/agents/registry.json").read_bytes()
    cases = {
        "no-front.md": "just text\n",
        "no-name.md": "---\ndescription: x\n---\nbody\n",
        "bad-yaml.md": "---\nname: [unclosed\n---\nbody\n",
        "deep.md": "---\nname: a\ndescription: d\nx: " + "[" * 3000 + "]" * 3000 + "\n---\nb\n",
        "alias.md": "---\nname: a\ndescription: &d [1]\nx: [*d, *d]\n---\nbody\n",
        "surrogate.md": '---\nname: a\ndescription: "\\ud800"\n---\nbody\n',
    }
    for name, text in cases.items():
        path = write_agent(sample, "claude", name, text)
        res = sample.cli("agents", "import", "--from", "claude")
        assert res.returncode == 2, name
        assert len(res.stderr.strip().splitlines()) == 1 and name in res.stderr
        path.unlink()
        assert (sample.root / "ai/agents/registry.json").read_bytes() == before
    assert not (sample.root / "ai/agents/personas").exists()


@pytest.mark.parametrize(
    ("front_matter", "problem"),
    [
        ("x: " + "[" * 3000 + "]" * 3000, "nested deeper than 64 levels (line 4)"),
        (
            "x: &a [1, 2]\ny: [*a, *a, *a]",
            "anchors and aliases (& and *) are not accepted (line 4)",
        ),
        ('x: "\\udfff"', "a lone surrogate '\\udfff' (line 4)"),
        ("x: " + "[" * 63 + "]" * 63 + '\ny: "\\u00e9"', None),  # the twin
    ],
)
def test_front_matter_that_no_file_could_hold_once_written_is_refused(
    front_matter: str, problem: str | None
) -> None:
    """The safe loader recursed past Python's limit on deep nesting, expanded aliases once
    the entry was written, and let a lone surrogate reach the persona's file: each crashed
    the import."""
    text = f"---\nname: a\ndescription: d\n{front_matter}\n---\nbody\n"
    if problem is None:
        assert personas.parse(text, "x.md", "claude").description == "d"
        return
    with pytest.raises(InvalidInput) as refused:
        personas.parse(text, "x.md", "claude")
    assert str(refused.value) == f"x.md: front matter: {problem}"


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


# -- what an import reads (issue 22, item 4) -------------------------------------------------
# Each hostile case is an agent file no person would mean to make a persona of; its twin has
# the same shape, made honestly. The hostile one is refused in one line naming the file, and
# nothing is written anywhere; the twin is imported.

SECRET = "S3CRET-outside-the-repository"
AGENT = REVIEWER.replace("careful reviewer", "careful reviewer " + SECRET)


def hostile_case(name: str, hostile: bool, root: Path, outside: Path) -> None:
    """.claude/agents/x.md as the case has it (its twin: a plain file of the same text)."""
    folder = root / ".claude/agents"
    text = AGENT.encode()
    if name in ("symlinked folder", "symlinked .claude") and hostile:
        top = root / ".claude"
        linked = top if name == "symlinked .claude" else folder
        if linked is folder:
            top.mkdir()
        real = outside / "agents" if linked is top else outside
        real.mkdir(parents=True, exist_ok=True)
        (real / "x.md").write_bytes(text)
        linked.symlink_to(outside)
        return
    folder.mkdir(parents=True)
    target = {
        "symlink to a file outside": outside / "x.md",
        "symlink to a file inside": root / "docs/x.md",
        "git config": root / ".git/config",
        "write tokens": root / "ai/agents/write_tokens.json",
        "dev zero": Path("/dev/zero"),
    }.get(name)
    if target is not None and hostile:
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text)
        (folder / "x.md").symlink_to(target)
    elif name == "fifo" and hostile:
        os.mkfifo(folder / "x.md")
    elif name == "2 MB":
        body = b"Review. " * ((2_000_000 if hostile else 900_000) // 8)
        (folder / "x.md").write_bytes(text + body)
    elif name == "NUL byte":
        (folder / "x.md").write_bytes(
            text.replace(b"careful", b"care\0ful" if hostile else b"careful")
        )
    elif name == "not UTF-8":
        café = "café".encode("latin-1" if hostile else "utf-8")
        (folder / "x.md").write_bytes(text.replace(b"careful", café))
    elif name == "personas folder symlinked":
        (folder / "x.md").write_bytes(text)
        if hostile:
            (root / "ai/agents/personas").symlink_to(outside)
    else:
        (folder / "x.md").write_bytes(text)


PERSONA_CASES = {
    # case: the one line
    "symlink to a file outside": ".claude/agents/x.md: a symlink",
    "symlink to a file inside": ".claude/agents/x.md: a symlink",
    "symlinked folder": ".claude/agents: a symlink: an import reads only the repository's own",
    "symlinked .claude": ".claude: a symlink: an import reads only the repository's own",
    "git config": ".claude/agents/x.md: a symlink",
    "write tokens": ".claude/agents/x.md: a symlink",
    "dev zero": ".claude/agents/x.md: a symlink",
    "fifo": ".claude/agents/x.md: not a regular file",
    "2 MB": ".claude/agents/x.md: larger than 1000000 bytes",
    "NUL byte": ".claude/agents/x.md: holds a NUL byte",
    "not UTF-8": ".claude/agents/x.md: not UTF-8",
    "personas folder symlinked": (
        "ai/agents/personas: a symlink: harness writes only into plain folders of the repository"
    ),
}


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
@pytest.mark.parametrize("case", sorted(PERSONA_CASES))
def test_agents_import_reads_only_what_a_person_means(
    sample: Sample, tmp_path: Path, case: str, hostile: bool
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    hostile_case(case, hostile, sample.root, outside)
    before, outside_before = snapshot(sample.root), snapshot(outside)
    res = sample.cli("agents", "import", "--from", "claude", timeout=60)
    if not hostile:
        assert res.returncode == 0, res.stderr
        assert (sample.root / "ai/agents/personas/code-reviewer.md").is_file()
        return
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == f"harness: {PERSONA_CASES[case]}\n"
    assert snapshot(sample.root) == before and snapshot(outside) == outside_before


# -- an imported agent keeps its limits (issue 22, item 6) -----------------------------------


def front(source: str, **fields: object) -> Any:
    """What `parse` makes of an agent file with these front matter fields."""
    lines = ["---", "name: a", "description: d"]
    lines += [f"{key}: {orjson.dumps(value).decode()}" for key, value in fields.items()]
    return personas.parse("\n".join([*lines, "---", "body", ""]), "x.md", source)


@pytest.mark.parametrize(
    ("source", "fields", "tools"),
    [
        ("claude", {}, None),  # nothing declared: what any agent gets
        ("claude", {"tools": "Read, Grep, Glob"}, ("read", "glob", "grep")),
        ("claude", {"tools": ["Read", "Edit", "MultiEdit"]}, ("read", "edit")),
        ("claude", {"tools": "Read, Write, Edit, Bash"}, ("read", "write", "edit", "bash")),
        # Deny wins: what cannot be mapped gives nothing; a misspelt allow grants nothing.
        ("claude", {"tools": "Read, WebFetch, mcp__x__y, Task"}, ("read",)),
        ("claude", {"tools": "Read, Bash(git log:*), NotebookEdit, write"}, ("read",)),
        ("claude", {"tools": "*"}, ("read", "write", "edit", "glob", "grep", "ls", "bash")),
        ("claude", {"disallowedTools": "Write, Edit"}, ("read", "glob", "grep", "ls", "bash")),
        # A misspelt or narrowed deny still takes the whole tool away.
        ("claude", {"tools": "Read, Bash", "disallowedTools": "bash(rm:*)"}, ("read",)),
        ("claude", {"tools": "Read, Write", "disallowedTools": "*"}, ()),
        ("claude", {"permissionMode": "plan"}, ("read", "glob", "grep", "ls")),
        ("claude", {"permissionMode": "acceptEdits"}, None),
        ("gemini", {"tools": ["read_file", "grep_search"]}, ("read", "grep")),
        (
            "gemini",
            {"tools": ["read_file", "replace", "run_shell_command"]},
            ("read", "edit", "bash"),
        ),
        ("gemini", {"tools": ["search_file_content", "google_web_search", "mcp_*"]}, ("grep",)),
        (
            "gemini",
            {"policy": {"tools": {"exclude": ["write_file", "replace"]}}},
            ("read", "glob", "grep", "ls", "bash"),
        ),
        (
            "gemini",
            {"tools": ["*"], "policy": {"tools": {"allowed": ["replace"]}}},
            ("read", "write", "edit", "glob", "grep", "ls", "bash"),
        ),
        # Each CLI's names only: Claude's Write is no gemini tool.
        ("gemini", {"tools": ["read_file", "Write"]}, ("read",)),
    ],
)
def test_declared_tools_map_to_harness_tools_deny_winning(
    source: str, fields: dict[str, object], tools: tuple[str, ...] | None
) -> None:
    assert front(source, **fields).tools == tools


def test_the_model_is_kept_but_inherit_and_what_is_no_model_name() -> None:
    assert front("claude", model="sonnet").model == "sonnet"
    assert front("gemini", model="gemini-2.5-flash").model == "gemini-2.5-flash"
    assert front("claude", model="inherit").model is None
    assert front("claude").model is None
    with pytest.raises(InvalidInput, match=r"^x.md: front matter: model '--x' is not a model"):
        front("claude", model="--x")
    with pytest.raises(InvalidInput, match=r"^x.md: front matter: tools is not a list of tool"):
        front("claude", tools=5)
    with pytest.raises(InvalidInput, match=r"^x.md: front matter: policy.tools.exclude is not"):
        front("gemini", policy={"tools": {"exclude": {"a": 1}}})


READ_ONLY = """---
name: security-reviewer
description: Looks for injection and unsafe input handling
tools: Read, Grep, Glob
disallowedTools: Write, Edit
model: opus
---
You are a security reviewer. Report every unchecked input.
"""
WRITER = READ_ONLY.replace("disallowedTools: Write, Edit", "").replace("Glob", "Glob, Edit, Write")


@pytest.mark.parametrize("writer", [False, True], ids=["read-only", "twin"])
def test_a_read_only_agent_is_given_no_write_scope(sample: Sample, writer: bool) -> None:
    write_agent(sample, "claude", "security.md", WRITER if writer else READ_ONLY)
    assert sample.cli("agents", "import", "--from", "claude").returncode == 0
    entry = sample.read_json("ai/agents/registry.json")["agents"][-1]
    tools = ["read", "write", "edit", "glob", "grep"] if writer else ["read", "glob", "grep"]
    assert entry["tools"] == tools
    sample.write_plan([subtask("T1", role="security-reviewer")])  # writes src/**
    env = {"PATH": f"{FAKES}:{os.environ['PATH']}"}
    res = sample.cli("plan", "validate", "demo", env=env)
    if writer:
        assert res.returncode == 0, res.stderr
        return
    assert res.returncode == 1
    assert res.stderr == (
        "ai/tasks/demo/plan.json: subtask T1: agent security-reviewer may not write "
        "(its tools: read, glob, grep), so it cannot be given a write scope\n"
    )
    # The same agent reviewing, writing nothing, is fine.
    sample.write_plan([subtask("T1", role="security-reviewer", write_scope="none")])
    res = sample.cli("plan", "validate", "demo", env=env)
    assert res.returncode == 0, res.stderr


def shown(sample: Sample, agent: str) -> Any:
    res = sample.cli("policy", "show", agent, "--json")
    assert res.returncode == 0, res.stderr
    return orjson.loads(res.stdout)


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


@pytest.mark.parametrize("writer", [False, True], ids=["read-only", "twin"])
def test_claude_is_offered_only_the_tools_the_agent_declares(sample: Sample, writer: bool) -> None:
    """No ai/policy.toml: the entry's tools alone cut what the shim offers claude, even for a
    subtask that writes; the model the file names is claude's --model."""
    write_agent(sample, "claude", "security.md", WRITER if writer else READ_ONLY)
    assert sample.cli("agents", "import", "--from", "claude").returncode == 0
    doc = shown(sample, "security-reviewer")
    assert doc["policy"] is None and doc["model"] == "opus"
    assert doc["tools"] == (
        ["read", "write", "edit", "glob", "grep"] if writer else ["read", "glob", "grep"]
    )
    assert flag(doc["launch"], "--model") == "opus"
    for key in ("writable", "read_only"):
        argv = doc[key]
        assert flag(argv, "--model") == "opus"
        offered = flag(argv, "--tools")
        denied = (flag(argv, "--disallowedTools") or "").split(",")
        if writer and key == "writable":
            assert offered == "Read,Grep,Glob,Edit,Write"
        else:
            assert offered == "Read,Grep,Glob"
        assert "Bash" in denied and ("Edit" in denied) is not writer
    text = sample.cli("policy", "show", "security-reviewer").stdout
    tools = "read, write, edit, glob, grep" if writer else "read, glob, grep"
    assert f"tools: {tools} (its registry entry's: no other)" in text
    assert "model: opus" in text


def test_gemini_leaves_out_every_tool_the_agent_does_not_declare(sample: Sample) -> None:
    text = REVIEWER.replace("tools: Read, Grep", "tools: [read_file, grep_search]")
    write_agent(
        sample, "gemini", "reviewer.md", text.replace("model: sonnet", "model: gemini-2.5-pro")
    )
    assert sample.cli("agents", "import", "--from", "gemini").returncode == 0
    doc = shown(sample, "code-reviewer")
    assert flag(doc["writable"], "--model") == "gemini-2.5-pro"
    assert flag(doc["writable"], "--approval-mode") == "default"  # no edit is approved
    launch = shim.parse_launch(doc["launch"][1:])
    excluded = gemini.settings(True, launch, {})["tools"]["exclude"]
    gone = {"glob", "list_directory", "write_file", "replace", "run_shell_command"}
    assert gone <= set(excluded)
    assert not {"read_file", "read_many_files", "grep_search"} & set(excluded)
