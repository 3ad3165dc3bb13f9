"""The command line end to end: real git repositories, the real `harness` process."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.base import schemas
from harness.boundary import registry
from harness.importers import demo
from harness.record import tokens
from harness.spec import config

from .conftest import Sample, calc_patch, demo_cli, err, ok, subtask

PLAN = "ai/tasks/demo/plan.json"


def plain_repo(root: Path, commit: bool = True) -> Sample:
    """A fresh git repository on branch main, with one commit unless told otherwise."""
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    made = Sample(root, root.parent / "script.json")
    if commit:
        (root / "README.md").write_text("hello\n")
        made.commit_all("first")
    return made


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def one_line(res: subprocess.CompletedProcess[str]) -> str:
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


def demo_answers(sample: Sample) -> None:
    sample.write_script(orjson.loads((sample.root / "agents/script.json").read_bytes())["answers"])


# -- init ------------------------------------------------------------------------------------


def test_init_creates_what_is_missing_and_never_overwrites(tmp_path: Path) -> None:
    repo = plain_repo(tmp_path / "r")
    res = repo.cli("init")
    assert res.returncode == 0, res.stderr
    made = tree_bytes(repo.root)
    assert set(made) == {
        "README.md",
        "ai/harness.toml",
        "ai/agents/registry.json",
        "ai/agents/write_tokens.json",
        "ai/agents/bin/claude-cli",
        "ai/agents/bin/codex-cli",
    }
    # what init wrote is what harness itself accepts
    config.load(repo.root / "ai/harness.toml")
    agents = registry.load(repo.root / "ai/agents/registry.json", repo.root)
    assert [(a.id, a.cmd) for a in agents] == [
        ("claude", "ai/agents/bin/claude-cli"),
        ("codex", "ai/agents/bin/codex-cli"),
    ]
    assert "test-author" in agents[0].capabilities and "plan" in agents[1].capabilities
    # Each CLI may see its keys and the base URL a gateway user points it with, and is
    # bound as installed.
    assert {"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_BASE_URL"} <= set(
        agents[0].env
    )
    assert {"CODEX_API_KEY", "OPENAI_BASE_URL"} <= set(agents[1].env)
    assert [a.cli for a in agents] == ["claude", "codex"]
    assert "localized-impl" in agents[1].capabilities
    # Each CLI must reach its model's API, and only that: through harness's proxy.
    assert all(a.network == "proxy" for a in agents)
    assert os.access(repo.root / "ai/agents/bin/claude-cli", os.X_OK)
    assert tokens.load(repo.root / "ai/agents/write_tokens.json", repo.root) == []

    again = repo.cli("init")
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert tree_bytes(repo.root) == made

    mine = b'[identity]\nname = "me"\nemail = "me@example.invalid"\n'
    (repo.root / "ai/harness.toml").write_bytes(mine)
    (repo.root / "ai/agents/registry.json").unlink()
    third = repo.cli("init")
    assert third.returncode == 0
    assert third.stdout.strip() == "created ai/agents/registry.json"
    assert (repo.root / "ai/harness.toml").read_bytes() == mine
    assert tree_bytes(repo.root) == made | {"ai/harness.toml": mine}

    status = repo.git("status", "--porcelain", "--untracked-files=all")
    assert "ai/harness.toml" in status


# -- tokens ----------------------------------------------------------------------------------


def test_tokens_issue_list_revoke(tmp_path: Path) -> None:
    repo = plain_repo(tmp_path / "r")
    store = repo.root / "ai/agents/write_tokens.json"
    first = repo.cli("tokens", "issue", "--paths", "src/**", "tests/**", "--ttl", "2h")
    second = repo.cli("tokens", "issue", "--paths", "docs/**", "--ttl", "30m", "--one-shot")
    assert (first.returncode, first.stdout) == (0, "W1\n"), first.stderr
    assert (second.returncode, second.stdout) == (0, "W2\n"), second.stderr
    data = orjson.loads(store.read_bytes())
    assert schemas.problem("write-tokens", data) is None
    assert data["tokens"] == [
        {
            "id": "W1",
            "paths": ["src/**", "tests/**"],
            "expires": "2026-01-01T02:00:00Z",
            "one_shot": False,
        },
        {"id": "W2", "paths": ["docs/**"], "expires": "2026-01-01T00:30:00Z", "one_shot": True},
    ]

    listed = repo.cli("tokens", "list")
    assert listed.returncode == 0
    assert listed.stdout.splitlines() == [
        "W1\tsrc/** tests/**\t2026-01-01T02:00:00Z\treusable\tusable",
        "W2\tdocs/**\t2026-01-01T00:30:00Z\tone-shot\tusable",
    ]
    later = repo.cli("tokens", "list", env={"HARNESS_CLOCK": "2026-01-01T01:00:00Z"})
    assert "token W2 expired at 2026-01-01T00:30:00Z" in later.stdout.splitlines()[1]

    revoked = repo.cli("tokens", "revoke", "W1")
    assert revoked.returncode == 0 and revoked.stdout == "revoked W1\n"
    listed = repo.cli("tokens", "list").stdout.splitlines()
    assert listed[0].endswith("\ttoken W1 is revoked") and listed[1].endswith("\tusable")
    assert orjson.loads(store.read_bytes())["tokens"][0]["revoked"] is True

    before = store.read_bytes()
    unknown = repo.cli("tokens", "revoke", "W9")
    assert unknown.returncode == 2 and "W9" in one_line(unknown)
    assert store.read_bytes() == before


# Past the year 9999 a token's expiry has no timestamp: timedelta or the date overflowed.
@pytest.mark.parametrize("ttl", ["2x", "1.5h", "3000000d", "99999999999999999999d"])
def test_tokens_issue_refuses_a_bad_ttl(tmp_path: Path, ttl: str) -> None:
    repo = plain_repo(tmp_path / "r")
    res = repo.cli("tokens", "issue", "--paths", "src/**", "--ttl", ttl)
    assert res.returncode == 2
    assert f"--ttl {ttl!r}" in one_line(res)
    assert res.stdout == "" and not (repo.root / "ai/agents/write_tokens.json").exists()


# -- plan validate / show ----------------------------------------------------------------------


def test_plan_validate_accepts_the_demo_plan_and_prints_its_order(sample: Sample) -> None:
    res = sample.cli("plan", "validate", "demo")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "plan demo is valid: 3 subtasks, order T1 -> T2 -> T3\n"


def _edit(change: Callable[[dict[str, Any]], object]) -> Callable[[Sample], None]:
    def apply(sample: Sample) -> None:
        doc = copy.deepcopy(demo.PLAN)
        change(doc)
        sample.write_json(PLAN, doc)

    return apply


def _sub(i: int, **fields: Any) -> Callable[[dict[str, Any]], object]:
    return lambda doc: doc["subtasks"][i].update(fields)


def _raw(text: str) -> Callable[[Sample], None]:
    return lambda sample: (sample.root / PLAN).write_text(text)


def _cycle3(doc: dict[str, Any]) -> None:
    doc["subtasks"][0]["depends_on"] = ["T3"]
    doc["subtasks"][2]["depends_on"] = ["T2"]


# Each a plan `run` refuses as invalid input (2), then those its pre-flight halts on (1).
BAD_PLANS = [
    ("invalid-json", _raw('{"task_id": "demo",'), f"{PLAN}: invalid JSON: "),
    (
        "missing-field",
        _edit(lambda d: d["subtasks"][0].pop("goal")),
        f"{PLAN}: $.subtasks[0]: 'goal' is a required property",
    ),
    ("empty-goal", _edit(_sub(0, goal="")), f"{PLAN}: $.subtasks[0].goal: ''"),
    ("unknown-field", _edit(_sub(2, colour="red")), f"{PLAN}: $.subtasks[2]: "),
    ("duplicate-id", _edit(_sub(2, id="T1")), f"{PLAN}: duplicate subtask id 'T1'"),
    (
        "unknown-dep",
        _edit(_sub(2, depends_on=["T9"])),
        f"{PLAN}: subtask T3 depends on unknown subtask 'T9'",
    ),
    ("cycle-2", _edit(_sub(0, depends_on=["T2"])), f"{PLAN}: dependency cycle: T1 -> T2 -> T1"),
    ("cycle-3", _edit(_cycle3), f"{PLAN}: dependency cycle: T1 -> T3 -> T2 -> T1"),
    ("task-id", _edit(lambda d: d.update(task_id="other")), f"{PLAN}: $.task_id: 'other'"),
    ("missing", lambda s: (s.root / PLAN).unlink(), f"{PLAN}: file not found"),
]
PREFLIGHT_PROBLEMS = [
    (
        "role",
        _edit(_sub(0, role="astronaut")),
        f"{PLAN}: subtask T1: no agent in the registry takes role 'astronaut'",
    ),
    (
        "agent",
        _edit(_sub(0, agent="nobody")),
        f"{PLAN}: subtask T1: agent 'nobody' is not in the registry",
    ),
    (
        "no-token-covers",
        _edit(_sub(0, write_scope="lib/**")),
        f"{PLAN}: subtask T1: no usable token covers lib/**",
    ),
    (
        "creates-uncovered",
        _edit(_sub(2, creates=["site/*.html"])),
        f"{PLAN}: subtask T3: no usable token covers docs/**, site/*.html",
    ),
    (
        "named-token-narrow",
        _edit(_sub(0, token="W1", write_scope=["src/**", "lib/**"])),
        f"{PLAN}: subtask T1: token W1 does not cover src/**, lib/**",
    ),
    (
        "named-token-missing",
        _edit(_sub(0, token="W7")),
        f"{PLAN}: subtask T1: token W7 does not exist",
    ),
]


@pytest.mark.parametrize(
    ("spoil", "expected", "code"),
    [(*c[1:], 2) for c in BAD_PLANS] + [(*c[1:], 1) for c in PREFLIGHT_PROBLEMS],
    ids=[c[0] for c in BAD_PLANS + PREFLIGHT_PROBLEMS],
)
def test_plan_validate_refuses_with_one_line(
    sample: Sample, spoil: Callable[[Sample], None], expected: str, code: int
) -> None:
    spoil(sample)
    res = sample.cli("plan", "validate", "demo")
    assert res.returncode == code
    assert expected in one_line(res)
    assert res.stdout == ""


def test_plan_validate_sees_an_expired_token(sample: Sample) -> None:
    res = sample.cli("plan", "validate", "demo", env={"HARNESS_CLOCK": "2026-01-03T00:00:00Z"})
    assert res.returncode == 1 and "T1: no usable token covers src/**" in res.stderr


BAD_FILES = [
    ("registry-json", "ai/agents/registry.json", '{"agents": [', "ai/agents/registry.json: "),
    (
        "registry-schema",
        "ai/agents/registry.json",
        '{"agents": 3}',
        "ai/agents/registry.json: $.agents: 3 is not of type 'array'",
    ),
    (
        "registry-range",
        "ai/agents/registry.json",
        '{"agents": [{"id": "a", "cmd": "x", "version": "~~1", "capabilities": []}]}',
        "ai/agents/registry.json: agent a: bad version range",
    ),
    ("tokens-json", "ai/agents/write_tokens.json", "{", "ai/agents/write_tokens.json: "),
    (
        "tokens-schema",
        "ai/agents/write_tokens.json",
        '{"tokens": [{"id": "W1"}]}',
        "ai/agents/write_tokens.json: $.tokens[0]: 'paths' is a required property",
    ),
    ("toml-syntax", "ai/harness.toml", "[identity\n", "harness.toml: invalid TOML"),
    (
        "toml-schema",
        "ai/harness.toml",
        "[verify]\nbuild = 3\n",
        "ai/harness.toml: $.verify.build: 3 is not of type 'string'",
    ),
    (
        "toml-timeouts",
        "ai/harness.toml",
        "[defaults]\ntimeouts = { soft_s = 9, hard_s = 1 }\n",
        "ai/harness.toml: $.defaults.timeouts",
    ),
    # Each of the next crashed a run (exit 4): exec, git and orjson refuse them far later.
    (
        "registry-nul-schema",
        "ai/agents/registry.json",
        '{"agents": [{"id": "a", "cmd": "x", "args": ["a\\u0000"], "version": ">=1", '
        '"capabilities": []}]}',
        "ai/agents/registry.json: $.agents[0].args[0]: 'a\\\\x00' does not match",
    ),
    (
        "toml-nul-schema",
        "ai/harness.toml",
        '[verify]\nbuild = "make \\u0000"\n',
        "ai/harness.toml: a string holds a NUL character: 'make \\x00'",
    ),
    (
        "toml-identity-schema",
        "ai/harness.toml",
        '[identity]\nname = "a\\nCommitter: b"\n',
        "ai/harness.toml: $.identity.name: 'a\\\\nCommitter: b' holds '<', '>' or a line end",
    ),
    (
        "toml-license-regex",
        "ai/harness.toml",
        '[verify]\nlicense = { header = "[", paths = ["**"] }\n',
        "ai/harness.toml: $.verify.license.header: no regular expression: unterminated",
    ),
    (
        "toml-license-repeat",
        "ai/harness.toml",
        '[verify]\nlicense = { header = "a{4294967296}", paths = ["**"] }\n',
        "ai/harness.toml: $.verify.license.header: no regular expression: the repetition",
    ),
    # Read and removed in a copy: an absolute or climbing path was the host's (a pull
    # request's config replayed on CI deleted /dev/zero).
    (
        "toml-report-outside-schema",
        "ai/harness.toml",
        '[coverage]\nreport = "/tmp/victim"\n',
        "ai/harness.toml: $.coverage.report: '/tmp/victim' is no path inside the copy",
    ),
    (
        "toml-junit-outside-schema",
        "ai/harness.toml",
        '[verify]\njunit = "out/../../x.xml"\n',
        "ai/harness.toml: $.verify.junit: 'out/../../x.xml' is no path inside the copy",
    ),
    (
        "toml-deep",
        "ai/harness.toml",
        "[verify]\nx = " + "[" * 2000 + "]" * 2000 + "\n",
        "ai/harness.toml: invalid TOML: nested too deep",
    ),
    (
        "toml-64-bits",
        "ai/harness.toml",
        "[defaults]\ntimeouts = { soft_s = 1, hard_s = 100000000000000000000000 }\n",
        "ai/harness.toml: 100000000000000000000000 is past 64 bits",
    ),
    (
        "plan-nul-schema",
        "ai/tasks/demo/plan.json",
        '{"task_id": "demo", "created": "2026-01-01T00:00:00Z", "subtasks": [{"id": "T1", '
        '"role": "localized-impl", "goal": "g", "inputs": [], "write_scope": "src/**", '
        '"acceptance": ["cmd: make \\u0000"]}]}',
        "ai/tasks/demo/plan.json: a string holds a NUL character: 'cmd: make \\x00'",
    ),
    (
        "toml-limit-unit",
        "ai/harness.toml",
        '[sandbox.limits]\nmemory = "8GB"\n',
        "ai/harness.toml: $.sandbox.limits.memory: '8GB' is no limit: bytes, as a number or",
    ),
    (
        "toml-limit-zero",
        "ai/harness.toml",
        "[sandbox.limits]\nprocesses = 0\n",
        "ai/harness.toml: $.sandbox.limits.processes: 0 is no limit: a whole number above 0",
    ),
    (
        "toml-limit-schema",
        "ai/harness.toml",
        "[sandbox.limits]\nram = 1\n",
        "ai/harness.toml: $.sandbox.limits: Additional properties are not allowed ('ram'",
    ),
    (
        "registry-limit",
        "ai/agents/registry.json",
        '{"agents": [{"id": "a", "cmd": "x", "version": "1", "capabilities": [], '
        '"limits": {"tmp": "lots"}}]}',
        "ai/agents/registry.json: agent a: limits.tmp: 'lots' is no limit",
    ),
    (
        "tokens-no-instant",
        "ai/agents/write_tokens.json",
        '{"tokens": [{"id": "W1", "paths": ["**"], "expires": "2026-02-30T00:00:00Z", '
        '"one_shot": false}]}',
        "ai/agents/write_tokens.json: token W1: expires 2026-02-30T00:00:00Z is no instant",
    ),
]


@pytest.mark.parametrize(
    ("rel", "text", "expected"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES]
)
def test_plan_validate_refuses_a_broken_harness_file(
    sample: Sample, rel: str, text: str, expected: str
) -> None:
    (sample.root / rel).write_text(text)
    res = sample.cli("plan", "validate", "demo")
    assert res.returncode == 2
    assert expected in one_line(res)


def test_toml_syntax_error_names_the_repository_path(sample: Sample) -> None:
    (sample.root / "ai/harness.toml").write_text("[identity\n")
    res = sample.cli("plan", "validate", "demo")
    assert res.returncode == 2 and "ai/harness.toml: invalid TOML" in one_line(res)


def assert_nothing_written(sample: Sample, head: str, dirty: str) -> None:
    assert sample.head() == head
    assert not (sample.root / "ai/tasks/demo/progress.ndjson").exists()
    assert not (sample.root / "ai/tasks/demo/checklist.md").exists()
    assert not (sample.root / "ai/exchanges").exists()
    assert sample.git("status", "--porcelain", "--untracked-files=all") == dirty


@pytest.mark.parametrize(
    ("rel", "text", "expected"),
    [c[1:] for c in BAD_FILES if c[0].endswith("schema")],
    ids=[c[0] for c in BAD_FILES if c[0].endswith("schema")],
)
def test_next_with_a_broken_harness_file_writes_nothing(
    sample: Sample, rel: str, text: str, expected: str
) -> None:
    demo_answers(sample)
    head = sample.head()
    (sample.root / rel).write_text(text)
    dirty = sample.git("status", "--porcelain", "--untracked-files=all")
    res = sample.cli("next", "demo")
    assert res.returncode == 2
    assert expected in one_line(res)
    assert res.stdout == ""
    assert_nothing_written(sample, head, dirty)


def test_plan_show_prints_topological_order(sample: Sample) -> None:
    sample.write_plan(
        [
            subtask("T2", depends_on=["T1"], goal="second"),
            subtask("T3", depends_on=["T2"], role="doc-writer", goal="third"),
            subtask("T1", goal="first"),
            subtask("T4", goal="free"),
        ]
    )
    res = sample.cli("plan", "show", "demo")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "T1\tlocalized-impl\tfirst",
        "T2\tlocalized-impl\tsecond after T1",
        "T3\tdoc-writer\tthird after T2",
        "T4\tlocalized-impl\tfree",
    ]
    bad = sample.cli("plan", "show", "other")
    assert bad.returncode == 2 and "ai/tasks/other/plan.json: file not found" in one_line(bad)


# -- status ----------------------------------------------------------------------------------

ROWS = [("T1", "localized-impl"), ("T2", "test-author"), ("T3", "doc-writer")]


def status_json(sample: Sample) -> dict[str, Any]:
    res = sample.cli("status", "demo", "--json")
    assert res.returncode == 0, res.stderr
    doc: dict[str, Any] = orjson.loads(res.stdout)
    assert set(doc) == {
        "task_id",
        "blocked",
        "complete",
        "subtasks",
        "cost_usd",
        "cost_unknown_calls",
        "uncontained_events",
        "budgets",
    }
    assert doc["uncontained_events"] == 0
    assert doc["budgets"] == {}  # the demo sets none
    assert doc["task_id"] == "demo"
    for row in doc["subtasks"]:
        assert set(row) == {
            "id",
            "role",
            "plan",
            "status",
            "reason",
            "commit",
            "call_id",
            "unverified",
        }
    assert [(r["id"], r["role"]) for r in doc["subtasks"]] == ROWS
    return doc


def test_status_before_and_after_a_step(sample: Sample) -> None:
    demo_answers(sample)
    table = sample.cli("status", "demo")
    assert table.returncode == 0
    assert table.stdout.splitlines() == [f"{i}\t{r}\tpending\t-\t-" for i, r in ROWS]
    doc = status_json(sample)
    assert doc["blocked"] is None and doc["complete"] is False
    assert [(r["status"], r["commit"], r["call_id"]) for r in doc["subtasks"]] == [
        ("pending", None, None)
    ] * 3

    step = sample.cli("next", "demo")
    assert step.returncode == 0, step.stderr
    commit = sample.git("rev-parse", "HEAD~1").strip()  # HEAD is the record commit
    call = next(e for e in sample.events() if e["event"] == "subagent_invoked")["details"]
    assert step.stdout == f"T1\tdone\t{commit[:12]}\t{call['call_id'][:12]}\n"

    doc = status_json(sample)
    assert doc["blocked"] is None and doc["complete"] is False
    first = doc["subtasks"][0]
    assert (first["status"], first["commit"], first["call_id"]) == ("done", commit, call["call_id"])
    assert [r["status"] for r in doc["subtasks"][1:]] == ["pending", "pending"]
    table = sample.cli("status", "demo").stdout.splitlines()
    assert table[0] == f"T1\tlocalized-impl\tdone\t{commit[:12]}\t{call['call_id'][:12]}"
    assert table[1:] == [  # T1's criterion, a command, was checked: nothing unverified
        "T2\ttest-author\tpending\t-\t-",
        "T3\tdoc-writer\tpending\t-\t-",
    ]


# -- registry check --------------------------------------------------------------------------


def test_registry_check_ok(sample: Sample) -> None:
    res = sample.cli("registry", "check")
    assert res.returncode == 0, res.stdout + res.stderr
    agent, verdict, version, wanted = res.stdout.strip().split("\t")
    assert (agent, verdict, wanted) == ("scripted", "ok", ">=0.1")
    assert re.fullmatch(r"\d+(\.\d+)+", version)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("cmd", "agents/missing-cli", "ghost\tFAIL\tagent ghost: agents/missing-cli not found"),
        ("version", ">=99", "ghost\tFAIL\tagent ghost: version "),
    ],
)
def test_registry_check_names_the_failing_agent(
    sample: Sample, field: str, value: str, expected: str
) -> None:
    reg = sample.read_json("ai/agents/registry.json")
    ghost = dict(reg["agents"][0], id="ghost", **{field: value})
    reg["agents"].append(ghost)
    sample.write_json("ai/agents/registry.json", reg)
    res = sample.cli("registry", "check")
    assert res.returncode == 1
    lines = res.stdout.splitlines()
    assert lines[0].startswith("scripted\tok\t")  # the good agent still checks out
    assert lines[1].startswith(expected)
    if field == "version":
        assert lines[1].endswith("outside >=99")


# -- refusals before any work ----------------------------------------------------------------


@pytest.mark.parametrize("task_id", ["a/b", "..", "../demo"])
def test_task_id_that_is_not_a_plain_name_is_refused(sample: Sample, task_id: str) -> None:
    head = sample.head()
    res = sample.cli("next", task_id)
    assert res.returncode == 2
    assert f"task id {task_id!r}" in one_line(res)
    assert sample.head() == head and not (sample.root / "ai/tasks/demo/progress.ndjson").exists()


def test_next_outside_a_git_repository_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    res = Sample(plain, tmp_path / "s.json").cli("next", "demo")
    assert res.returncode == 2
    assert f"{plain}: not inside a git repository" in one_line(res)
    assert list(plain.iterdir()) == []


def unborn(tmp_path: Path) -> Sample:
    """The demo's harness files in a repository that has no commit yet."""
    root = tmp_path / "unborn"
    root.mkdir()
    demo.build(root)
    subprocess.run(
        ["rm", "-rf", str(root / ".git"), str(root / "src"), str(root / "tests")], check=True
    )
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    return Sample(root, tmp_path / "script.json")


