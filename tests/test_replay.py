"""`harness replay`: the recorded run re-made in a scratch clone, commit for commit.

Every test records a run through the real CLI in a real repository, then replays it the way
CI would: from the files and history of that repository, touching none of it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import orjson
import pytest

from harness.base import files
from harness.record.progress import GENESIS, line_hash
from tests.conftest import Sample, calc_patch, err, new_file_patch, ok, scripted, subtask

EXTRA = new_file_patch("src/extra.py", ["EXTRA = 2"])


def plan_two(sample: Sample) -> None:
    sample.write_plan(
        [
            subtask("T1"),
            subtask("T2", depends_on=["T1"], creates=["src/extra.py"], inputs=[]),
        ]
    )


def commits_of(sample: Sample) -> list[str]:
    return [
        e["details"]["commit"] for e in sample.events() if e["event"] == "subagent_diffs_applied"
    ]


def state_of(sample: Sample) -> tuple[str, str, str, str]:
    """Everything replay must leave alone: refs, worktrees, status and the log's bytes."""
    log = (sample.root / "ai/tasks/demo/progress.ndjson").read_bytes()
    return (
        sample.git("show-ref"),
        sample.git("worktree", "list", "--porcelain"),
        sample.git("status", "--porcelain", "--untracked-files=all"),
        log.hex(),
    )


@pytest.fixture(scope="module")
def stepped_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stepped(scripted(tmp_path_factory.mktemp("stepped"))).root


@pytest.fixture
def ran(stepped_once: Path, tmp_path: Path) -> Sample:
    """A copy of the stepped run for a test to replay, or damage and replay."""
    root = tmp_path / "repo"
    shutil.copytree(stepped_once, root, symlinks=True)
    return Sample(root, tmp_path / "script.json")


def replay(sample: Sample, *args: str) -> subprocess.CompletedProcess[str]:
    return sample.cli("replay", "demo", *args)


def stepped(sample: Sample) -> Sample:
    """Two subtasks stepped one `next` at a time, so record commits sit between them."""
    plan_two(sample)
    sample.write_script(
        [ok("T1", ("src/calc.py", calc_patch())), ok("T2", ("src/extra.py", EXTRA))]
    )
    for _ in range(3):
        assert sample.cli("next", "demo").returncode == 0
    assert sample.names()[-1] == "task_completed"
    return sample


def test_stepped_run_is_reproduced_commit_for_commit(ran: Sample) -> None:
    before = state_of(ran)
    done = replay(ran)
    assert done.returncode == 0, done.stderr
    assert f"{len(ran.events())} events and 2 commits reproduced" in done.stdout
    for commit in commits_of(ran):
        assert commit in done.stdout
    # the record commits between the subtasks were taken as recorded parents
    parents = [ran.git("rev-parse", f"{c}^").strip() for c in commits_of(ran)]
    assert ran.git("log", "-1", "--format=%s", parents[1]).strip() == "harness: record demo"
    assert state_of(ran) == before


def test_verify_reruns_the_checks_and_still_reproduces(ran: Sample) -> None:
    done = replay(ran, "--verify")
    assert done.returncode == 0, done.stderr
    assert "checks re-run in the sandbox" in done.stdout


def test_retry_block_human_fix_and_resume_are_replayed(sample: Sample) -> None:
    plan_two(sample)
    sample.write_script(
        [
            err("T1", "retryable", "rate limited", retry=False),
            err("T1", "hard", "cannot do it", retry=True),
        ]
    )
    assert sample.cli("run", "demo").returncode == 1
    # A person fixes something outside the task's scope, commits, and resumes.
    (sample.root / "NOTES.md").write_text("fixed by hand\n")
    sample.commit_all("human fix")
    sample.write_script(
        [ok("T1", ("src/calc.py", calc_patch())), ok("T2", ("src/extra.py", EXTRA))]
    )
    assert sample.cli("resume", "demo", "--reason", "fixed").returncode == 0
    assert sample.cli("run", "demo").returncode == 0
    names = sample.names()
    assert "subagent_retried" in names and "blocker_resolved" in names
    before = state_of(sample)
    done = replay(sample)
    assert done.returncode == 0, done.stderr
    assert f"{len(names)} events and 2 commits reproduced" in done.stdout
    assert state_of(sample) == before


def test_a_partial_run_replays_as_far_as_it_went(sample: Sample) -> None:
    plan_two(sample)
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("next", "demo").returncode == 0
    done = replay(sample)
    assert done.returncode == 0, done.stderr
    assert f"{len(sample.events())} events and 1 commits reproduced" in done.stdout


def test_each_command_replays_with_its_own_config(sample: Sample) -> None:
    """The identity changed between two commands: each commit replays with the config of
    the command that made it (read from its record commit), not with today's."""
    plan_two(sample)
    sample.write_script(
        [ok("T1", ("src/calc.py", calc_patch())), ok("T2", ("src/extra.py", EXTRA))]
    )
    assert sample.cli("next", "demo").returncode == 0
    config = sample.root / "ai/harness.toml"
    config.write_text(config.read_text().replace('name = "harness"', 'name = "someone else"'))
    sample.commit_all("a new identity")
    assert sample.cli("run", "demo").returncode == 0
    authors = sample.git("log", "--format=%an", "--grep=Harness-Call-Id").split("\n")[:2]
    assert authors == ["someone else", "harness"]
    done = replay(sample)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("what", ["identity", "goal"])
