"""The verification gate end to end: checks before build, hermetic twice-run tests, acceptance
criteria and role rules, evidence. Every case drives the real CLI on a real sample repository;
every refusal has a passing twin."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.base import folders
from harness.checks import verify
from harness.importers import demo

from .conftest import Sample, calc_patch, err, new_file_patch, ok, scripted, subtask

PY = shlex.quote(sys.executable)
COVERAGE = f"{PY} -m coverage run --branch -m unittest discover -s tests -t . -q"
CALC = demo.SAMPLE["src/calc.py"].splitlines()  # 1 docstring, 2-3 blank, 4 def add, 5 return


# -- helpers -------------------------------------------------------------------------------


def toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def configure(
    sample: Sample, *, coverage: bool = False, contained: bool = True, **checks: Any
) -> None:
    """ai/harness.toml with exactly the given [verify] keys (nothing else runs).

    `contained=False` is for tests that watch the commands from outside through a shared
    file, which the sandbox rightly forbids (containment itself: test_containment_e2e.py).
    """
    lines = ["[identity]", 'name = "harness"', 'email = "harness@example.invalid"']
    if not contained:
        lines += ["[sandbox]", 'mode = "off"']
    lines += ["[verify]"]
    lines += [f"{key} = {toml(value)}" for key, value in checks.items()]
    if coverage:
        lines += ["[coverage]", f"command = {toml(COVERAGE)}"]
    lines += ["[defaults]", "timeouts = { soft_s = 60, hard_s = 90 }", "verify_timeout_s = 60"]
    sample.set_config("\n".join(lines) + "\n")


def allow_roles(sample: Sample, *roles: str) -> None:
    reg = sample.read_json("ai/agents/registry.json")
    reg["agents"][0]["capabilities"] += list(roles)
    sample.write_json("ai/agents/registry.json", reg)


def answer(sid: str, *diffs: tuple[str, str], **result: Any) -> dict[str, Any]:
    """ok() plus notes, risks or metrics in the result."""
    found = ok(sid, *diffs)
    found["result"].update(result)
    return found


def step(
    sample: Sample,
    plan: list[dict[str, Any]],
    answers: list[dict[str, Any]],
    env: dict[str, str] | None = None,
) -> int:
    sample.write_plan(plan)
    sample.write_script(answers)
    return sample.cli("next", "demo", env=env).returncode


def named(sample: Sample, name: str) -> list[dict[str, Any]]:
    return [e for e in sample.events() if e["event"] == name]


def call_ids(sample: Sample) -> list[str]:
    return [e["details"]["call_id"] for e in named(sample, "subagent_invoked")]


def evidence(sample: Sample, call: int = 0) -> dict[str, dict[str, Any]]:
    """The verify/ folder of the n-th call: {"00-format": {...}, ...} in file order."""
    folder = sample.root / "ai/exchanges/demo" / call_ids(sample)[call] / "verify"
    if not folder.is_dir():
        return {}
    return {p.stem: orjson.loads(p.read_bytes()) for p in sorted(folder.glob("*.json"))}


def replace_patch(start: int, old: list[str], new: list[str], path: str = "src/calc.py") -> str:
    body = "".join(f"-{line}\n" for line in old) + "".join(f"+{line}\n" for line in new)
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -{start},{len(old)} +{start},{len(new)} @@\n{body}"
    )


def append_patch(new: list[str]) -> str:
    """Lines appended to the sample's src/calc.py."""
    tail = CALC[2:]
    body = "".join(f" {line}\n" for line in tail) + "".join(f"+{line}\n" for line in new)
    return (
        "diff --git a/src/calc.py b/src/calc.py\n--- a/src/calc.py\n+++ b/src/calc.py\n"
        f"@@ -3,{len(tail)} +3,{len(tail) + len(new)} @@\n{body}"
    )


RENAME = replace_patch(4, CALC[3:5], ["def add(x, b):", "    return x + b"])
BODY_ONLY = replace_patch(5, CALC[4:5], ["    return b + a"])
UNCOVERED = append_patch(
    ["", "", "def sign(x):", "    if x < 0:", "        return -1", "    return 1"]
)


def docstring_patch(params: list[str]) -> str:
    doc = ['    """Add two numbers.', "", "    Args:"]
    doc += [f"        {p}: an operand." for p in params] + ['    """']
    return replace_patch(4, CALC[3:5], [CALC[3], *doc, CALC[4]])