def test_next_in_a_repository_without_commits_is_refused(tmp_path: Path) -> None:
    repo = unborn(tmp_path)
    res = repo.cli("next", "demo")
    assert res.returncode == 2
    assert "no commits yet" in one_line(res)


def test_next_on_a_detached_head_is_refused(sample: Sample) -> None:
    sample.git("checkout", "-q", "--detach")
    res = sample.cli("next", "demo")
    assert res.returncode == 2
    assert "HEAD is detached" in one_line(res)


@pytest.mark.parametrize("case", ["detached", "unborn", "unroutable"])
def test_a_refused_step_writes_nothing(sample: Sample, tmp_path: Path, case: str) -> None:
    repo = sample
    if case == "detached":
        sample.git("checkout", "-q", "--detach")
    elif case == "unborn":
        repo = unborn(tmp_path)
    else:
        sample.write_plan([subtask("T1", role="astronaut")])
        sample.commit_all("a role nobody takes")
    head = repo.git("rev-parse", "-q", "--verify", "HEAD^{commit}") if case != "unborn" else ""
    # A plan no agent can take is a pre-flight problem (1), the others invalid input (2).
    assert repo.cli("next", "demo").returncode == (1 if case == "unroutable" else 2)
    assert not (repo.root / "ai/tasks/demo/progress.ndjson").exists()
    if head:
        assert repo.head() == head.strip()


