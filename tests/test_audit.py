"""`harness audit` through the real CLI: a recorded task is clean, and each way of damaging
its log, exchanges, commits or tokens is a finding naming the line."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.base import files
from harness.cli import main as cli
from harness.record.progress import GENESIS, line_hash

from .conftest import CLOCK, Sample, calc_patch, completed_demo, err, new_file_patch, ok, subtask

LOG = "ai/tasks/demo/progress.ndjson"
IDENTITY = {
    f"GIT_{who}_{what}": value
    for who in ("AUTHOR", "COMMITTER")
    for what, value in (("NAME", "h"), ("EMAIL", "h@h"), ("DATE", CLOCK))
}
EXCHANGES = "ai/exchanges/demo"
Event = dict[str, Any]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo task run to completion once; each test damages a copy of it."""
    return completed_demo(tmp_path_factory.mktemp("recorded")).root


@pytest.fixture
def repo(recorded: Path, tmp_path: Path) -> Sample:
    root = tmp_path / "repo"
    shutil.copytree(recorded, root, symlinks=True)
    return Sample(root, root / "agents" / "script.json")


Findings = list[tuple[int | None, str]]


def audit(s: Sample) -> tuple[int, Findings]:
    """`harness audit demo --json`, run in this process: the CLI's own main(), without an
    interpreter start per test (the output tests below run it as a process)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out):
        code = cli.main(["audit", "demo", "--json", "--repo", str(s.root)])
    out.flush()
    assert isinstance(out.buffer, io.BytesIO)
    doc = orjson.loads(out.buffer.getvalue())
    assert doc["ok"] is (code == 0) and doc["task_id"] == "demo" and code in (0, 1)
    return code, [(f["seq"], f["reason"]) for f in doc["findings"]]


def found(s: Sample, *expected: tuple[int | None, str]) -> Findings:
    """Audit, expect findings, one per (seq, fragment of its reason) given; return them all."""
    code, findings = audit(s)
    assert code == 1
    for seq, fragment in expected:
        assert any(at == seq and fragment in reason for at, reason in findings), findings
    return findings


def events(s: Sample) -> list[Event]:
    return [orjson.loads(line) for line in (s.root / LOG).read_bytes().splitlines()]


def rechain(s: Sample, evs: list[Event]) -> None:
    """Write `evs` as a well-chained log (seq and prev recomputed), so only order is wrong."""
    prev, lines = GENESIS, []
    for seq, ev in enumerate(evs):
        line = files.dumps({**ev, "seq": seq, "prev": prev})
        lines.append(line + b"\n")
        prev = line_hash(line)
    (s.root / LOG).write_bytes(b"".join(lines))


def edit_lines(s: Sample, change: Callable[[list[bytes]], list[bytes]]) -> None:
    path = s.root / LOG
    path.write_bytes(b"".join(line + b"\n" for line in change(path.read_bytes().splitlines())))


def call(s: Sample, step: str) -> str:
    return next(
        ev["details"]["call_id"]
        for ev in events(s)
        if ev["event"] == "subagent_invoked" and ev["step"] == step
    )


def set_token(s: Sample, **fields: Any) -> None:
    doc = s.read_json("ai/agents/write_tokens.json")
    doc["tokens"][0].update(fields)
    s.write_json("ai/agents/write_tokens.json", doc)


# -- clean records ---------------------------------------------------------------------------


def test_a_completed_demo_run_audits_clean(repo: Sample) -> None:
    res = repo.cli("audit", "demo")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout == "audit demo: 23 events, clean\n"
    doc = orjson.loads(repo.cli("audit", "demo", "--json").stdout)
    assert doc == {"events": 23, "findings": [], "ok": True, "task_id": "demo"}


def test_retries_blockers_and_resumes_audit_clean(sample: Sample) -> None:
    """The order rules accept what harness really writes: a retried call, a hard failure
    that blocks, a resume, a fresh call in the new epoch, a record commit after each."""
    sample.set_config('[identity]\nname = "harness"\nemail = "harness@example.invalid"\n')
    sample.write_plan(
        [
            subtask("T1"),
            subtask("T2", inputs=[], creates=["src/extra.py"], depends_on=["T1"]),
        ]
    )
    extra = ("src/extra.py", new_file_patch("src/extra.py", ["X = 1"]))
    sample.write_script(
        [
            err("T1", "retryable", "rate limited", retry=False),
            ok("T1", ("src/calc.py", calc_patch()), retry=True),
            err("T2", "hard", "cannot do it"),
        ]
    )
    assert sample.cli("run", "demo").returncode == 1
    sample.write_script([ok("T2", extra)])
    assert sample.cli("resume", "demo", "--reason", "fixed").returncode == 0
    assert sample.cli("run", "demo").returncode == 0
    names = sample.names()
    assert "subagent_retried" in names and "blocker_resolved" in names
    assert names[-1] == "task_completed"
    res = sample.cli("audit", "demo")
    assert res.returncode == 0, res.stdout
    assert res.stdout == f"audit demo: {len(names)} events, clean\n"


def test_no_such_task_is_a_one_line_error(repo: Sample) -> None:
    res = repo.cli("audit", "nope")
    assert res.returncode == 2
    assert res.stderr == "harness: ai/tasks/nope: no such task\n"


def test_findings_print_one_line_each_then_a_summary(repo: Sample) -> None:
    shutil.rmtree(repo.root / EXCHANGES / call(repo, "T2"))
    res = repo.cli("audit", "demo")
    assert res.returncode == 1
    lines = res.stdout.splitlines()
    n = len(lines) - 1
    assert lines[-1] == f"audit demo: 23 events, {n} findings"
    assert lines[0] == f"seq 8: exchange {call(repo, 'T2')[:12]} is missing"
    assert all(line.startswith("-: ") for line in lines[1:-1])


# -- the log ---------------------------------------------------------------------------------


def test_a_flipped_byte_mid_log_breaks_the_chain_at_the_next_line(repo: Sample) -> None:
    data = bytearray((repo.root / LOG).read_bytes())
    at = data.index(b'"ts":"2026-01-01T00:00:10Z"') + len(b'"ts":"2026-01-01T00:00:1')
    data[at] = ord("9")  # still valid JSON, schema and canonical form: only the hash changes
    (repo.root / LOG).write_bytes(bytes(data))
    found(
        repo,
        (11, "prev does not match the hash of line 10"),
        (None, f"{LOG} differs from the last harness commit"),
    )


def test_a_flipped_byte_in_the_last_line_is_caught_by_the_anchor(repo: Sample) -> None:
    edit_lines(repo, lambda lines: [*lines[:-1], lines[-1].replace(b":22Z", b":29Z")])
    found(repo, (None, "is no line of the log: it was truncated or rewritten"))


def test_a_line_that_is_not_json(repo: Sample) -> None:
    edit_lines(repo, lambda lines: [*lines[:5], lines[5][:-1], *lines[6:]])
    findings = found(repo, (5, "not JSON"))
    assert (6, "prev does not match the hash of line 5") in findings
    assert not any("seq is" in reason for _, reason in findings)


def test_a_line_against_the_schema_is_worded_by_jsonschema(repo: Sample) -> None:
    edit_lines(
        repo, lambda lines: [*lines[:5], lines[5].replace(b'"ok"', b'"fine"', 1), *lines[6:]]
    )
    found(repo, (5, "not a progress event: $.status: 'fine' is not one of"))


def test_a_line_not_in_canonical_form(repo: Sample) -> None:
    edit_lines(repo, lambda lines: [*lines[:5], lines[5].replace(b'":', b'": ', 1), *lines[6:]])
    found(repo, (5, "not canonical"))


def test_a_deleted_line(repo: Sample) -> None:
    edit_lines(repo, lambda lines: lines[:12] + lines[13:])
    findings = found(repo, (12, "seq is 13, expected 12"))
    assert (12, "prev does not match the hash of line 11") in findings
    assert not any(seq is not None and seq > 12 and "seq is" in r for seq, r in findings)


def test_two_lines_swapped(repo: Sample) -> None:
    edit_lines(repo, lambda lines: [*lines[:3], lines[4], lines[3], *lines[5:]])
    findings = found(repo, (3, "seq is 4, expected 3"))
    assert (4, "seq is 3, expected 5") in findings
    assert (5, "prev does not match the hash of line 4") in findings


def test_a_truncated_log(repo: Sample) -> None:
    edit_lines(repo, lambda lines: lines[:-5])
    findings = found(repo, (None, "is no line of the log: it was truncated or rewritten"))
    assert (None, f"{LOG} differs from the last harness commit") in [
        (seq, r.rsplit(" ", 1)[0]) for seq, r in findings
    ]


def test_a_last_line_without_newline(repo: Sample) -> None:
    path = repo.root / LOG
    path.write_bytes(path.read_bytes()[:-1])
    found(repo, (22, "the last line has no newline"))


# -- the order of events ---------------------------------------------------------------------


def test_diffs_applied_without_succeeded(repo: Sample) -> None:
    evs = events(repo)
    t1 = call(repo, "T1")
    rechain(repo, evs[:2] + evs[3:])  # T1's subagent_succeeded gone
    found(
        repo,
        (5, f"subagent_diffs_applied without subagent_succeeded of call {t1[:12]}"),
        (2, "build_succeeded before a subagent_succeeded in attempt 1"),
    )


def test_retried_after_a_hard_failure(repo: Sample) -> None:
    evs = events(repo)
    t1 = call(repo, "T1")
    failed = {**evs[2], "event": "subagent_failed", "status": "error", "error": "no"}
    failed["details"] = {"call_id": t1, "kind": "hard", "subagent": "scripted"}
    retried = {**evs[2], "event": "subagent_retried", "status": "pending"}
    retried["details"] = {"call_id": t1, "after": "subagent_failed"}
    rechain(repo, [*evs[:2], failed, retried, *evs[3:]])
    found(
        repo,
        (3, "subagent_retried after subagent_failed (hard), not a retryable failure"),
        (1, "succeeded, but the log says it failed (hard)"),  # as its exchange says
    )


def test_a_second_retry_in_one_epoch(repo: Sample) -> None:
    evs = events(repo)
    t1 = call(repo, "T1")
    failed = {**evs[2], "event": "subagent_failed", "status": "error", "error": "busy"}
    failed["details"] = {"call_id": t1, "kind": "retryable", "subagent": "scripted"}
    retried = {**evs[2], "event": "subagent_retried", "status": "pending", "details": {}}
    again = {**evs[1], "details": {**evs[1]["details"], "attempt": 2}}
    rechain(repo, [*evs[:2], failed, retried, again, failed, retried, *evs[2:]])
    found(
        repo,
        (6, "a second subagent_retried for one agent since the last blocker_resolved"),
        (4, f"call {t1[:12]} was invoked before (seq 1)"),
    )


def test_task_completed_not_last(repo: Sample) -> None:
    evs = events(repo)
    rechain(repo, [*evs[:15], evs[22], *evs[15:22]])
    found(
        repo,
        (15, "task_completed before 1 subtask(s): T3"),
        (16, "subagent_invoked after task_completed (seq 15)"),
    )


def test_an_event_for_an_unknown_step(repo: Sample) -> None:
    evs = events(repo)
    rechain(repo, [*evs[:17], {**evs[17], "step": "T9"}, *evs[18:]])
    found(repo, (17, "step T9 is not a subtask of the plan"))


def test_an_event_after_its_step_completed(repo: Sample) -> None:
    evs = events(repo)
    rechain(repo, [*evs[:8], evs[4], *evs[8:]])
    found(repo, (8, "test_passed for T1 after its step_completed (seq 7)"))


def test_an_invoked_call_that_never_ended(repo: Sample) -> None:
    evs = events(repo)
    rechain(repo, evs[:2])
    found(repo, (1, f"call {call(repo, 'T1')[:12]} of T1 has no outcome"))


def test_a_blocker_resolved_while_not_blocked(repo: Sample) -> None:
    evs = events(repo)
    resolved = {**evs[0], "event": "blocker_resolved", "details": {"reason": "x"}}
    rechain(repo, [*evs[:8], resolved, *evs[8:]])
    found(repo, (8, "blocker_resolved while the task is not blocked"))


# -- exchanges -------------------------------------------------------------------------------


def test_a_missing_exchange(repo: Sample) -> None:
    shutil.rmtree(repo.root / EXCHANGES / call(repo, "T2"))
    found(repo, (8, f"exchange {call(repo, 'T2')[:12]} is missing"))


def test_an_edited_exchange_file(repo: Sample) -> None:
    t1 = call(repo, "T1")
    with (repo.root / EXCHANGES / t1 / "stdout.ndjson").open("ab") as fh:
        fh.write(b" ")
    found(
        repo,
        (1, f"exchange {t1[:12]}: files do not match meta.json: stdout.ndjson"),
        (None, f"{EXCHANGES}/{t1}/stdout.ndjson differs from the last harness commit"),
    )


def test_an_edited_exchange_file_committed_over_the_record(repo: Sample) -> None:
    """Committed, the edit is invisible to the diff: the hashes read from git catch it."""
    t1 = call(repo, "T1")
    with (repo.root / EXCHANGES / t1 / "prompt.ndjson").open("ab") as fh:
        fh.write(b" ")
    repo.commit_all("harness: record demo\n\nHarness-Task: demo\nHarness-Log-Head: x\n")
    found(repo, (1, f"exchange {t1[:12]}: files do not match meta.json: prompt.ndjson"))


def test_an_edited_verify_evidence_file(repo: Sample) -> None:
    t1 = call(repo, "T1")
    evidence = repo.root / EXCHANGES / t1 / "verify" / "01-test.json"
    evidence.write_text(evidence.read_text().replace('"exit_code": 0', '"exit_code": 1'))
    code, findings = audit(repo)
    assert code == 1
    assert [r.rsplit(" ", 1)[0] for _, r in findings] == [
        f"{EXCHANGES}/{t1}/verify/01-test.json differs from the last harness commit"
    ]


def test_an_unreferenced_exchange_folder(repo: Sample) -> None:
    t1 = call(repo, "T1")
    shutil.copytree(repo.root / EXCHANGES / t1, repo.root / EXCHANGES / ("f" * 64))
    found(
        repo,
        (None, "exchange folder ffffffffffff is named by no subagent_invoked"),
        (None, f"{EXCHANGES}/{'f' * 64}/meta.json is not in the last harness commit"),
    )


def test_an_exchange_outcome_the_log_contradicts(repo: Sample) -> None:
    evs = events(repo)
    t2 = call(repo, "T2")
    failed = {**evs[9], "event": "subagent_failed", "status": "error", "error": "x"}
    failed["details"] = {"call_id": t2, "kind": "timeout", "subagent": "scripted"}
    rechain(repo, [*evs[:9], failed])
    found(repo, (8, f"exchange {t2[:12]} succeeded, but the log says it failed (timeout)"))


# -- commits ---------------------------------------------------------------------------------


def rewrite(s: Sample, old: str, new: str) -> dict[str, str]:
    """Rewrite history from the commit whose message holds `old`, replacing it by `new`;
    return the old -> new commit ids."""
    moved: dict[str, str] = {}
    parent = None
    for commit in s.git("rev-list", "--reverse", "HEAD").split():
        body = s.git("log", "-1", "--format=%B", commit)
        if parent is None and old not in body:
            continue
        parent = parent or s.git("rev-parse", f"{commit}^").strip()
        made = subprocess.run(
            ["git", "commit-tree", f"{commit}^{{tree}}", "-p", parent],
            cwd=s.root,
            input=body.replace(old, new),
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, **IDENTITY},
        ).stdout.strip()
        moved[commit] = parent = made
    s.git("update-ref", "refs/heads/main", str(parent))
    return moved


def test_a_commit_whose_trailer_disagrees(repo: Sample) -> None:
    t2 = call(repo, "T2")
    moved = rewrite(repo, f"Harness-Call-Id: {t2}", "Harness-Call-Id: " + "0" * 64)
    evs = events(repo)
    for ev in evs:
        commit = ev.get("details", {}).get("commit")
        if commit in moved:
            ev["details"]["commit"] = moved[commit]
    rechain(repo, evs)
    new = next(
        c
        for old, c in moved.items()
        if f"Harness-Call-Id: {t2}" in repo.git("log", "-1", "--format=%B", old)
    )
    found(repo, (13, f"commit {new[:12]} has Harness-Call-Id: 000000000000, not {t2[:12]}"))


def test_a_commit_that_left_the_branch(repo: Sample) -> None:
    applied = next(ev for ev in events(repo) if ev["event"] == "subagent_diffs_applied")
    rewrite(repo, "Harness-Subtask: T1", "Harness-Subtask: T1")  # new ids, same messages
    found(repo, (6, f"commit {applied['details']['commit'][:12]} is not an ancestor of HEAD"))


# -- tokens ----------------------------------------------------------------------------------


def test_a_token_expired_when_used(repo: Sample) -> None:
    set_token(repo, expires="2026-01-01T00:00:10Z")
    expired = "after it expired at 2026-01-01T00:00:10Z"
    findings = found(
        repo,
        (13, f"token W1 applied at 2026-01-01T00:00:13Z, {expired}"),
        (15, f"token W1 invoked at 2026-01-01T00:00:15Z, {expired}"),
    )
    assert not any(seq is not None and seq < 13 for seq, _ in findings)


def test_a_one_shot_token_applied_twice(repo: Sample) -> None:
    set_token(repo, one_shot=True)
    found(repo, (13, "one-shot token W1 applied again (first at seq 6)"))


def test_a_one_shot_token_spent_by_another_commit(repo: Sample) -> None:
    set_token(
        repo, one_shot=True, spent={"task_id": "demo", "call_id": "1" * 64, "commit": "2" * 40}
    )
    found(repo, (6, "one-shot token W1 is marked spent by commit 222222222222, not"))


def test_a_token_that_does_not_cover_the_subtask(repo: Sample) -> None:
    set_token(repo, paths=["src/**"])
    found(repo, (8, "token W1 does not cover tests/**, tests/test_*.py"))


def test_a_token_no_store_ever_held(repo: Sample) -> None:
    evs = events(repo)
    evs[1] = {**evs[1], "details": {**evs[1]["details"], "token": "W9"}}
    rechain(repo, evs)
    found(repo, (1, "token W9 is not in ai/agents/write_tokens.json or its history"))


def test_a_token_removed_from_the_store_after_its_use_is_judged_as_it_was(
    repo: Sample,
) -> None:
    set_token(repo, id="W2")
    repo.commit_all("W1 is gone")
    assert audit(repo) == (0, [])


def test_a_file_added_to_an_exchange_folder(repo: Sample) -> None:
    t1 = call(repo, "T1")
    (repo.root / EXCHANGES / t1 / "patches" / "001.patch").write_text("more\n")
    found(repo, (1, f"exchange {t1[:12]}: files do not match meta.json: patches/001.patch"))


# -- the plan --------------------------------------------------------------------------------


def test_a_plan_that_is_not_json(repo: Sample) -> None:
    plan = repo.root / "ai/tasks/demo/plan.json"
    plan.write_text(plan.read_text()[:-3])
    found(repo, (None, "ai/tasks/demo/plan.json: invalid JSON"))


def test_a_plan_subtask_against_the_schema(repo: Sample) -> None:
    doc = repo.read_json("ai/tasks/demo/plan.json")
    del doc["subtasks"][1]["goal"]
    repo.write_json("ai/tasks/demo/plan.json", doc)
    found(repo, (None, "ai/tasks/demo/plan.json: $.subtasks[1]: 'goal' is a required property"))


def test_a_log_cut_back_stays_caught_after_a_later_record_commit(repo: Sample) -> None:
    """What `next` did before it refused a cut log: append and record again. Every commit's
    log head must be a line of the log, not only the newest one."""
    recorded = repo.git(
        "log", "--format=%(trailers:key=Harness-Log-Head,valueonly)", "--grep=^harness: record"
    ).split()
    lines = (repo.root / LOG).read_bytes().splitlines(keepends=True)
    gone = set(recorded) - {line_hash(line.rstrip(b"\n")) for line in lines[:2]}
    (repo.root / LOG).write_bytes(b"".join(lines[:2]))
    repo.commit_all("cut")
    head = line_hash(lines[1].rstrip(b"\n"))
    message = f"harness: record demo\n\nHarness-Task: demo\nHarness-Log-Head: {head}\n"
    repo.git(
        "-c", "user.name=h", "-c", "user.email=h@h", "commit", "-q", "--allow-empty", "-m", message
    )
    findings = found(repo, (None, "is no line of the log: it was truncated or rewritten"))
    named = {r.split()[2] for _, r in findings if "is no line of the log" in r}
    assert gone and named == {h[:12] for h in gone}  # each lost head, the newest one kept


# -- plan order of the subtask commits -----------------------------------------------------


def parallel_record(s: Sample) -> list[Event]:
    """Two independent subtasks run in two slots: both calls in flight, P1's answer taken and
    landed first, then P2's."""
    s.write_plan(
        [
            subtask(sid, write_scope="src/**", creates=[f"src/{sid.lower()}.py"])
            for sid in ("P1", "P2")
        ]
    )
    s.write_script(
        [
            ok(sid, (path, new_file_patch(path, [f"NAME = {sid!r}"])))
            for sid in ("P1", "P2")
            for path in [f"src/{sid.lower()}.py"]
        ]
    )
    res = s.cli("run", "demo", "--max-parallel", "2")
    assert res.returncode == 0, res.stderr
    return events(s)