def halted_on_acceptance(sample: Sample, head: str) -> dict[str, Any]:
    """acceptance_failed halts at once: no retry, no commit; returns the failure event."""
    names = sample.names()
    assert names[-3:] == ["acceptance_failed", "step_failed", "blocker_encountered"], names
    assert "subagent_retried" not in names and "subagent_diffs_applied" not in names
    assert sample.git("log", "--format=%s", f"{head}..HEAD").splitlines() == [
        "harness: record demo"
    ]
    return named(sample, "acceptance_failed")[-1]


def completed(sample: Sample) -> dict[str, Any]:
    assert sample.names()[-1] == "step_completed", sample.names()
    return named(sample, "step_completed")[-1]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def interfaces(proc_net_dev: str) -> list[str]:
    return sorted(line.split(":")[0].strip() for line in proc_net_dev.splitlines()[2:])


# -- 1. checks before build ------------------------------------------------------------------


def test_format_lint_license_build_run_in_order_then_tests_twice_with_evidence(
    sample: Sample, tmp_path: Path
) -> None:
    order = tmp_path / "order"
    cmds = {n: f"echo {n} >> {order}; echo {n}-says-hello" for n in ("format", "lint", "license")}
    cmds["build"] = f"echo build >> {order}; echo build-says-hello"
    cmds["test"] = f"echo test >> {order}; echo test-says-hello"
    configure(sample, contained=False, **cmds)
    assert step(sample, [subtask("T1")], [ok("T1", ("src/calc.py", calc_patch()))]) == 0
    completed(sample)
    assert order.read_text().split() == ["format", "lint", "license", "build", "test", "test"]
    built = named(sample, "build_succeeded")
    assert [e["details"]["check"] for e in built] == ["format", "lint", "license", "build"]
    for event in built:
        name = event["details"]["check"]
        assert event["details"]["command"] == cmds[name]
        assert event["details"]["exit_codes"] == [0]
    (tested,) = named(sample, "test_passed")
    assert tested["details"]["exit_codes"] == [0, 0]
    assert tested["details"]["command"] == cmds["test"]
    assert "flaky" not in tested["details"] and "process_leak" not in tested["details"]
    # Evidence: one file per check, in run order, with command, exit codes, tails; no timing.
    found = evidence(sample)
    assert list(found) == ["00-format", "01-lint", "02-license", "03-build", "04-test"]
    for stem, doc in found.items():
        name = stem[3:]
        assert doc["check"] == name and doc["command"] == cmds[name]
        assert doc["exit_codes"] == [0] * len(doc["runs"])
        assert len(doc["runs"]) == (2 if name == "test" else 1)
        for run in doc["runs"]:
            assert run["exit_code"] == 0 and run["timed_out"] is False
            assert "duration_s" not in run
            assert run["tail"] == f"{name}-says-hello"
    # Nothing asked for acceptance, so nothing was judged or measured.
    assert "phase_completed" not in sample.names()


def test_failing_lint_stops_the_checks_after_it_and_is_retried_once(
    sample: Sample, tmp_path: Path
) -> None:
    order = tmp_path / "order"
    configure(
        sample,
        contained=False,
        format=f"echo format >> {order}",
        lint=f"echo lint >> {order}; echo 'E501 line too long' >&2; exit 1",
        license=f"echo license >> {order}",
        build=f"echo build >> {order}",
        test=f"echo test >> {order}",
    )
    head = sample.head()
    assert step(sample, [subtask("T1")], [ok("T1", ("src/calc.py", calc_patch()))]) == 1
    assert order.read_text().split() == ["format", "lint", "format", "lint"]
    failed = named(sample, "build_failed")
    assert len(failed) == 2 and "subagent_retried" in sample.names()
    details = failed[0]["details"]
    assert details["check"] == "lint" and details["exit_codes"] == [1]
    assert "E501 line too long" in failed[0]["error"] and "exit 1" in failed[0]["error"]
    assert sample.names()[-2:] == ["step_failed", "blocker_encountered"]
    assert "test_passed" not in sample.names() and "test_failed" not in sample.names()
    for call in (0, 1):
        found = evidence(sample, call)
        assert list(found) == ["00-format", "01-lint"]
        assert found["01-lint"]["runs"][0]["tail"] == "E501 line too long"
    assert sample.git("log", "--format=%s", f"{head}..HEAD").splitlines() == [
        "harness: record demo"
    ]


LICENSE = {"header": "^# SPDX-License-Identifier: ", "paths": ["src/**/*.py"]}