@pytest.mark.parametrize("reason", [b"\xff", b"\xed\xa0\x80", "caf\u00e9".encode()])
def test_an_argument_that_is_not_utf8_is_refused_before_anything(
    sample: Sample, reason: bytes
) -> None:
    """argv is bytes: Python gives what is not UTF-8 as lone surrogates, and a reason so
    given crashed `reject` when orjson wrote it into the log (exit 4)."""
    demo_answers(sample)
    argv = [sys.executable, "-m", "harness.cli", "resume", "demo", "--reason", reason]
    res = subprocess.run(argv, cwd=sample.root, capture_output=True, text=True, timeout=60)
    if reason == "caf\u00e9".encode():  # the twin: text, refused for another reason
        assert "not UTF-8" not in res.stderr
        return
    assert (res.returncode, res.stderr) == (2, "harness: argument 4 is not UTF-8 text\n")
    assert not (sample.root / "ai/tasks/demo/progress.ndjson").exists()


# -- exit 4 ----------------------------------------------------------------------------------


def test_internal_error_exits_4_with_a_crash_log(sample: Sample, tmp_path: Path) -> None:
    (sample.root / ".git/harness").write_text("")  # where harness's own folder should be
    crashes = tmp_path / "crashes"
    crashes.mkdir()
    head = sample.head()
    res = sample.cli("next", "demo", env={"TMPDIR": str(crashes)})
    assert res.returncode == 4
    found = re.fullmatch(r"harness: internal error; crash log: (\S+)", one_line(res))
    assert found is not None, res.stderr
    log = Path(found.group(1))
    assert log.parent == crashes and log.is_file()
    text = log.read_text()
    assert text.startswith("Traceback (most recent call last):")
    assert "NotADirectoryError" in text and "cli/main.py" in text
    assert sample.head() == head