def test_an_edit_after_the_run_changes_nothing(ran: Sample, what: str) -> None:
    if what == "identity":
        config = ran.root / "ai/harness.toml"
        config.write_text(config.read_text().replace('name = "harness"', 'name = "someone"'))
    else:
        plan = ran.read_json("ai/tasks/demo/plan.json")
        plan["subtasks"][0]["goal"] = "Something else"
        ran.write_json("ai/tasks/demo/plan.json", plan)
    done = replay(ran)
    assert done.returncode == 0, done.stderr


def test_a_call_missing_from_the_record_is_an_error(ran: Sample) -> None:
    second = [e for e in ran.events() if e["event"] == "subagent_invoked"][1]
    shutil.rmtree(ran.root / "ai/exchanges/demo" / second["details"]["call_id"])
    done = replay(ran)
    assert done.returncode == 1
    # The invocation replays; the answer it would need is not there.
    assert f"diverged at event {second['seq'] + 1}" in done.stderr
    assert "a call not in the record" in done.stderr


def test_a_damaged_exchange_stops_the_replay(ran: Sample) -> None:
    first = next(e for e in ran.events() if e["event"] == "subagent_invoked")
    patch = ran.root / "ai/exchanges/demo" / first["details"]["call_id"] / "patches/000.patch"
    patch.write_text(patch.read_text().replace("VALUE = 1", "VALUE = 2"))
    done = replay(ran)
    assert done.returncode in (1, 2)
    assert "files do not match meta.json" in done.stderr


def set_test(sample: Sample, command: str, *verify: str) -> None:
    """The sample's [verify] test command, and more lines of [verify]."""
    config = sample.root / "ai/harness.toml"
    lines = []
    for ln in config.read_text().splitlines():
        lines += (
            [f"test = {orjson.dumps(command).decode()}", *verify]
            if ln.startswith("test = ")
            else [ln]
        )
    config.write_text("\n".join(lines) + "\n")


def test_verify_runs_an_uncontained_records_checks_in_the_sandbox(
    sample: Sample, tmp_path: Path
) -> None:
    """A pull request records [sandbox] mode = "off" and a test that writes on the machine:
    replay --verify runs it in the sandbox, where the machine's files are not; only the
    operator's --trust-config runs it as recorded, and the output says so."""
    target = tmp_path / "outside" / "x"
    target.parent.mkdir()
    sample.uncontain()
    set_test(sample, f"touch {target}")
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("run", "demo").returncode == 0
    target.unlink()  # the recorded run wrote it, uncontained: the record says so
    done = replay(sample, "--verify")
    assert done.returncode == 1 and "found test_failed" in done.stderr
    assert not target.exists()
    trusted = replay(sample, "--verify", "--trust-config")
    assert trusted.returncode == 0, trusted.stderr
    assert "checks re-run as the record's config says: sandbox off" in trusted.stdout
    assert target.exists()


def test_verify_gives_checks_no_network_whatever_the_record_says(sample: Sample) -> None:
    """A record that gave its checks the network (isolate_network = false) cannot reach the
    machine's services under replay --verify; its twin, trusted, reaches them."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        reach = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5)\""
        set_test(sample, reach, "isolate_network = false")
        sample.write_plan([subtask("T1")])
        sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
        assert sample.cli("run", "demo").returncode == 0
        done = replay(sample, "--verify")
        assert done.returncode == 1 and "found test_failed" in done.stderr
        trusted = replay(sample, "--verify", "--trust-config")
        assert trusted.returncode == 0, trusted.stderr
        assert "as the record's config says: network for checks" in trusted.stdout


def test_verify_diverges_when_the_tests_now_fail(sample: Sample, tmp_path: Path) -> None:
    """Checks re-run: here a test that passed because of a file on the machine (the sandbox
    off, so it could see it) fails, the file being out of the sandbox's sight."""
    marker = tmp_path / "present"
    marker.write_text("")
    sample.uncontain()
    config = sample.root / "ai/harness.toml"
    lines = [
        f'test = "test -e {marker}"' if ln.startswith("test = ") else ln
        for ln in config.read_text().splitlines()
    ]
    config.write_text("\n".join(lines) + "\n")
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("run", "demo").returncode == 0
    marker.unlink()
    assert replay(sample).returncode == 0  # the recorded verdicts still replay
    done = replay(sample, "--verify")
    assert done.returncode == 1
    assert "expected test_passed T1 ok" in done.stderr and "found test_failed" in done.stderr