@pytest.mark.parametrize("with_header", [True, False])
def test_license_rule_checks_every_added_source_file(sample: Sample, with_header: bool) -> None:
    configure(sample, license=LICENSE)
    header = ["# SPDX-License-Identifier: MIT"] if with_header else []
    diffs = [
        ("src/extra.py", new_file_patch("src/extra.py", [*header, "X = 1"])),
        ("docs/notes.md", new_file_patch("docs/notes.md", ["outside the rule's paths"])),
        ("src/calc.py", calc_patch()),  # changed, not added: the rule does not apply
    ]
    plan = [subtask("T1", write_scope=["src/**", "docs/**"], creates=["src/*.py", "docs/*.md"])]
    code = step(sample, plan, [ok("T1", *diffs)])
    if with_header:
        assert code == 0
        completed(sample)
        (event,) = named(sample, "build_succeeded")
        assert event["details"] == {"check": "license", "rule": LICENSE["header"]}
        assert (sample.root / "src/extra.py").read_text().startswith("# SPDX")
    else:
        assert code == 1
        failed = named(sample, "build_failed")
        assert len(failed) == 2  # one retry, then blocked
        assert failed[0]["details"] == {"check": "license", "rule": LICENSE["header"]}
        assert failed[0]["error"] == "src/extra.py: no license header"
        assert sample.names()[-1] == "blocker_encountered"


# -- 2. build and tests: twice, hermetic -----------------------------------------------------


def test_each_test_run_has_a_fresh_worktree_and_a_private_hermetic_environment(
    sample: Sample, tmp_path: Path
) -> None:
    out = tmp_path / "env"
    # Fails if the marker survived from the other run: each run needs its own worktree.
    configure(
        sample,
        contained=False,
        test=f"test ! -e marker && touch marker && {{ echo ---; pwd; env; }} >> {out}",
    )
    env = {"HARNESS_SECRET_FOR_TEST": "leaked"}
    assert step(sample, [subtask("T1")], [ok("T1", ("src/calc.py", calc_patch()))], env) == 0
    completed(sample)
    (tested,) = named(sample, "test_passed")
    assert tested["details"]["exit_codes"] == [0, 0]
    runs = [block.strip().splitlines() for block in out.read_text().split("---")[1:]]
    assert len(runs) == 2
    cwds = [lines[0] for lines in runs]
    seen = [dict(line.split("=", 1) for line in lines[1:] if "=" in line) for lines in runs]
    assert cwds[0] != cwds[1]
    homes = [e["HOME"] for e in seen]
    assert homes[0] != homes[1]
    assert os.environ.get("HOME") not in homes and str(Path.home()) not in homes
    for e in seen:
        assert e["TZ"] == "UTC" and e["LC_ALL"] == "C"
        assert e["PYTHONDONTWRITEBYTECODE"] == "1"
        assert "-p no:cacheprovider" in e["PYTEST_ADDOPTS"]
        assert "HARNESS_SECRET_FOR_TEST" not in e
    # The marker was made after the tree was written: it is in no commit.
    assert "marker" not in sample.git("ls-tree", "-r", "--name-only", "HEAD")


@pytest.mark.parametrize("isolate", [True, False])
def test_verify_commands_get_no_network_unless_the_config_allows_it(
    sample: Sample, isolate: bool
) -> None:
    # /proc/net is per network namespace: the sandbox's own shows loopback only.
    configure(sample, test="tail -n +3 /proc/net/dev | cut -d: -f1", isolate_network=isolate)
    assert step(sample, [subtask("T1")], [ok("T1", ("src/calc.py", calc_patch()))]) == 0
    (tested,) = named(sample, "test_passed")
    assert tested["details"]["network"] == ("none" if isolate else "host")
    tail = evidence(sample)["00-test"]["runs"][0]["tail"]
    seen = sorted(name.strip() for name in tail.split("|"))
    assert seen == (["lo"] if isolate else interfaces(Path("/proc/net/dev").read_text()))


def test_a_flooding_test_command_is_cut_and_its_tail_says_so(sample: Sample) -> None:
    # Output volume alone is no failure; the tail must not pass off the cut for the end.
    configure(sample, test="head -c 40000000 /dev/zero | tr '\\0' x; echo; echo end")
    assert step(sample, [subtask("T1")], [ok("T1", ("src/calc.py", calc_patch()))]) == 0
    for run in evidence(sample)["00-test"]["runs"]:
        assert run["tail"].endswith(f"x | [harness: output cut at {verify.LOG_LIMIT} bytes]")