def at(evs: list[Event], name: str, step: str) -> int:
    return next(i for i, ev in enumerate(evs) if ev["event"] == name and ev.get("step") == step)


def git_in(s: Sample, *args: str, stdin: str = "", env: dict[str, str] | None = None) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=s.root,
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **IDENTITY, **(env or {})},
    ).stdout.strip()


def reland(s: Sample, evs: list[Event]) -> None:
    """Make the branch and the log say the changes landed in the order `evs` applies them,
    as harness would have recorded it: each subtask commit made again on the one before,
    its Harness-Log-Head the line before its subagent_diffs_applied, and a record commit of
    the rewritten log on top."""
    made: dict[str, str] = {}  # subtask -> its commit made again
    old = {
        ev["step"]: ev["details"]["commit"] for ev in evs if ev["event"] == "subagent_diffs_applied"
    }
    parent = git_in(s, "rev-parse", f"{old[min(old)]}^")
    index = {"GIT_INDEX_FILE": str(s.root / ".git" / "reland.index")}
    prev, lines = GENESIS, []
    for seq, ev in enumerate(evs):
        step = ev.get("step")
        if ev["event"] == "subagent_diffs_applied":
            git_in(s, "read-tree", parent, env=index)
            for path in ev["details"]["files"]:
                blob = git_in(s, "rev-parse", f"{old[step]}:{path}")
                git_in(
                    s, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=index
                )
            tree = git_in(s, "write-tree", env=index)
            body = git_in(s, "log", "-1", "--format=%B", old[step])
            body = body.rpartition("Harness-Log-Head: ")[0] + f"Harness-Log-Head: {prev}\n"
            parent = made[step] = git_in(s, "commit-tree", tree, "-p", parent, stdin=body)
        if ev["event"] in ("subagent_diffs_applied", "step_completed") and step in made:
            ev = {**ev, "details": {**ev["details"], "commit": made[step]}}
        line = files.dumps({**ev, "seq": seq, "prev": prev})
        lines.append(line + b"\n")
        prev = line_hash(line)
    (s.root / LOG).write_bytes(b"".join(lines))
    git_in(s, "reset", "-q", "--soft", parent)
    git_in(s, "add", "ai")
    git_in(
        s, "commit", "-qm", f"harness: record demo\n\nHarness-Task: demo\nHarness-Log-Head: {prev}"
    )


