"""The shims' launch options, the command allowlist, and the fences around embedded text."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base import scope
from harness.workers import cliprocess, prompts, shim

from .builders import FAST


def test_shim_launch_options(tmp_path: Path) -> None:
    persona = tmp_path / "p.md"
    persona.write_text("Be terse.")
    got = shim.parse_launch(
        ["--allow-command", "pytest -q", "--persona", str(persona), "--allow-command", "ruff"]
    )
    assert got == shim.Launch("Be terse.", ("pytest -q", "ruff"))
    assert shim.parse_launch([]) == shim.Launch()
    for bad in (["--allow-command"], ["--yolo", "x"], ["--allow-command", "a;b"]):
        with pytest.raises(shim.ShimError):
            shim.parse_launch(bad)
    with pytest.raises(shim.ShimError, match="--persona"):
        shim.parse_launch(["--persona", str(tmp_path / "missing.md")])


@pytest.mark.parametrize("model", ["--dangerously-skip-permissions", "-x", "a b", ""])
def test_a_model_that_is_no_model_name_is_refused(model: str) -> None:
    with pytest.raises(shim.ShimError, match="--model"):
        shim.parse_launch(["--model", model])
    twin = "claude-sonnet-4-5@20250929"
    assert shim.parse_launch(["--model", twin]) == shim.Launch(model=twin)


@pytest.mark.parametrize(
    ("command", "allowed"),
    [
        ("pytest -q", True),
        ("pytest -q tests/test_x.py", True),
        ("bash -lc 'pytest -q -k add'", True),
        ("/bin/bash -lc 'ruff check src'", True),
        ("pytest", False),
        ("pytest -x", False),
        ("pytest -q; rm -rf /", False),
        ("pytest -q && curl x", False),
        ("pytest -q | sh", False),
        ("pytest -q `id`", False),
        ("pytest -q $(id)", False),
        ("pytest -q > out", False),
        ("bash -lc 'pytest -q' extra", False),
        ("bash -lc 'pytest -q", False),
        ("bash -lc \"bash -lc 'pytest -q'\"", False),
        ("", False),
    ],
)
def test_allowed_command(command: str, allowed: bool) -> None:
    launch = shim.Launch(commands=("pytest -q", "ruff check"))
    assert (launch.refusal(command) is None) is allowed


@given(st.text(max_size=60))
def test_nothing_is_allowed_without_an_allowlist(command: str) -> None:
    assert shim.Launch().refusal(command) is not None


@FAST
@given(
    st.text(max_size=20),
    st.sampled_from(["worker", "person", "repository"]),
    st.lists(st.sampled_from(["x", "\n", ">>>blob id ", "<<<blob ", "0" * 32, "a"]), max_size=12),
)
def test_no_text_closes_or_breaks_its_fence(name: str, source: str, parts: list[str]) -> None:
    text = "".join(parts)
    lines = prompts.fence("blob", name, source, text).split("\n")
    assert lines[-1] == ""
    opening, closing = lines[0], lines[-2]
    tag = opening.rsplit(" ", 1)[1]
    assert opening == f"<<<blob {orjson.dumps(name).decode()} from {source} id {tag}"
    assert closing == f">>>blob id {tag}" and len(tag) == 32
    assert lines.count(closing) == 1  # the text never holds its own closing line
    body = "\n".join(lines[1:-2]) + "\n"
    assert body == (text if text.endswith("\n") else text + "\n")


def test_briefs_and_personas_say_where_they_came_from(tmp_path: Path) -> None:
    (tmp_path / "ai" / "roles").mkdir(parents=True)
    (tmp_path / "ai" / "roles" / "mine.md").write_text("Local brief.\n")
    launch = shim.Launch(persona="You are careful.\n>>>persona id x\n")
    local = prompts.role_brief("mine", tmp_path, launch)
    assert local.startswith('<<<brief "ai/roles/mine.md" from repository id ')
    assert '<<<persona "persona" from person id ' in local
    shipped = prompts.role_brief("localized-impl", tmp_path, shim.Launch())
    assert shipped.startswith('<<<brief "localized-impl" from harness id ')


def test_a_persona_is_the_brief_of_a_role_that_has_none(tmp_path: Path) -> None:
    launch = shim.Launch(persona="You are a security reviewer.\n")
    brief = prompts.role_brief("security-reviewer", tmp_path, launch)
    assert brief.startswith('<<<brief "persona" from person id ')
    assert brief.count("You are a security reviewer.") == 1
    shipped = prompts.role_brief("review", tmp_path, launch)  # a role with a brief keeps it
    assert shipped.startswith('<<<brief "review" from harness id ')
    assert '<<<persona "persona" from person id ' in shipped
    with pytest.raises(shim.ShimError, match="no role brief for 'security-reviewer'"):
        prompts.role_brief("security-reviewer", tmp_path, shim.Launch())


def test_the_agent_id_on_the_command_line_names_the_answer() -> None:
    args = ["--agent-id", "security-reviewer", "--allow-command", "pytest -q"]
    assert shim.parse_launch(args).agent_id == "security-reviewer"
    assert shim.identity(args, "claude") == "security-reviewer"
    assert shim.identity(["--yolo", "x", "--agent-id", "sec"], "claude") == "sec"
    assert shim.identity([], "claude") == "claude"
    for bad in ("", "-x", "a/b", "x" * 65):
        assert shim.identity(["--agent-id", bad], "claude") == "claude"
        with pytest.raises(shim.ShimError, match="not a registry id"):
            shim.parse_launch(["--agent-id", bad])


def test_an_unusable_launch_is_reported_under_the_agent_id(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    monkeypatch.setattr("signal.signal", lambda *_: None)  # keep pytest's own SIGTERM handler
    code = shim.main("claude", _unused, lambda: "", ["--agent-id", "sec", "--yolo", "x"])
    line = orjson.loads(capsysbinary.readouterr().out)
    assert code == 2 and line["agent_id"] == "sec"
    assert "usage" in line["error"]["message"]


def _unused(env: shim.Envelope, box: shim.Sandbox, launch: shim.Launch) -> dict[str, Any]:
    raise AssertionError("the launch was refused: no work is done")


def _fake_cli(folder: Path, name: str, script: str) -> None:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ('echo "2.1.330 (Claude Code)"', "claude 2.1.330 via claude-cli 0.1.0"),
        ('echo "2.0.1 (Claude Code)"; echo "9.9.9 on the second line"', "claude 2.0.1 via"),
        ("echo 'Claude Code'", "claude --version gave no version (exit 0): 'Claude Code'"),
        ("echo 2.1.330; exit 3", "claude --version gave no version (exit 3)"),
        (
            "echo 'SyntaxError: Unexpected token ?' >&2; echo 'node:1' >&2; exit 1",
            "claude --version gave no version (exit 1): 'SyntaxError: Unexpected token ?'",
        ),
        (None, "claude not found on PATH"),
    ],
)
def test_cli_version_reports_the_clis_version_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str | None, expected: str
) -> None:
    if script is not None:
        _fake_cli(tmp_path / "bin", "claude", script)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    try:
        got = cliprocess.cli_version("claude", "claude-cli 0.1.0")
    except shim.ShimError as exc:
        got = str(exc)
    assert got.startswith(expected)


@pytest.mark.parametrize(
    ("words", "wait"),
    [
        ("Rate limit reached. Please try again in 20s.", 20.0),
        ("Attempt 1 failed: Please retry in 3.5s", 3.5),
        ('{"@type": "RetryInfo", "retryDelay": "7s"}', 7.0),
        ("got retry-after: 30", 30.0),
        ("try again in 250ms", 0.25),
        ("You've hit your usage limit. Try again at 3pm.", None),
        ("This is a server-side issue, usually temporary — try again in a moment.", None),
    ],
)
def test_a_retryable_failure_carries_the_wait_its_words_ask_for(
    words: str, wait: float | None
) -> None:
    assert shim.ShimError(words, "retryable").retry_after_s == wait
    assert shim.ShimError(words, "hard").retry_after_s is None  # no retry: no wait
    line, code = shim.answer(None, "a", None, shim.ShimError(words, "retryable"))
    error = orjson.loads(line)["error"]
    assert code == 1 and error.get("retry_after_s") == wait


def test_a_call_over_its_max_tokens_is_refused() -> None:
    env = shim.Envelope({}, {"payload": {"budgets": {"max_tokens": 1000}}})
    shim.over_budget(env, {"metrics": {"tokens": 1000}})
    with pytest.raises(shim.ShimError, match="used 1001 tokens, over its max_tokens 1000"):
        shim.over_budget(env, {"metrics": {"tokens": 1001}})
    shim.over_budget(shim.Envelope({}, {"payload": {"budgets": {}}}), {"metrics": {"tokens": 9}})


def test_answer_in_takes_the_answer_fields_of_the_last_json_block() -> None:
    text = 'thinking\n```json\n{"notes": ["a"], "stray": 1}\n```\n'
    assert shim.answer_in(text, "x's reply") == {"notes": ["a"]}
    # Its twin: no JSON object anywhere is the CLI's failure, named in one line.
    with pytest.raises(shim.ShimError, match=r"^x's reply holds no JSON object$"):
        shim.answer_in("done, no json", "x's reply")


# -- what a repository could configure its CLI with ------------------------------------------

CLAUDE_LIKE = ("**/.claude", ".mcp.json", ".github/hooks")


@pytest.mark.parametrize(
    ("path", "folder", "held"),
    [
        (".claude", False, True),
        (".claude/settings.json", False, True),
        ("pkg/sub/.claude/skills/x/SKILL.md", False, True),
        (".mcp.json", False, True),
        (".github/hooks/h.json", False, True),
        ("CLAUDE.md", False, False),
        ("AGENTS.md", False, False),
        ("src/.mcp.json", False, False),  # read at the project's top only
        (".claude.md", False, False),
        (".github", False, False),  # a file of that name holds nothing
        (".github", True, True),  # a link to a folder could show .github/hooks there
        ("cfg", True, True),  # and any folder could show a .claude
        (".github/workflows/ci.yml", False, False),
    ],
)
def test_a_path_is_withheld_when_it_or_a_folder_above_it_is_named(
    path: str, folder: bool, held: bool
) -> None:
    assert shim.is_withheld(path, CLAUDE_LIKE, folder) is held
    assert not shim.is_withheld(path, (), folder)


def _repository(root: Path) -> None:
    files = {
        "src/calc.py": "x = 1\n",
        "CLAUDE.md": "Use tabs.\n",
        ".mcp.json": '{"mcpServers": {}}\n',
        ".claude/settings.json": '{"hooks": {}}\n',
        "pkg/.claude/skills/s/SKILL.md": "---\nname: s\n---\n",
        "cfg/settings.json": '{"hooks": {}}\n',
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "alias").symlink_to("cfg")  # a committed `alias -> cfg`: a second .claude, say
    (root / "calc-link.py").symlink_to("src/calc.py")  # a link to a file: an ordinary file


def test_the_sandbox_leaves_withheld_files_out_and_the_diffs_show_no_deletion(
    tmp_path: Path,
) -> None:
    source = tmp_path / "copy"
    source.mkdir()
    _repository(source)
    box = shim.Sandbox.create(source, ["**"], [], tmp_path, CLAUDE_LIKE)
    shown = sorted(
        str(p.relative_to(box.root)) for p in box.root.rglob("*") if ".git" not in p.parts
    )
    assert shown == ["CLAUDE.md", "calc-link.py", "cfg", "cfg/settings.json", "src", "src/calc.py"]
    assert box.diffs() == []  # nothing withheld reads as deleted
    (box.root / "src" / "calc.py").write_text("x = 2\n")
    assert [d["file"] for d in box.diffs()] == ["src/calc.py"]
    # The twin: a CLI without a list sees every visible file.
    (tmp_path / "other").mkdir()
    open_box = shim.Sandbox.create(source, ["**"], [], tmp_path / "other", ())
    assert (open_box.root / ".claude" / "settings.json").is_file()
    assert (open_box.root / "alias").is_symlink()


@pytest.mark.parametrize(
    "made", [".claude/settings.local.json", "sub/.claude/agents/a.md", ".mcp.json"]
)
def test_a_cli_that_writes_a_withheld_path_has_its_whole_diff_refused(
    made: str, tmp_path: Path
) -> None:
    source = tmp_path / "copy"
    (source / "src").mkdir(parents=True)
    (source / "src" / "calc.py").write_text("x = 1\n")
    box = shim.Sandbox.create(source, ["**"], [], tmp_path, CLAUDE_LIKE)
    (box.root / "src" / "calc.py").write_text("x = 2\n")
    (box.root / made).parent.mkdir(parents=True, exist_ok=True)
    (box.root / made).write_text('{"hooks": {"Stop": []}}\n')
    with pytest.raises(shim.ShimError, match="withholds those paths") as refused:
        box.diffs()
    assert refused.value.kind == "hard" and made in str(refused.value)


@pytest.mark.parametrize("config", [True, False], ids=["writes-config", "twin"])
def test_a_refused_diff_is_an_error_line_with_no_diff(
    config: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    """Through the shim's whole life: a call whose CLI wrote a withheld file answers a hard
    error that carries no diff; its twin, the same edit alone, lands it."""
    (tmp_path / "copy" / "src").mkdir(parents=True)
    (tmp_path / "copy" / "src" / "calc.py").write_text("x = 1\n")
    (tmp_path / "home").mkdir()
    monkeypatch.chdir(tmp_path / "copy")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    context = {"task_id": "t", "ts": "1970-01-01T00:00:00Z"}
    context["payload"] = {"visible": ["**"], "readonly": []}  # type: ignore[assignment]
    env = shim.Envelope(context, {"payload": {"write_scope": "src/**"}})
    monkeypatch.setattr(shim, "read_envelope", lambda data: env)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))

    def work(env: shim.Envelope, box: shim.Sandbox, launch: shim.Launch) -> dict[str, Any]:
        (box.root / "src" / "calc.py").write_text("x = 2\n")
        if config:
            (box.root / ".claude").mkdir()
            (box.root / ".claude" / "settings.json").write_text("{}")
        return {"notes": []}

    code = shim.main("claude", work, lambda: "", [], CLAUDE_LIKE)
    line = orjson.loads(capsysbinary.readouterr().out)
    if config:
        assert code == shim.EXIT["hard"] and line["status"] == "error"
        assert ".claude/settings.json" in line["error"]["message"] and "result" not in line
    else:
        assert code == 0 and [d["file"] for d in line["result"]["diffs"]] == ["src/calc.py"]


SEGMENTS = st.sampled_from([".claude", ".github", "hooks", "src", "a.json", ".mcp.json", "x"])


@FAST
@given(
    st.lists(SEGMENTS, min_size=1, max_size=5).map("/".join),
    st.lists(st.sampled_from([*CLAUDE_LIKE, "**/.codex", "*.json", ".github/*/x"]), max_size=3),
)
def test_a_withheld_file_is_one_a_pattern_or_a_folder_above_it_matches(
    path: str, patterns: list[str]
) -> None:
    """The scope globs as the oracle: a file is withheld exactly when `P` or `P/**` takes it."""
    oracle = any(scope.matches(path, [p, f"{p}/**"]) for p in patterns)
    assert shim.is_withheld(path, tuple(patterns)) is oracle


def test_instructions_files_are_fenced_as_the_repositorys_and_links_skipped(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("Use tabs.\n")
    (tmp_path / "AGENTS.md").symlink_to("/etc/hostname")  # what the sandbox does not hold
    (tmp_path / "CLAUDE.local.md").write_text("x" * (prompts.MAX_INSTRUCTIONS + 10))
    text = prompts.instructions(tmp_path, ("CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "NO.md"))
    assert '<<<instructions "CLAUDE.md" from repository id ' in text and "Use tabs." in text
    assert '"AGENTS.md"' not in text and "x" * prompts.MAX_INSTRUCTIONS in text
    assert "x" * (prompts.MAX_INSTRUCTIONS + 1) not in text
    assert prompts.instructions(tmp_path / "none", ("CLAUDE.md",)) == ""