@pytest.mark.parametrize("leak", [True, False])
def test_a_process_left_running_fails_the_tests_and_is_killed(sample: Sample, leak: bool) -> None:
    # A setsid daemon is in the sandbox's PID namespace too: seen, named, killed.
    marker = f"{31 + os.getpid() % 1000}.{os.getpid()}"
    command = f"setsid sleep {marker} & exit 0" if leak else "sleep 0.2 & wait"
    configure(sample, test=command)
    code = step(sample, [subtask("T1")], [ok("T1", ("src/calc.py", calc_patch()))])
    assert not [p for p in running() if marker in p]
    if not leak:
        assert code == 0
        (tested,) = named(sample, "test_passed")
        assert "process_leak" not in tested["details"]
        return
    assert code == 1
    failed = named(sample, "test_failed")
    assert len(failed) == 2
    assert failed[0]["details"]["process_leak"] is True
    assert failed[0]["details"]["exit_codes"] == [0, 0]
    assert failed[0]["details"]["flaky"] is False
    assert "process leak" in failed[0]["error"]
    runs = evidence(sample)["00-test"]["runs"]
    assert [r["leaked"] for r in runs] == [True, True]
    assert "still running after the command ended: " in runs[0]["tail"]
    assert sample.names()[-1] == "blocker_encountered"


def running() -> list[str]:
    """Command lines of every process on the host."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            found.append(cmdline.read_bytes().replace(b"\0", b" ").decode("utf-8", "replace"))
        except OSError:
            continue
    return found


def counted(counter: Path, codes: list[int]) -> str:
    """A test command exiting with codes[n] on its n-th run (0 after the list ends)."""
    cases = " ".join(f"{i}) exit {c};;" for i, c in enumerate(codes))
    return (
        f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}; "
        f"case $n in {cases} *) exit 0;; esac"
    )


@pytest.mark.parametrize(
    ("codes", "outcome"),
    [((0, 0), "ok"), ((1, 1), "failed"), ((0, 1), "flaky"), ((1, 0), "flaky")],
)
def test_run_pairs_pass_only_when_both_pass_and_are_never_rerun_until_green(
    sample: Sample, tmp_path: Path, codes: tuple[int, int], outcome: str
) -> None:
    counter = tmp_path / "count"
    configure(sample, contained=False, test=counted(counter, list(codes)))
    assert step(sample, [subtask("T1")], [ok("T1", ("src/calc.py", calc_patch()))]) == 0
    completed(sample)
    if outcome == "ok":
        assert counter.read_text().strip() == "2"
        assert "test_failed" not in sample.names()
        return
    # Exactly one pair ran for the failing attempt: nothing re-ran it until it was green.
    # The one retry is a fresh worker call whose pair (runs 3 and 4) passes.
    assert counter.read_text().strip() == "4"
    (failed,) = named(sample, "test_failed")
    assert failed["details"]["exit_codes"] == list(codes)
    assert failed["details"]["flaky"] is (outcome == "flaky")
    assert ("flaky" in failed["error"]) is (outcome == "flaky")
    assert sample.names().count("subagent_retried") == 1
    (passed,) = named(sample, "test_passed")
    assert passed["details"]["exit_codes"] == [0, 0]


FLIP_TEST = """\
from pathlib import Path

COUNTER = Path({counter!r})


def test_stable():
    assert True


def test_flips():
    n = int(COUNTER.read_text()) if COUNTER.exists() else 0
    COUNTER.write_text(str(n + 1))
    assert n != 1, "fails on the second run only"