# -- demo and run ----------------------------------------------------------------------------


def run_demo(where: Path, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    return demo_cli("--dir", str(where), python=python)


def test_demo_runs_offline_and_is_reproducible(tmp_path: Path) -> None:
    """Twice, through two names of the same Python: where harness is installed (the path
    of its interpreter) changes no commit id."""
    outputs = []
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    names = [n for n in ("python3", version, "python") if n != Path(sys.executable).name]
    sibling = next(p for n in names if (p := Path(sys.executable).with_name(n)).exists())
    for name, python in (("one", sys.executable), ("two", str(sibling))):
        res = run_demo(tmp_path / name, python)
        assert res.returncode == 0, res.stderr
        out = res.stdout
        assert "task demo complete" in out
        assert "audit demo: 23 events, clean" in out
        assert "replay demo: 23 events and 3 commits reproduced" in out
        for subject in (
            "localized-impl: Add a subtract function to src/calc.py",
            "test-author: Add tests for subtract",
            "doc-writer: Document the calculator",
        ):
            assert subject in out
        assert f"log: {tmp_path / name}/ai/tasks/demo/progress.ndjson" in out
        assert (tmp_path / name / "ai/tasks/demo/progress.ndjson").is_file()
        table = [line for line in out.splitlines() if re.match(r"T\d\t[a-z]+-[a-z]+\t", line)]
        assert [line.split("\t")[:3] for line in table] == [
            ["T1", "localized-impl", "done"],
            ["T2", "test-author", "done"],
            ["T3", "doc-writer", "done"],
        ]
        commits = out.split("commits:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        outputs.append(commits)
    assert outputs[0] == outputs[1] == DEMO_COMMITS


# The demo's commits, record included: the same bytes wherever and whenever it runs, and a
# change of harness's code that moves one of these has changed what harness records.
DEMO_COMMITS = [
    "8f1fff8 harness: record demo",
    "7dbbff1 doc-writer: Document the calculator",
    "decfd9d test-author: Add tests for subtract",
    "eff0c30 localized-impl: Add a subtract function to src/calc.py",
    "c44269b Sample calculator",
]


def test_demo_refuses_a_non_empty_dir(tmp_path: Path) -> None:
    where = tmp_path / "busy"
    where.mkdir()
    (where / "keep.txt").write_text("mine\n")
    res = run_demo(where)
    assert res.returncode == 2
    assert "is not empty" in one_line(res)
    assert [p.name for p in where.iterdir()] == ["keep.txt"]


def test_run_stops_at_a_hard_failure_after_printing_what_it_did(sample: Sample) -> None:
    sample.write_plan(
        [
            subtask("T1"),
            subtask("T2", depends_on=["T1"]),
            subtask("T3", depends_on=["T2"]),
        ]
    )
    sample.write_script([ok("T1", ("src/calc.py", calc_patch())), err("T2", "hard", "no way")])
    res = sample.cli("run", "demo")
    assert res.returncode == 1
    lines = res.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("T1\tdone\t")
    assert "T2 blocked: no way" in one_line(res)
    doc = orjson.loads(sample.cli("status", "demo", "--json").stdout)
    assert [r["status"] for r in doc["subtasks"]] == ["done", "blocked", "pending"]
    assert doc["blocked"] == {"step": "T2", "error": "no way"}


def test_plan_validate_refuses_an_impossible_criterion_and_accepts_its_twin(
    sample: Sample,
) -> None:
    sample.write_plan([subtask("T1", acceptance=["line>=80"])])
    res = sample.cli("plan", "validate", "demo")
    assert res.returncode == 2
    assert "subtask T1: acceptance 'line>=80'" in res.stderr and "80%" in res.stderr
    sample.write_plan([subtask("T1", acceptance=["line>=80%"])])
    assert sample.cli("plan", "validate", "demo").returncode == 0


def test_output_cut_short_by_the_reader_is_no_crash(tmp_path: Path) -> None:
    """`harness log demo | head -1`: a reader that stops early ends the command quietly."""
    root = tmp_path / "d"
    made = subprocess.run(
        [sys.executable, "-m", "harness.cli", "demo", "--dir", str(root)],
        capture_output=True,
        check=False,
    )
    assert made.returncode == 0
    child = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "log", "demo", "--repo", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # long before the child, still importing, writes a line
    with child.stderr:
        err = child.stderr.read().decode()
    assert child.wait(timeout=60) == 0, err
    assert err == ""


def test_written_files_follow_the_umask(tmp_path: Path) -> None:
    from harness.base import files

    old = os.umask(0o022)
    try:
        files.atomic_write(tmp_path / "report.html", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "report.html").stat().st_mode & 0o777 == 0o644


# -- a stale index.lock ------------------------------------------------------------------------


def test_a_stale_index_lock_stops_the_step_before_its_commit_then_it_goes_on(
    sample: Sample,
) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    before = (sample.root / "src/calc.py").read_bytes()
    lock = sample.root / ".git/index.lock"
    lock.touch()  # what a killed git leaves behind
    head = sample.head()
    res = sample.cli("next", "demo")
    assert res.returncode == 1
    assert sample.head() == head  # no subtask commit, and no record commit either
    # Which git command met the lock first is beside the point.
    assert re.fullmatch(
        rf"harness: git [a-z-]+: {re.escape(str(lock))} exists; if no git is running "
        r"\(a killed harness leaves it\), remove it and run again",
        one_line(res),
    )
    assert sample.git("log", "--format=%H", "--grep=Harness-Subtask:") == ""
    assert (sample.root / "src/calc.py").read_bytes() == before
    assert "step_failed" not in sample.names()  # the task is not blocked: only waiting
    # The twin: with the lock gone, the same step goes on from its recorded answer.
    lock.unlink()
    res = sample.cli("next", "demo")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("T1\tdone")
    assert sample.names().count("subagent_invoked") == 1
    assert (sample.root / "src/calc.py").read_bytes() == before + b"VALUE = 1\n"
    assert sample.git("status", "--porcelain") == ""
