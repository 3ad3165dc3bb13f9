"""checks/sequence.py: a change's checks as data in (Work) and out (Verdict). Run anywhere a
git holds its trees and given later, a Verdict says exactly what the checks say when they
run live, at the change's turn, straight into the log and ledger."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.checks import sequence
from harness.checks.suite import Checks
from harness.gate.diffgate import Change
from harness.importers import demo
from harness.record import exchanges
from harness.repository.repo import Repo
from harness.spec import config

from .builders import FAST, sub
from .conftest import new_file_patch
from .test_deferred import EVIDENCE, Heard

CONFIG = b"""
[verify]
build = "test -f src/p1.py"
test = "! grep -rqs MARKER src"
[sandbox]
mode = "off"
"""
PATH = "src/p1.py"


def unboxed(work: Path, home: Path) -> None:
    return None  # [sandbox] mode = "off"


def prepared(where: Path, line: str, accept: bool) -> tuple[Repo, sequence.Work]:
    """The demo's repository and the Work of a change adding PATH holding `line`, with a
    criterion met or not."""
    root = where / "repo"
    if not root.exists():
        root.mkdir(parents=True)
        demo.build(root)
    git = Repo(root)
    patch = new_file_patch(PATH, [line])
    (where / "p.patch").write_text(patch)
    head = git.head()
    tree, problem = git.apply_tree(head, [(PATH, where / "p.patch")], where / "index")
    assert tree is not None, problem
    criterion = f"cmd: test {'-f' if accept else '! -f'} {PATH}"
    subtask = sub("P1", creates=(PATH,), acceptance=(criterion,))
    changes = (Change("add", PATH, None, patch),)
    result = {"diffs": [{"file": PATH, "patch": patch}], "artifacts": [], "notes": []}
    cfg = config.load(Path("harness.toml"), CONFIG)
    return git, sequence.Work(subtask, (), cfg, changes, result, head, tree, False)


def live(work: sequence.Work, git: Repo, scratch: Path) -> tuple[bool, list[Any]]:
    """The checks said as they run, straight into a log and a ledger (as a serial run)."""
    heard = Heard()
    ran = sequence.runner(work.config, scratch / "runs", unboxed)
    checks = Checks(
        heard,
        work.sub.id,
        list(work.logged),
        work.config.verify,
        ran,
        EVIDENCE / exchanges.VERIFY,
        heard,
        lambda name: scratch / name,
        lambda p: git.show(work.tree, p),
    )
    passed = sequence.sequence(
        work, git, checks, heard.phase, ran, lambda name: scratch / name, scratch / "cache"
    )
    return passed, heard.heard


@settings(FAST, max_examples=4)
@given(
    marked=st.booleans(),
    accept=st.booleans(),
    logged=st.sampled_from([(), ("build_succeeded",), ("build_succeeded", "test_passed")]),
)
def test_a_verdict_given_says_what_the_checks_say_live(
    tmp_path: Path, marked: bool, accept: bool, logged: tuple[str, ...]
) -> None:
    git, work = prepared(tmp_path, "NAME = 'MARKER'" if marked else "NAME = 1", accept)
    # What a killed run of the attempt logged already is not said again.
    checks = {"build_succeeded": "build", "test_passed": "test"}
    done = tuple({"event": e, "details": {"check": checks[e]}} for e in logged)
    work = replace(work, logged=done)
    try:
        passed, heard = live(work, git, tmp_path / "live")
        verdict = sequence.run(work, git, unboxed, tmp_path / "ahead", tmp_path / "cache")
    finally:
        git.close()
    given_later = Heard()
    verdict.said.give(given_later, given_later, EVIDENCE, given_later.phase)
    assert verdict.passed == passed == (not marked and accept)
    assert given_later.heard == heard
    events = [h[1] for h in heard if h[0] == "event"]
    assert not set(logged) & set(events)
    assert ("test_failed" in events) == marked
    assert [h[0] for h in heard[:2]] == ["remove", "write"]  # the evidence, emptied and kept
