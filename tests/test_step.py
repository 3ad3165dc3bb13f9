"""`harness next` / `run` end to end on real repositories through the real CLI."""

from __future__ import annotations

import hashlib
import time

import orjson
import pytest

from harness.record import protocol
from harness.record.progress import GENESIS, line_hash
from harness.repository import repo
from harness.step.subtask import MAX_BACKOFF_S, Subtask

from .conftest import Sample, calc_patch, err, new_file_patch, ok, subtask


def chain_ok(sample: Sample) -> None:
    data = (sample.root / "ai/tasks/demo/progress.ndjson").read_bytes()
    prev = GENESIS
    for seq, line in enumerate(data.splitlines()):
        ev = orjson.loads(line)
        assert ev["seq"] == seq and ev["prev"] == prev
        prev = line_hash(line)


def test_demo_plan_runs_to_completion_with_one_commit_per_subtask(sample: Sample) -> None:
    sample.write_script(
        [  # the demo's own answers
            *orjson.loads((sample.root / "agents/script.json").read_bytes())["answers"]
        ]
    )
    base = sample.head()
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    assert "task demo complete" in res.stdout
    subjects = sample.git("log", "--format=%s", f"{base}..HEAD").splitlines()
    assert subjects == [
        "harness: record demo",
        "doc-writer: Document the calculator",
        "test-author: Add tests for subtract",
        "localized-impl: Add a subtract function to src/calc.py",
    ]
    assert sample.status_outside_ai() == ""
    assert sample.git("status", "--porcelain") == ""  # the record commit holds ai/ state
    names = sample.names()
    assert names[0] == "task_started" and names[-1] == "task_completed"
    assert names.count("step_completed") == 3
    assert names.count("test_passed") == 3
    chain_ok(sample)
    checklist = (sample.root / "ai/tasks/demo/checklist.md").read_text()
    assert checklist.count("- [x]") == 3
    # The files the branch now holds are what the worker's diffs said.
    assert "def subtract" in (sample.root / "src/calc.py").read_text()
    tree = sample.git("ls-tree", "-r", "--name-only", "HEAD").split()
    assert "ai/tasks/demo/progress.ndjson" in tree
    assert any(p.startswith("ai/exchanges/demo/") and p.endswith("meta.json") for p in tree)
    assert not any(p.startswith("ai/tmp/") for p in tree)


def test_commit_carries_trailers_fixed_identity_and_recorded_date(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("next", "demo").returncode == 0
    applied = next(e for e in sample.events() if e["event"] == "subagent_diffs_applied")
    commit = applied["details"]["commit"]
    body = sample.git("log", "-1", "--format=%B", commit)
    trailers = repo.trailers(body)
    invoked = next(e for e in sample.events() if e["event"] == "subagent_invoked")
    assert trailers["Harness-Task"] == "demo"
    assert trailers["Harness-Subtask"] == "T1"
    assert trailers["Harness-Call-Id"] == invoked["details"]["call_id"]
    before = next(e for e in sample.events() if e["event"] == "test_passed")
    line = orjson.dumps(before, option=orjson.OPT_SORT_KEYS)
    assert trailers["Harness-Log-Head"] == line_hash(line)
    who = sample.git("log", "-1", "--format=%an <%ae>|%cn <%ce>|%aI|%cI", commit).strip()
    assert who == (
        "harness <harness@example.invalid>|harness <harness@example.invalid>"
        f"|{invoked['ts'].replace('Z', '+00:00')}|{invoked['ts'].replace('Z', '+00:00')}"
    )
    record = sample.git("log", "-1", "--format=%B", "HEAD")
    assert "Harness-Subtask" not in record and "Harness-Log-Head" in record


def test_same_inputs_give_the_same_commits_in_another_repository(sample: Sample, tmp_path) -> None:
    from harness.importers import demo

    other_root = tmp_path / "other"
    other_root.mkdir()
    demo.build(other_root)
    other = Sample(other_root, sample.script)
    for s in (sample, other):
        s.write_json("ai/agents/registry.json", sample.read_json("ai/agents/registry.json"))
        s.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch("A = 1")))])
    for s in (sample, other):
        assert s.cli("next", "demo").returncode == 0
    # The subtask commit and the log are bit for bit; the record commit on top also holds
    # verification evidence with measured durations, so it is not.
    assert sample.git("rev-parse", "HEAD~1") == other.git("rev-parse", "HEAD~1")
    assert sample.events() == other.events()