"""


def test_junit_report_names_the_tests_that_flipped(sample: Sample, tmp_path: Path) -> None:
    counter = tmp_path / "count"
    (sample.root / "tests/test_flip.py").write_text(FLIP_TEST.format(counter=str(counter)))
    sample.commit_all("a test that flips")
    configure(
        sample,
        contained=False,
        test=f"{PY} -m pytest -q --junitxml=out/report.xml tests/test_flip.py",
        junit="out/report.xml",
    )
    assert step(sample, [subtask("T1")], [ok("T1", ("src/calc.py", calc_patch()))]) == 0
    (failed,) = named(sample, "test_failed")
    assert failed["details"]["exit_codes"] == [0, 1]
    assert failed["details"]["flaky"] is True
    assert failed["details"]["flipped"] == ["tests.test_flip::test_flips"]
    assert evidence(sample)["00-test"]["flipped"] == ["tests.test_flip::test_flips"]
    # The retry's pair (runs 3 and 4) passes: nothing flips, nothing is named.
    (passed,) = named(sample, "test_passed")
    assert "flipped" not in passed["details"]
    assert counter.read_text() == "4"
    completed(sample)


def rendezvous(shared: Path) -> str:
    """Passes only if another run leaves its marker in `shared` within about three seconds."""
    return (
        f'touch "$(mktemp -p {shared} run.XXXXXX)"; i=0; '
        f'while [ "$(ls {shared} | wc -l)" -lt 2 ]; do '
        "i=$((i + 1)); [ $i -gt 30 ] && exit 1; sleep 0.1; done"
    )


@pytest.mark.parametrize("parallel", [True, False])
def test_parallel_runs_run_the_pair_side_by_side(
    sample: Sample, tmp_path: Path, parallel: bool
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    configure(sample, contained=False, test=rendezvous(shared), parallel_runs=parallel)
    answers = [
        ok("T1", ("src/calc.py", calc_patch()), retry=False),
        err("T1", "hard", "gave up", retry=True),
    ]
    code = step(sample, [subtask("T1")], answers)
    if parallel:
        assert code == 0
        (passed,) = named(sample, "test_passed")
        assert passed["details"]["exit_codes"] == [0, 0]
        completed(sample)
    else:
        # One after the other, the first run waits for a marker that never comes.
        assert code == 1
        (failed,) = named(sample, "test_failed")
        assert failed["details"]["exit_codes"] == [1, 0] and failed["details"]["flaky"] is True


# -- 3. acceptance criteria ------------------------------------------------------------------

CRITERIA = ["line>=80%", "branch>=0.8", "coverage_delta>=0", "cmd: grep -q VALUE src/calc.py"]


def test_coverage_and_command_criteria_hold(sample: Sample) -> None:
    configure(sample, coverage=True)
    plan = [subtask("T1", acceptance=CRITERIA)]
    assert step(sample, plan, [ok("T1", ("src/calc.py", calc_patch("VALUE = 1")))]) == 0
    completed(sample)
    (judged,) = named(sample, "phase_completed")
    details = judged["details"]
    assert details["phase"] == "acceptance" and details["check"] == "acceptance"
    assert details["verified"] == CRITERIA and details["unverified"] == []
    measured = details["coverage"]
    assert measured["metric"] == "branch" and measured["delta"] == 0
    assert measured["change"][0] == measured["change"][1]  # every line covered
    found = evidence(sample)
    assert [stem[3:] for stem in found] == [
        "coverage-change",
        "coverage-json-change",  # `coverage run` left only its data file: exported to JSON
        "coverage-base",
        "coverage-json-base",
        "acceptance-cmd",
    ]
    assert found["00-coverage-change"]["command"] == COVERAGE
    exported = found["01-coverage-json-change"]["command"]
    assert exported == '"$HARNESS_PYTHON" -P -m coverage json -q -o coverage.json'  # no host path
    assert found["04-acceptance-cmd"]["command"] == "grep -q VALUE src/calc.py"
    assert all(doc["exit_codes"] == [0] for doc in found.values())


def test_the_coverage_export_is_harness_own_whatever_the_repository_holds(sample: Sample) -> None:
    configure(sample, coverage=True)
    # A project that runs coverage isolated itself, beside a coverage/ package of its own
    # (or one a change added) that `python -m coverage` in the copy would run instead.
    config = sample.root / "ai" / "harness.toml"
    config.write_text(config.read_text().replace(" -m coverage run", " -P -m coverage run"))
    (sample.root / "coverage").mkdir()
    (sample.root / "coverage" / "__init__.py").write_text("")
    (sample.root / "coverage" / "__main__.py").write_text("raise SystemExit('not harness')\n")
    sample.commit_all("a coverage package of the project's")
    plan = [subtask("T1", acceptance=CRITERIA)]
    assert step(sample, plan, [ok("T1", ("src/calc.py", calc_patch("VALUE = 1")))]) == 0
    completed(sample)
    assert all(doc["exit_codes"] == [0] for doc in evidence(sample).values())


def test_failed_criteria_halt_without_retry_or_commit(sample: Sample) -> None:
    configure(sample, coverage=True)
    plan = [subtask("T1", acceptance=CRITERIA)]
    head = sample.head()
    assert step(sample, plan, [ok("T1", ("src/calc.py", UNCOVERED))]) == 1
    failed = halted_on_acceptance(sample, head)
    error = failed["error"]
    assert "line>=80%: measured 0.7273" in error  # 8 of 11 statements: sign() never runs
    assert "branch>=0.8: measured 0.0000" in error
    assert "coverage_delta>=0: measured -" in error
    assert "cmd: grep -q VALUE src/calc.py: acceptance-cmd" in error
    assert failed["details"]["verified"] == []
    assert failed["details"]["coverage"]["delta"] < 0
    assert "sign" not in (sample.root / "src/calc.py").read_text()


@pytest.mark.parametrize(
    ("patch", "docs", "refused"),
    [
        (BODY_ONLY, "echo built", None),
        (RENAME, "echo built", "api_unchanged: removed: src/calc.py: def add(a, b)"),
        (BODY_ONLY, "echo 'broken link' >&2; exit 2", "docs_clean: docs `echo"),
    ],
    ids=["pass", "api-changed", "docs-broken"],
)
def test_api_unchanged_and_docs_clean_criteria(
    sample: Sample, patch: str, docs: str, refused: str | None
) -> None:
    configure(sample, docs=docs)
    head = sample.head()
    plan = [subtask("T1", acceptance=["api_unchanged", "docs_clean"])]
    code = step(sample, plan, [ok("T1", ("src/calc.py", patch))])
    if refused is None:
        assert code == 0
        (judged,) = named(sample, "phase_completed")
        assert judged["details"]["verified"] == ["api_unchanged", "docs_clean"]
        assert evidence(sample)["00-docs"]["runs"][0]["tail"] == "built"
        return
    assert code == 1
    failed = halted_on_acceptance(sample, head)
    assert refused in failed["error"]


@pytest.mark.parametrize("strict", [False, True])
def test_unverified_criteria_are_listed_and_block_when_strict(sample: Sample, strict: bool) -> None:
    configure(sample, strict_acceptance=strict)
    head = sample.head()
    plan = [subtask("T1", acceptance=["reads well", "docs_clean", "cmd: true"])]
    code = step(sample, plan, [ok("T1", ("src/calc.py", calc_patch()))])
    unverified = ["reads well", "docs_clean (no [verify] docs command)"]
    if strict:
        assert code == 1
        failed = halted_on_acceptance(sample, head)
        assert failed["error"] == "unverified under strict_acceptance: " + "; ".join(unverified)
        judged = failed
    else:
        assert code == 0
        (judged,) = named(sample, "phase_completed")
    assert judged["details"]["unverified"] == unverified
    assert judged["details"]["verified"] == ["cmd: true"]
    status = orjson.loads(sample.cli("status", "demo", "--json").stdout)
    assert status["subtasks"][0]["unverified"] == unverified
    text = sample.cli("status", "demo").stdout
    assert "T1 unverified: reads well" in text


def test_a_check_not_configured_never_runs(sample: Sample) -> None:
    configure(sample)
    assert step(sample, [subtask("T1")], [ok("T1", ("src/calc.py", calc_patch()))]) == 0
    completed(sample)
    assert evidence(sample) == {}
    for name in ("build_succeeded", "test_passed", "phase_completed", "acceptance_failed"):
        assert name not in sample.names()


# -- 4. role rules ---------------------------------------------------------------------------

SUBTRACT = ["", "", "def subtract(a, b):", "    return a - b"]


def author_plan(claim: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    plan = [
        subtask(
            "T1",
            role="test-author",
            write_scope="tests/**",
            creates=["tests/test_*.py"],
            acceptance=["coverage_delta>=0"],
        )
    ]
    diff = ("tests/test_subtract.py", demo.TEST_SUBTRACT)
    return plan, [answer("T1", diff, metrics={"coverage_delta": claim})]


def with_uncovered_subtract(sample: Sample) -> None:
    calc = sample.root / "src/calc.py"
    calc.write_text(calc.read_text() + "\n".join(SUBTRACT) + "\n")
    sample.commit_all("subtract, untested")


@pytest.mark.parametrize(("claim", "right"), [(0.11, True), (11, True), (0.3, False)])
def test_test_author_claimed_coverage_delta_must_match(
    sample: Sample, claim: float, right: bool
) -> None:
    with_uncovered_subtract(sample)
    configure(sample, coverage=True)
    head = sample.head()
    plan, answers = author_plan(claim)
    code = step(sample, plan, answers)
    rule = "test-author: claimed coverage delta within 1 point"
    if right:
        assert code == 0
        (judged,) = named(sample, "phase_completed")
        assert judged["details"]["verified"] == ["coverage_delta>=0", rule]
        measured = judged["details"]["coverage"]
    else:
        assert code == 1
        failed = halted_on_acceptance(sample, head)
        assert f"{rule}: claimed 0.3, measured 0.1111 (line)" in failed["error"]
        measured = failed["details"]["coverage"]
    # Base: 8 of 9 statements (subtract's body never runs); change: 14 of 14.
    assert measured == {
        "metric": "line",
        "base": [8, 9, 0, 0],
        "change": [14, 14, 0, 0],
        "delta": round(1 / 9, 6),
    }


def test_the_default_coverage_command_measures_branches(sample: Sample) -> None:
    """No [coverage] command: the default's report has the branch totals a test-author
    subtask is judged on."""
    with_uncovered_subtract(sample)
    configure(sample)
    plan, answers = author_plan(0.11)
    # The default names `python`: the one with coverage and pytest must be first on PATH.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    assert step(sample, plan, answers, env={"PATH": path}) == 0, sample.events()[-1]
    (judged,) = named(sample, "phase_completed")
    assert judged["details"]["coverage"]["base"] == [8, 9, 0, 0]


def test_base_coverage_is_measured_once_per_base_tree(sample: Sample) -> None:
    with_uncovered_subtract(sample)
    configure(sample, coverage=True)
    plan, answers = author_plan(0.3)
    assert step(sample, plan, answers) == 1  # a wrong claim blocks
    first = [stem[3:] for stem in evidence(sample, 0)]
    assert first == [
        "coverage-change",
        "coverage-json-change",
        "coverage-base",
        "coverage-json-base",
    ]
    assert sample.cli("resume", "demo", "--reason", "worker fixed").returncode == 0
    plan, answers = author_plan(0.11)
    assert step(sample, plan, answers) == 0
    completed(sample)
    # Same code at the head (only the harness's own ai/ records moved): base is cached.
    assert [stem[3:] for stem in evidence(sample, 1)] == ["coverage-change", "coverage-json-change"]


@pytest.mark.parametrize("tests_yet", [False, True], ids=["no-tests-yet", "twin"])
def test_a_base_with_no_tests_yet_measures_0(sample: Sample, tests_yet: bool) -> None:
    """The default coverage command (pytest, which exits 5 when it finds no test) on a
    base with no tests: the base covers nothing, the change's tests are measured."""
    with_uncovered_subtract(sample)
    sample.git("rm", "-rq", "tests")
    if tests_yet:  # the twin: a base whose one test covers add()
        (sample.root / "tests").mkdir()
        (sample.root / "tests/test_add.py").write_text(
            "from src.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
        )
    sample.commit_all("the tests as they are")
    configure(sample, test=f"{PY} -m pytest -q -p no:cacheprovider")
    plan, answers = author_plan(0.1429 if tests_yet else 0.8889)
    assert step(sample, plan, answers) == 0, sample.events()[-1]
    (judged,) = named(sample, "phase_completed")
    measured = judged["details"]["coverage"]
    if tests_yet:
        assert (measured["base"], measured["change"]) == ([6, 7, 0, 0], [12, 12, 0, 0])
    else:  # the change's lines, none of them covered before
        assert (measured["base"], measured["change"]) == ([0, 9, 0, 0], [8, 9, 0, 0])