def test_subtask_commits_in_the_order_their_answers_were_taken_audit_clean(
    sample: Sample,
) -> None:
    """The twin: the branch made again in the order harness made it is clean."""
    evs = parallel_record(sample)
    assert at(evs, "subagent_diffs_applied", "P1") < at(evs, "subagent_succeeded", "P2")
    reland(sample, evs)
    assert audit(sample) == (0, [])


def test_a_branch_whose_subtask_commits_are_out_of_plan_order_is_refused(
    sample: Sample,
) -> None:
    """What a parallel run killed during P1's checks once recorded: P1's answer taken, then
    P2's, and P2 committed before P1, the log and every trailer agreeing."""
    evs = parallel_record(sample)
    p1, p2 = at(evs, "subagent_succeeded", "P1"), at(evs, "subagent_succeeded", "P2")
    landing_p2 = evs[p2 : at(evs, "step_completed", "P2") + 1]
    rest = [ev for ev in evs[p1 + 1 :] if ev not in landing_p2]
    reordered = [*evs[: p1 + 1], *landing_p2, *rest]
    reland(sample, reordered)
    subtasks = sample.git("log", "--reverse", "--format=%(trailers:key=Harness-Subtask,valueonly)")
    assert subtasks.split() == ["P2", "P1"]
    applied = at(reordered, "subagent_diffs_applied", "P2")
    why = f"P2 landed before P1, whose answer was taken first (at seq {p1}): the subtask "
    assert audit(sample) == (1, [(applied, why + "commits are out of plan order")])