def test_blocked_task_says_why_until_resumed_then_calls_afresh(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([err("T1", "hard", "cannot do it")])
    res = sample.cli("next", "demo")
    assert res.returncode == 1
    assert "cannot do it" in res.stderr
    tail = sample.names()[-4:]
    assert tail == ["subagent_invoked", "subagent_failed", "step_failed", "blocker_encountered"]
    again = sample.cli("next", "demo")
    assert again.returncode == 1 and "blocked" in again.stderr
    assert sample.names()[-1] == "blocker_encountered"  # nothing new logged
    status = orjson.loads(sample.cli("status", "demo", "--json").stdout)
    assert status["subtasks"][0]["status"] == "blocked"
    assert status["blocked"]["step"] == "T1"

    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("resume", "demo", "--reason", "fixed the worker").returncode == 0
    res = sample.cli("next", "demo")
    assert res.returncode == 0, res.stderr
    invoked = [e["details"]["call_id"] for e in sample.events() if e["event"] == "subagent_invoked"]
    assert len(invoked) == 2 and invoked[0] != invoked[1]
    assert sample.names()[-1] == "step_completed"
    chain_ok(sample)


def test_resume_without_a_blocker_is_refused(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    res = sample.cli("resume", "demo", "--reason", "x")
    assert res.returncode == 2 and "not blocked" in res.stderr


def test_retryable_failure_gets_one_constrained_retry(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script(
        [
            err("T1", "retryable", "rate limited", retry=False),
            ok("T1", ("src/calc.py", calc_patch()), retry=True),
        ]
    )
    res = sample.cli("next", "demo")
    assert res.returncode == 0, res.stderr
    names = sample.names()
    assert names[1:5] == [
        "subagent_invoked",
        "subagent_failed",
        "subagent_retried",
        "subagent_invoked",
    ]
    calls = [e["details"]["call_id"] for e in sample.events() if e["event"] == "subagent_invoked"]
    assert calls[0] != calls[1]
    prompt = orjson.loads(
        (sample.root / "ai/exchanges/demo" / calls[1] / "prompt.ndjson").read_bytes()
    )["payload"]
    assert "constrained-retry" in prompt["constraints"]
    assert prompt["inputs"]["blobs"] == [
        {"name": "harness/previous-failure.txt", "text": "rate limited"}
    ]


def test_second_retryable_failure_blocks(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([err("T1", "retryable", "still limited")])
    res = sample.cli("next", "demo")
    assert res.returncode == 1
    assert sample.names().count("subagent_invoked") == 2
    assert sample.names()[-2:] == ["step_failed", "blocker_encountered"]


def test_failing_tests_are_retried_with_the_failure_and_never_committed(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    broken = calc_patch("assert False, 'broken'")
    sample.write_script([ok("T1", ("src/calc.py", broken))])
    head = sample.head()
    res = sample.cli("next", "demo")
    assert res.returncode == 1
    names = sample.names()
    assert "test_failed" in names and "subagent_retried" in names
    assert names.count("test_failed") == 2 and "subagent_diffs_applied" not in names
    # only the record commit moved the branch; no subtask commit
    assert sample.git("log", "--format=%s", f"{head}..HEAD").splitlines() == [
        "harness: record demo"
    ]
    assert sample.status_outside_ai() == ""
    failed = next(e for e in sample.events() if e["event"] == "test_failed")
    assert failed["details"]["exit_codes"] == [1, 1]
    assert failed["details"]["flaky"] is False


def test_flaky_test_is_a_failure(sample: Sample, tmp_path) -> None:
    flag = tmp_path / "flip"
    sample.set_config(
        '[identity]\nname = "harness"\nemail = "h@x"\n[verify]\n'
        f'test = "if [ -e {flag} ]; then rm {flag}; exit 1; else touch {flag}; fi"\n'
    )
    sample.uncontain()  # the two runs share a flag outside their sandboxes
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("next", "demo").returncode == 1
    failed = next(e for e in sample.events() if e["event"] == "test_failed")
    assert failed["details"]["flaky"] is True and failed["details"]["exit_codes"] == [0, 1]


def test_build_failure_is_logged(sample: Sample) -> None:
    sample.set_config('[verify]\nbuild = "echo nope >&2; exit 3"\ntest = "true"\n')
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("next", "demo").returncode == 1
    failed = next(e for e in sample.events() if e["event"] == "build_failed")
    assert "nope" in failed["error"] and "exit 3" in failed["error"]
    assert "test_passed" not in sample.names()


def test_dependency_artifacts_are_passed_as_blobs(sample: Sample) -> None:
    sample.write_plan(
        [
            subtask("T1", no_change_ok=True),
            subtask("T2", depends_on=["T1"], write_scope="docs/**", creates=["docs/*.md"]),
        ]
    )
    sample.write_script(
        [
            ok("T1", artifacts=[{"name": "notes.md", "type": "text/markdown", "content": "hello"}]),
            ok("T2", ("docs/x.md", new_file_patch("docs/x.md", ["# x"]))),
        ]
    )
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    t2 = [e for e in sample.events() if e["event"] == "subagent_invoked"][1]["details"]["call_id"]
    prompt = orjson.loads((sample.root / "ai/exchanges/demo" / t2 / "prompt.ndjson").read_bytes())
    assert prompt["payload"]["inputs"]["blobs"] == [{"name": "T1/notes.md", "text": "hello"}]
    step1 = next(e for e in sample.events() if e["event"] == "step_completed")
    assert step1["details"]["commit"] is None  # no diffs, no commit


def test_a_dependencys_artifact_that_is_no_text_is_refused_in_one_line(sample: Sample) -> None:
    """Harness writes an artifact as the UTF-8 text the answer gave. One that is not (its
    meta.json made to match) stops the dependent's call before it is made, in one line."""
    sample.write_plan(
        [
            subtask("T1", no_change_ok=True),
            subtask("T2", depends_on=["T1"], write_scope="docs/**", creates=["docs/*.md"]),
        ]
    )
    note = {"name": "notes.md", "type": "text/markdown", "content": "hello"}
    sample.write_script([ok("T1", artifacts=[note]), ok("T2", ("docs/x.md", calc_patch()))])
    assert sample.cli("next", "demo").returncode == 0
    t1 = sample.events()[1]["details"]["call_id"]
    folder = sample.root / "ai/exchanges/demo" / t1
    (folder / "artifacts/notes.md").write_bytes(b"\xff\xfehello")
    meta = orjson.loads((folder / "meta.json").read_bytes())
    meta["files"]["artifacts/notes.md"] = hashlib.sha256(b"\xff\xfehello").hexdigest()
    (folder / "meta.json").write_bytes(orjson.dumps(meta))
    sample.commit_all("the artifact made binary")  # else the ledger tells it was not harness
    before = sample.events()
    res = sample.cli("next", "demo")
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines() == [f"harness: exchange {t1}/artifacts/notes.md: not UTF-8 text"]
    assert sample.events() == before


def test_a_writing_answer_without_a_change_is_a_lost_edit_retried_then_failed(
    sample: Sample,
) -> None:
    """A CLI whose edit failed silently answers ok with no diffs: never a step done."""
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1"), ok("T1")])
    before = sample.head()
    assert sample.cli("next", "demo").returncode == 1
    failed = [e for e in sample.events() if e["event"] == "subagent_failed"]
    assert [e["details"]["kind"] for e in failed] == ["retryable", "retryable"]
    assert "lost edit" in failed[0]["error"]
    assert "subagent_retried" in sample.names() and "step_completed" not in sample.names()
    assert sample.git("diff", before, "HEAD", "--", "src") == ""  # only the record moved
    assert sample.cli("audit", "demo").returncode == 0


@pytest.mark.parametrize(
    "fields",
    [{"no_change_ok": True}, {"write_scope": "none"}],
    ids=["said-optional", "read-only"],
)
def test_an_answer_without_a_change_completes_a_subtask_that_may_change_nothing(
    sample: Sample, fields: dict[str, object]
) -> None:
    sample.write_plan([subtask("T1", **fields)])
    sample.write_script([ok("T1")])
    assert sample.cli("next", "demo").returncode == 0
    assert sample.names()[-1] == "step_completed"


def test_envelope_is_two_lines_with_call_id_and_scope(sample: Sample) -> None:
    sample.set_config('[scope]\nreadonly = ["vendor/**"]\nvisible = ["src/**", "tests/**"]\n')
    sample.write_plan([subtask("T1", no_change_ok=True)])
    sample.write_script([ok("T1")])
    assert sample.cli("next", "demo").returncode == 0
    invoked = next(e for e in sample.events() if e["event"] == "subagent_invoked")
    folder = sample.root / "ai/exchanges/demo" / invoked["details"]["call_id"]
    context = orjson.loads((folder / "context.ndjson").read_bytes())
    prompt = orjson.loads((folder / "prompt.ndjson").read_bytes())
    assert context["payload"]["call_id"] == invoked["details"]["call_id"]
    assert len(context["payload"]["call_id"]) == 64
    assert context["payload"]["readonly"] == ["vendor/**"]
    assert context["payload"]["visible"] == ["src/**", "tests/**"]
    assert prompt["payload"]["write_scope"] == "token:W1"
    assert prompt["payload"]["constraints"] == [
        "ground-in-provided-files-only",
        "no-new-deps",
        "no-speculation",
    ]
    meta = orjson.loads((folder / "meta.json").read_bytes())
    assert meta["exit_code"] == 0 and meta["outcome"] == {"status": "ok"}


def test_no_usable_token_refuses_the_run_before_any_call(sample: Sample) -> None:
    sample.write_json("ai/agents/write_tokens.json", {"tokens": []})
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    head = sample.head()
    res = sample.cli("next", "demo")
    assert res.returncode == 1
    assert res.stderr == (
        "harness: pre-flight of task demo: 1 problem(s), no worker called: "
        "subtask T1: no usable token covers src/** "
        "(issue one: harness tokens issue --paths 'src/**' --ttl 2h)\n"
    )
    assert sample.events() == []  # no worker was asked to write in vain; nothing logged
    assert sample.head() == head
    assert sample.status_outside_ai() == ""
    # Its twin: a token issued, the same command runs, no resume needed.
    res = sample.cli("tokens", "issue", "--paths", "src/**", "--ttl", "1d")
    assert res.returncode == 0, res.stderr
    assert sample.cli("next", "demo").returncode == 0


@pytest.mark.parametrize("diffs", [True, False], ids=["diffs-refused", "twin"])
def test_write_scope_none_needs_no_token_and_may_not_write(sample: Sample, diffs: bool) -> None:
    sample.write_json("ai/agents/write_tokens.json", {"tokens": []})
    sample.write_plan([subtask("T1", write_scope="none")])
    patches = [("src/calc.py", calc_patch())] if diffs else []
    sample.write_script([ok("T1", *patches)])
    assert sample.cli("plan", "validate", "demo").returncode == 0
    res = sample.cli("next", "demo")
    invoked = next(e for e in sample.events() if e["event"] == "subagent_invoked")
    assert invoked["details"]["token"] is None
    if diffs:
        assert res.returncode == 1
        assert "no write token" in sample.events()[-2]["error"]
    else:
        assert res.returncode == 0, res.stderr
        assert sample.names()[-1] == "step_completed"
    assert sample.status_outside_ai() == ""


def test_one_shot_token_is_spent_by_its_first_applied_diff(sample: Sample) -> None:
    sample.write_json(
        "ai/agents/write_tokens.json",
        {
            "tokens": [
                {
                    "id": "W9",
                    "paths": ["src/**"],
                    "expires": "2026-01-02T00:00:00Z",
                    "one_shot": True,
                }
            ]
        },
    )
    sample.write_plan([subtask("T1"), subtask("T2", depends_on=["T1"])])
    sample.write_script(
        [
            ok("T1", ("src/calc.py", calc_patch("A = 1"))),
            ok("T2", ("src/calc.py", calc_patch("B = 1"))),
        ]
    )
    # Usable for both at the run's start; spent by T1, so T2's own pre-flight fails.
    res = sample.cli("run", "demo")
    assert res.returncode == 1
    token = sample.read_json("ai/agents/write_tokens.json")["tokens"][0]
    assert token["spent"]["task_id"] == "demo"
    failed = sample.events()[-2]
    assert failed["error"].startswith("subtask T2: no usable token covers src/** (issue one")
    assert failed["details"]["phase"] == "preflight"
    assert sample.names().count("subagent_invoked") == 1  # T2 was never called


def test_expired_token_at_apply_is_refused(sample: Sample) -> None:
    sample.write_json(
        "ai/agents/write_tokens.json",
        {
            "tokens": [
                {
                    "id": "W9",
                    "paths": ["src/**"],
                    "expires": "2026-01-01T00:00:03Z",
                    "one_shot": False,
                }
            ]
        },
    )
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    res = sample.cli("next", "demo")
    assert res.returncode == 1
    assert "expired" in sample.events()[-2]["error"]


def test_dirty_tree_in_write_scope_is_refused_and_untouched(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    (sample.root / "src/calc.py").write_text("mine\n")
    (sample.root / "notes.txt").write_text("unrelated\n")
    res = sample.cli("next", "demo")
    assert res.returncode == 2 and "src/calc.py" in res.stderr
    assert (sample.root / "src/calc.py").read_text() == "mine\n"
    assert sample.events() == []


def test_unrelated_uncommitted_work_survives_a_step(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    (sample.root / "README.md").write_text("edited by me\n")
    sample.git("add", "README.md")
    (sample.root / "scratch.txt").write_text("untracked\n")
    assert sample.cli("next", "demo").returncode == 0
    assert (sample.root / "README.md").read_text() == "edited by me\n"
    assert (sample.root / "scratch.txt").read_text() == "untracked\n"
    assert sample.git("diff", "--cached", "--name-only").split() == ["README.md"]
    assert "README.md" not in sample.git("show", "--name-only", "--format=", "HEAD~1")


def test_exchange_is_reused_not_reinvoked(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    res = sample.cli("next", "demo", env={"HARNESS_FAULT": "after:exchange"})
    assert res.returncode == -9
    assert sample.names() == ["task_started", "subagent_invoked"]
    sample.write_script([])  # any new call would now be a hard error
    res = sample.cli("next", "demo")
    assert res.returncode == 0, res.stderr
    assert sample.names().count("subagent_invoked") == 1
    assert sample.names()[-1] == "step_completed"


def test_worker_timeout_kills_and_retries(sample: Sample) -> None:
    reg = sample.read_json("ai/agents/registry.json")
    # Wide enough that the retry, a Python start on a loaded machine, finishes in time.
    reg["agents"][0]["timeouts"] = {"soft_s": 3.0, "hard_s": 4.0}
    sample.write_json("ai/agents/registry.json", reg)
    sample.write_plan([subtask("T1")])
    sample.write_script(
        [
            {"subtask": "T1", "retry": False, "sleep_s": 30, "ignore_term": True},
            ok("T1", ("src/calc.py", calc_patch()), retry=True),
        ]
    )
    res = sample.cli("next", "demo", timeout=60)
    assert res.returncode == 0, res.stderr
    failed = next(e for e in sample.events() if e["event"] == "subagent_failed")
    assert failed["details"]["kind"] == "timeout"


def test_worker_sees_only_the_allowlisted_environment(sample: Sample) -> None:
    reg = sample.read_json("ai/agents/registry.json")
    reg["agents"][0]["env"] = ["ALLOWED_NAME"]
    sample.write_json("ai/agents/registry.json", reg)
    sample.write_plan([subtask("T1")])
    sample.write_script([{"subtask": "T1", "raw": "", "exit": 2, "stderr": "ENV-DUMP-PLACEHOLDER"}])
    # A worker that dumps its environment to stderr, then fails.
    dump = sample.root.parent / "dump-env"
    dump.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo 1.0; exit 0; fi\nenv >&2; pwd >&2; exit 2\n'
    )
    dump.chmod(0o755)
    reg["agents"][0]["cmd"] = str(dump)
    reg["agents"][0]["version"] = ">=1"
    sample.write_json("ai/agents/registry.json", reg)
    res = sample.cli("next", "demo", env={"CANARY_SECRET": "s3cr3t-canary", "ALLOWED_NAME": "yes"})
    assert res.returncode == 1
    call = next(e for e in sample.events() if e["event"] == "subagent_invoked")
    stderr = sample.root / "ai/exchanges/demo" / call["details"]["call_id"] / "stderr.log"
    text = stderr.read_text()
    assert "s3cr3t-canary" not in text and "ALLOWED_NAME=yes" in text
    assert "TZ=UTC" in text and "LC_ALL=C" in text
    assert "/sandbox/work" in text  # cwd: a copy in its sandbox, not the tree
    names = {line.split("=", 1)[0] for line in text.splitlines() if "=" in line}
    assert not any(n.startswith("GIT_") for n in names)
    failed = next(e for e in sample.events() if e["event"] == "subagent_failed")
    assert failed["details"]["kind"] == "format"


@pytest.mark.parametrize("broken", ["out of range", "missing"])
def test_an_agent_that_cannot_run_refuses_the_run_before_any_call(
    sample: Sample, broken: str
) -> None:
    reg = sample.read_json("ai/agents/registry.json")
    if broken == "missing":
        reg["agents"][0]["cmd"] = "agents/no-such-cli"
    else:
        reg["agents"][0]["version"] = ">=99"
    sample.write_json("ai/agents/registry.json", reg)
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    why = "outside >=99" if broken == "out of range" else "agents/no-such-cli not found"
    validate = sample.cli("plan", "validate", "demo")
    assert validate.returncode == 1 and why in validate.stderr  # the same pre-flight
    res = sample.cli("next", "demo")
    assert res.returncode == 1 and why in res.stderr
    assert "pre-flight of task demo: 1 problem(s), no worker called" in res.stderr
    assert sample.events() == []  # refused before the run began: nothing to resume
    status = sample.cli("status", "demo", "--json")
    assert orjson.loads(status.stdout)["subtasks"][0]["status"] == "pending"
    # Its twin: the agent fixed, the same command makes the call.
    sample.write_json(
        "ai/agents/registry.json",
        sample.read_json("ai/agents/registry.json")
        | {"agents": [reg["agents"][0] | {"cmd": "agents/scripted-cli", "version": ">=0.1"}]},
    )
    assert sample.cli("next", "demo").returncode == 0


def test_allowlisted_secret_values_are_redacted_from_the_record(sample: Sample) -> None:
    dump = sample.root.parent / "dump-env"
    dump.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo 1.0; exit 0; fi\n'
        'env >&2; echo "key is $API_KEY"; exit 2\n'
    )
    dump.chmod(0o755)
    reg = sample.read_json("ai/agents/registry.json")
    reg["agents"][0].update(cmd=str(dump), version=">=1", env=["API_KEY"])
    sample.write_json("ai/agents/registry.json", reg)
    sample.write_plan([subtask("T1")])
    res = sample.cli("next", "demo", env={"API_KEY": "sk-live-0123456789"})
    assert res.returncode == 1
    call = next(e for e in sample.events() if e["event"] == "subagent_invoked")
    folder = sample.root / "ai/exchanges/demo" / call["details"]["call_id"]
    assert "API_KEY=[REDACTED]" in (folder / "stderr.log").read_text()
    assert (folder / "stdout.ndjson").read_text() == "key is [REDACTED]\n"
    for path in (sample.root / "ai").rglob("*"):
        if path.is_file():
            assert b"sk-live-0123456789" not in path.read_bytes(), path


def test_status_totals_the_cost_agents_reported(sample: Sample) -> None:
    sample.write_plan(
        [subtask("T1", no_change_ok=True), subtask("T2", depends_on=["T1"], no_change_ok=True)]
    )
    paid = [ok("T1"), ok("T2")]
    paid[0]["result"]["metrics"] = {"cost_usd": 0.25, "turns": 3}
    paid[1]["result"]["metrics"] = {"cost_usd": 0.5}
    sample.write_script(paid)
    assert sample.cli("run", "demo").returncode == 0
    assert orjson.loads(sample.cli("status", "demo", "--json").stdout)["cost_usd"] == 0.75
    assert "cost: $0.7500" in sample.cli("status", "demo").stdout


def test_a_kill_after_task_completed_is_recorded_by_the_next_command(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("next", "demo").returncode == 0
    res = sample.cli("next", "demo", env={"HARNESS_FAULT": "after:task_completed"})
    assert res.returncode == -9
    assert sample.names()[-1] == "task_completed"
    unrecorded = sample.head()
    assert sample.git("status", "--porcelain", "--", "ai/tasks/demo") != ""

    res = sample.cli("next", "demo")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "task demo complete\n"
    assert sample.names().count("task_completed") == 1
    assert sample.git("rev-parse", "HEAD~1").strip() == unrecorded
    assert sample.git("status", "--porcelain") == ""
    log = sample.git("show", "HEAD:ai/tasks/demo/progress.ndjson").encode()
    assert log == (sample.root / "ai/tasks/demo/progress.ndjson").read_bytes()
    head = repo.trailers(sample.git("log", "-1", "--format=%B", "HEAD"))["Harness-Log-Head"]
    assert head == line_hash(log.splitlines()[-1])
    # The twin: once recorded, a further command has nothing to add.
    assert sample.cli("next", "demo").stdout == "task demo complete\n"
    assert sample.git("rev-parse", "HEAD~1").strip() == unrecorded


def test_a_subtask_added_after_task_completed_is_refused_with_nothing_written(
    sample: Sample,
) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("run", "demo").returncode == 0
    before, log = sample.head(), sample.root / "ai/tasks/demo/progress.ndjson"
    recorded = log.read_bytes()
    sample.write_plan([subtask("T1"), subtask("T2")])
    sample.write_script([ok("T2", ("src/calc.py", calc_patch("OTHER = 2")))])
    res = sample.cli("run", "demo")
    assert res.returncode == 2
    assert res.stderr.splitlines()[-1] == (
        "harness: task demo completed (seq 7); subtask T2 was added to its plan since: "
        "put new work in a new task"
    )
    assert log.read_bytes() == recorded and sample.head() == before
    # Its twin: the plan as it was completes again at once, and audits clean.
    sample.write_plan([subtask("T1")])
    assert sample.cli("run", "demo").returncode == 0
    assert sample.cli("audit", "demo").returncode == 0


def test_a_log_cut_back_and_committed_is_refused_by_next(sample: Sample) -> None:
    sample.write_plan([subtask("T1"), subtask("T2", creates=["src/b.py"])])
    sample.write_script(
        [
            ok("T1", ("src/calc.py", calc_patch())),
            ok("T2", ("src/b.py", new_file_patch("src/b.py", ["B = 2"]))),
        ]
    )
    assert sample.cli("next", "demo").returncode == 0
    log = sample.root / "ai/tasks/demo/progress.ndjson"
    kept = log.read_bytes().splitlines(keepends=True)[:2]
    log.write_bytes(b"".join(kept))
    sample.commit_all("cut the log")
    before = sample.head()
    res = sample.cli("next", "demo")
    assert res.returncode == 2
    assert "progress.ndjson: lost the line commit" in res.stderr
    assert log.read_bytes() == b"".join(kept) and sample.head() == before
    # Restored as told, the task goes on.
    last = sample.git("log", "-1", "--format=%H", "--grep=Harness-Task: demo", "HEAD").strip()
    sample.git("checkout", last, "--", "ai/tasks/demo/progress.ndjson")
    sample.commit_all("restore the log")
    assert sample.cli("next", "demo").returncode == 0


def test_a_retry_waits_the_retry_after_the_model_api_asked_for(sample: Sample) -> None:
    """A rate-limited call whose answer says how long to wait: harness's retry waits that
    long (bounded), and the log says so; its twin without one retries at once."""
    sample.write_plan([subtask("T1")])
    limited = err("T1", "retryable", "429: Please try again in 2s", retry=False)
    limited["error"]["retry_after_s"] = 2
    sample.write_script([limited, ok("T1", ("src/calc.py", calc_patch()), retry=True)])
    started = time.monotonic()
    res = sample.cli("next", "demo")
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - started >= 2
    failed = next(e for e in sample.events() if e["event"] == "subagent_failed")
    assert failed["details"]["retry_after_s"] == 2


def test_a_retry_after_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model API asking for an hour gets a minute: harness owns time."""
    sub = Subtask.__new__(Subtask)
    failed = {"event": "subagent_failed", "details": {"kind": "retryable", "retry_after_s": 3600}}
    monkeypatch.setattr(Subtask, "previous_failure", lambda self, att: failed)
    assert sub.backoff(protocol.Attempt(2, 0)) == MAX_BACKOFF_S == 60.0
    failed["details"].pop("retry_after_s")
    assert sub.backoff(protocol.Attempt(2, 0)) == 0.0