@pytest.mark.parametrize(
    ("patch", "allow", "refused"),
    [(RENAME, False, True), (RENAME, True, False), (BODY_ONLY, False, False)],
    ids=["rename", "rename-allowed", "body-only"],
)
def test_micro_refactor_keeps_the_public_api(
    sample: Sample, patch: str, allow: bool, refused: bool
) -> None:
    allow_roles(sample, "micro-refactor")
    configure(sample)
    head = sample.head()
    plan = [subtask("T1", role="micro-refactor", allow_api_change=allow)]
    code = step(sample, plan, [ok("T1", ("src/calc.py", patch))])
    rule = "micro-refactor: public API unchanged"
    if refused:
        assert code == 1
        failed = halted_on_acceptance(sample, head)
        assert failed["error"] == (
            f"{rule}: removed: src/calc.py: def add(a, b); added: src/calc.py: def add(x, b)"
        )
        return
    assert code == 0
    completed(sample)
    judged = named(sample, "phase_completed")
    if allow:
        assert judged == []  # the rule was waived, nothing else to judge
    else:
        assert judged[0]["details"]["verified"] == [rule]


@pytest.mark.parametrize(
    ("params", "docs", "refused"),
    [
        (["a", "b"], "echo docs ok", None),
        (
            ["a", "c"],
            "echo docs ok",
            "doc-writer: documented parameters exist: src/calc.py: add: documents 'c', "
            "not a parameter",
        ),
        (["a", "b"], "echo 'undefined label' >&2; exit 1", "doc-writer: docs build clean: docs"),
    ],
    ids=["pass", "unknown-param", "docs-fail"],
)
def test_doc_writer_documents_real_parameters_and_builds_clean_docs(
    sample: Sample, params: list[str], docs: str, refused: str | None
) -> None:
    configure(sample, docs=docs)
    head = sample.head()
    plan = [subtask("T1", role="doc-writer")]
    code = step(sample, plan, [ok("T1", ("src/calc.py", docstring_patch(params)))])
    if refused is None:
        assert code == 0
        (judged,) = named(sample, "phase_completed")
        assert judged["details"]["verified"] == [
            "doc-writer: docs build clean",
            "doc-writer: documented parameters exist",
        ]
        return
    assert code == 1
    failed = halted_on_acceptance(sample, head)
    assert refused in failed["error"]