def test_tampered_log_is_refused(ran: Sample) -> None:
    log = ran.root / "ai/tasks/demo/progress.ndjson"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[2], lines[3] = lines[3], lines[2]
    log.write_bytes(b"".join(lines))
    done = replay(ran)
    assert done.returncode == 2 and "hash chain broken" in done.stderr


def test_nothing_to_replay(sample: Sample) -> None:
    plan_two(sample)
    done = replay(sample)
    assert done.returncode == 2 and "nothing recorded" in done.stderr
    (sample.root / "ai/tasks/demo/progress.ndjson").write_bytes(b"")
    done = replay(sample)
    assert done.returncode == 2 and "nothing recorded" in done.stderr
    assert sample.cli("replay", "nosuch").returncode == 2


def test_replay_in_a_fresh_clone(ran: Sample, tmp_path: Path) -> None:
    """What CI does: clone the branch, replay from the committed record alone."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ran.root), str(clone)], check=True)
    fresh = Sample(clone, ran.script)
    done = fresh.cli("replay", "demo", "--verify")
    assert done.returncode == 0, done.stderr
    for commit in commits_of(ran):
        assert commit in done.stdout


@pytest.mark.parametrize("kind", ["retryable", "timeout"])
def test_failed_exchanges_are_fed_back_not_reinvoked(sample: Sample, kind: str) -> None:
    sample.write_plan([subtask("T1")])
    if kind == "timeout":
        sample.write_json(
            "ai/agents/registry.json",
            {
                "agents": [
                    {
                        **sample.read_json("ai/agents/registry.json")["agents"][0],
                        "timeouts": {"soft_s": 3, "hard_s": 4},
                    }
                ]
            },
        )
        first = {"subtask": "T1", "retry": False, "sleep_s": 5, "result": {}}
    else:
        first = err("T1", "retryable", "rate limited", retry=False)
    sample.write_script([first, ok("T1", ("src/calc.py", calc_patch()), retry=True)])
    assert sample.cli("next", "demo").returncode == 0, sample.names()
    # Make any real call fail loudly: the replay must not make one.
    sample.write_script([])
    done = replay(sample)
    assert done.returncode == 0, done.stderr
    failed = next(e for e in sample.events() if e["event"] == "subagent_failed")
    assert failed["details"]["kind"] == kind


@pytest.mark.parametrize("base", ["--upload-pack=touch /tmp/pwned", "HEAD~1", "0" * 40])
def test_a_forged_base_is_refused_before_git_sees_it(ran: Sample, base: str) -> None:
    """A log rewritten with a consistent chain but a hostile base: no option reaches git."""
    events = ran.events()
    events[1]["details"]["base"] = base
    prev, lines = GENESIS, []
    for event in events:
        event["prev"] = prev
        line = files.dumps(event)
        lines.append(line + b"\n")
        prev = line_hash(line)
    (ran.root / "ai/tasks/demo/progress.ndjson").write_bytes(b"".join(lines))
    done = replay(ran)
    assert done.returncode == 2, done.stderr
    assert "no commit id" in done.stderr or "not in this clone" in done.stderr


def test_an_exchange_meta_without_its_hashes_is_refused_not_a_crash(ran: Sample) -> None:
    first = next(e for e in ran.events() if e["event"] == "subagent_invoked")
    meta = ran.root / "ai/exchanges/demo" / first["details"]["call_id"] / "meta.json"
    doc = orjson.loads(meta.read_bytes())
    del doc["files"]
    meta.write_bytes(orjson.dumps(doc))
    done = replay(ran)
    assert done.returncode == 1, done.stderr
    assert "meta.json" in done.stderr and "files" in done.stderr
    audited = ran.cli("audit", "demo")
    assert audited.returncode == 1 and "meta.json" in audited.stdout


def test_a_plan_fixed_by_a_person_between_epochs_replays_and_audits_clean(
    sample: Sample,
) -> None:
    """The documented fix: a blocked subtask's plan edited, `resume`, `run` again. Each
    call replays with the plan it was made with, read from the record commits."""
    sample.write_plan([subtask("T1")])
    sample.write_script([err("T1", "hard", "the goal is unclear")])
    assert sample.cli("run", "demo").returncode == 1
    sample.write_plan([subtask("T1", goal="Add VALUE = 1 at the end of src/calc.py")])
    assert sample.cli("resume", "demo", "--reason", "clearer goal").returncode == 0
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("run", "demo").returncode == 0
    assert sample.cli("audit", "demo").returncode == 0
    res = sample.cli("replay", "demo")
    assert res.returncode == 0, res.stderr
    # Its twin: a plan edited after the run is not what the calls saw, and changes nothing.
    sample.write_plan([subtask("T1", goal="Something else entirely")])
    sample.commit_all("a later edit")
    assert sample.cli("replay", "demo").returncode == 0


def test_a_token_revoked_after_the_run_replays(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("run", "demo").returncode == 0
    sample.write_json("ai/agents/write_tokens.json", {"tokens": []})
    sample.commit_all("revoke W1")
    res = sample.cli("replay", "demo")
    assert res.returncode == 0, res.stderr
    assert sample.cli("audit", "demo").returncode == 0