@pytest.mark.parametrize(
    ("findings", "problem"),
    [
        ({"notes": ["src/calc.py:4 add has no docstring"]}, None),
        ({"risks": ["src/calc.py:4-5 no type hints"]}, None),
        ({"notes": ["src/calc.py:99 off the end"]}, "cites src/calc.py:99 but it has 5 lines"),
        ({"notes": ["tests/test_calc.py:1 imports"]}, "cites tests/test_calc.py:1, not an input"),
        ({"risks": ["the code looks fine"]}, "finding 1: no path:line citation"),
    ],
    ids=["note", "risk-range", "beyond-file", "not-input", "no-citation"],
)
def test_review_without_diffs_must_cite_lines_of_its_inputs(
    sample: Sample, findings: dict[str, list[str]], problem: str | None
) -> None:
    allow_roles(sample, "review")
    configure(sample)
    head = sample.head()
    code = step(sample, [subtask("T1", role="review")], [answer("T1", **findings)])
    if problem is None:
        assert code == 0
        assert completed(sample)["details"]["commit"] is None
        return
    assert code == 1
    failed = halted_on_acceptance(sample, head)
    assert problem in failed["error"]


@pytest.mark.parametrize("cite", ["src/calc.py:4", "src/calc.py:6"])
def test_review_with_diffs_is_judged_by_the_same_rule(sample: Sample, cite: str) -> None:
    allow_roles(sample, "review")
    configure(sample)
    head = sample.head()
    reply = answer("T1", ("src/calc.py", BODY_ONLY), notes=[f"{cite} operands swapped"])
    code = step(sample, [subtask("T1", role="review")], [reply])
    if cite.endswith(":4"):
        assert code == 0
        (judged,) = named(sample, "phase_completed")
        assert judged["details"]["verified"] == [
            "review: public API unchanged",
            "review: findings cite lines of the inputs",
        ]
        return
    assert code == 1
    failed = halted_on_acceptance(sample, head)
    assert "cites src/calc.py:6 but it has 5 lines" in failed["error"]


def deep_build(depth: int) -> str:
    """A build script a change adds: it leaves a chain of folders `depth` deep in the copy."""
    return (
        "i=0; while [ $i -lt DEPTH ]; do mkdir d && cd d || exit 9; i=$((i+1)); done\n"
    ).replace("DEPTH", str(depth))


@pytest.mark.parametrize("depth", [1500, 40], ids=["1500-deep", "40-deep"])
def test_a_build_that_leaves_a_tree_too_deep_to_copy_fails_its_test_and_the_retry_goes_on(
    deep: Path, depth: int
) -> None:
    sample = scripted(deep)
    configure(sample, build="sh src/build.sh", test="test -f src/build.sh")
    script = "src/build.sh"
    first = ok("T1", (script, new_file_patch(script, [deep_build(depth).rstrip()])))
    again = ok("T1", (script, new_file_patch(script, [deep_build(3).rstrip()])))
    plan = [subtask("T1", creates=[script], inputs=[])]
    sample.write_plan(plan)
    sample.write_script([{**first, "retry": False}, {**again, "retry": True}])
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    failed = named(sample, "test_failed")
    if depth > folders.COPY_DEPTH:
        (only,) = failed
        assert "deeper than 512 folders" in only["details"]["uncopied"]
        assert only["error"].startswith("the built tree cannot be copied: d/d/d/...")
        assert named(sample, "subagent_retried")
    else:
        assert failed == [] and not named(sample, "subagent_retried")
    assert sample.names()[-1] == "task_completed"
