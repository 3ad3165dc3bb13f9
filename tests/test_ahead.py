"""Checks ahead of their turn (harness/step/ahead.py) are safe: whatever order calls and
checks end in, whatever fails ahead or a person does meanwhile, and wherever a run is
killed, the same trees land in plan order as with one slot, and the record (log, exchanges,
evidence) and commits are those of checking one change at a time (--serial-checks).

The runs are in-process (tests/scripted.py) on real git repositories with a real [verify]
test command: it fails when a file of src/ holds MARKER. An executor wrapping the real one
holds every call's and check's result and hands them back in an order drawn by hypothesis,
and keeps every check it was given and which of them were used, so each test also shows
that runs were made ahead, and that those made on what changed were never used."""

from __future__ import annotations

import os
import random
import subprocess
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base import folders
from harness.base.errors import Halted
from harness.boundary import proc
from harness.checks import sequence
from harness.checks.deferred import Deferred
from harness.checks.sequence import Verdict, Work
from harness.record import progress, tokens
from harness.repository.layout import Layout
from harness.step import (
    answering,
    checking,
    executors,
    gating,
    landing,
    supervising,
    supervision,
)
from harness.step.supervision import CONTINUE
from harness.step.task import Task

from .builders import FAST, git
from .conftest import Sample, new_file_patch, scripted, subtask
from .scripted import CLOCK, Scripted, load, repository, run

MARKER = "MARKER"  # a file of src/ holding it fails the test command
CONFIG = (
    '[identity]\nname = "harness"\nemail = "harness@example.invalid"\n'
    f'[verify]\ntest = "! grep -rqs {MARKER} src"\n'
    # Uncontained: these tests are about order, not the sandbox (it has its own tests).
    '[sandbox]\nmode = "off"\n'
)
IDS = ["P1", "P2", "P3", "P4"]
SLOTS = 3

# What a subtask's first answer does (its second, if asked for, passes): "ok" passes;
# "check" writes MARKER, so its tests fail; "worker" is a retryable failure of the call;
# "reorient" passes its checks but its supervisor says REORIENT: each is retried at once.
# "gate" creates a file its plan does not let it create, "apply" edits src/calc.py with
# context it does not hold: each fails the step, which stops the task (a person resumes it)
# or not, as its on_error says. "loop" is a loop whose second round changes nothing more;
# "human" awaits a person's approval (the task halts; a person approves).
FATES = ("ok", "check", "worker", "reorient", "gate", "apply", "loop", "human")
MODES = ("stop", "continue", "skip_dependents")


def script(fates: dict[str, str], child: dict[str, str] | None) -> dict[str, Any]:
    """The answers of a plan, P3 a plan of its own when `child` gives its subtasks."""
    return answers({k: v for k, v in fates.items() if not child or k != "P3"} | (child or {}))


def result(*diffs: tuple[str, str]) -> dict[str, Any]:
    return {"diffs": [{"file": f, "patch": p} for f, p in diffs], "artifacts": [], "notes": []}


def answers(fates: dict[str, str]) -> dict[str, list[str | dict[str, Any]]]:
    """Each subtask's answers: its fate's first, then a good one if that fails."""
    found: dict[str, list[str | dict[str, Any]]] = {}
    for sid, fate in fates.items():
        path = f"src/{sid.lower()}.py"
        good = result((path, new_file_patch(path, [f"NAME = {sid!r}"])))
        if fate in ("reorient", "loop"):
            other = result((path, new_file_patch(path, ["NAME = 'first'"])))
            found[sid] = (
                [other, verdict("REORIENT"), good, verdict("CONTINUE")]
                if fate == "reorient"
                else [good, result()]
            )
            continue
        first: str | dict[str, Any] = {
            "ok": good,
            "human": good,
            "worker": "retryable",
            "check": result((path, new_file_patch(path, [f"NAME = {MARKER!r}"]))),
            "gate": result(("src/elsewhere.py", new_file_patch("src/elsewhere.py", ["X = 1"]))),
            "apply": result(
                (
                    "src/calc.py",
                    "diff --git a/src/calc.py b/src/calc.py\n--- a/src/calc.py\n"
                    "+++ b/src/calc.py\n@@ -1,1 +1,2 @@\n not what it holds\n+X = 1\n",
                )
            ),
        }[fate]
        found[sid] = [first] if fate in ("ok", "human") else [first, good]
    return found


def verdict(action: str) -> dict[str, Any]:
    """A supervisor's answer."""
    said = {"action": action, "reason": "because", "correction": "again"}
    return {"verdict": said, "notes": [], "diffs": [], "artifacts": []}


def plan(fates: dict[str, str], modes: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """A subtask per fate, each creating a file of its own, supervised or a loop as its
    fate says, with the on_error `modes` say (stop by default); P3 waits for P1."""
    return [
        {
            "on_error": (modes or {}).get(sid, "stop"),
            "supervised": {"reorient": True, "human": "human"}.get(fates[sid], False),
            **({"loop": {"max": 2, "until": "no_diff"}} if fates[sid] == "loop" else {}),
            "id": sid,
            "role": "localized-impl",
            "goal": f"Add {sid}",
            "inputs": ["src/calc.py"],
            "acceptance": [],
            "write_scope": "src/**",
            "creates": [f"src/{sid.lower()}.py"],
            "depends_on": ["P1"] if sid == "P3" else [],
        }
        for sid in fates
    ]


def prepared(
    where: Path,
    fates: dict[str, str],
    modes: dict[str, str] | None = None,
    child: dict[str, str] | None = None,
) -> Path:
    """The demo's repository with the plan, CONFIG and a supervisor; with `child`, P3 is a
    plan of its own (task child) whose subtasks have those fates."""
    top = plan(fates, modes)
    if child:
        top[2] = {"id": "P3", "plan": "child", "depends_on": ["P1"]}
    root = repository(where, top)
    if child:
        doc = {"task_id": "child", "created": CLOCK, "subtasks": plan(child)}
        Layout(root).plan("child").parent.mkdir(parents=True)
        Layout(root).plan("child").write_bytes(orjson.dumps(doc))
    registry = Layout(root).registry
    doc = orjson.loads(registry.read_bytes())
    doc["agents"].append(doc["agents"][0] | {"id": "auditor", "capabilities": ["audit"]})
    registry.write_bytes(orjson.dumps(doc))
    Layout(root).config.write_text(CONFIG)
    return root


class Told(Deferred):
    """What a run of checks said, that says when it is given to the log: the run is used."""

    def __init__(self, said: Deferred, tell: Callable[[], None]) -> None:
        super().__init__(said.said)
        self.tell = tell

    def give(self, *args: Any) -> None:
        self.tell()
        super().give(*args)


@dataclass
class Held:
    inner: Future[Any]
    outer: Future[Any]
    work: Work | None  # None: a call


Pick = Callable[[list[Held]], Held | None]  # the result to hand back now, of those held


@dataclass
class Shuffled:
    """The real executor, whose results are handed back one at a time in an order `pick`
    draws among those that are in: each time nothing new came in for a moment, so that
    several compete. Keeps when each check was given to it and when the step used it."""

    real: executors.Executor
    pick: Pick
    held: list[Held] = field(default_factory=list)
    # ("start", check) and ("use", check), as they happened
    timeline: list[tuple[str, Held]] = field(default_factory=list)
    stopped: bool = False

    def __post_init__(self) -> None:
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self.release, daemon=True)
        self.thread.start()

    def hold(self, inner: Future[Any], work: Work | None) -> Future[Any]:
        held = Held(inner, Future(), work)
        held.outer.add_done_callback(lambda f: f.cancelled() and inner.cancel())
        with self.cond:
            self.held.append(held)
            if work is not None:
                self.timeline.append(("start", held))
        inner.add_done_callback(lambda _: self.wake())
        return held.outer

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def call(self, call: executors.Call) -> Future[proc.Result]:
        return self.hold(self.real.call(call), None)

    def check(self, work: Work, scratch: Path) -> Future[Verdict]:
        return self.hold(self.real.check(work, scratch), work)

    def release(self) -> None:
        while True:
            with self.cond:
                if self.stopped:
                    return
                # Wait till nothing more comes in for a moment: then choose among all in.
                if self.cond.wait(0.02):
                    continue
                chosen = self.pick(self.held)
                if chosen is None:
                    continue
                self.held.remove(chosen)
            hand(chosen, self.timeline)

    def close(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
        self.thread.join()
        self.real.close()
        for held in self.held:
            hand(held, self.timeline)


def hand(held: Held, timeline: list[tuple[str, Held]]) -> None:
    """The real result, given through the future the step holds (unless it cancelled it);
    a check's verdict adds ("use", held) to `timeline` when the step gives what it said."""
    if held.outer.cancelled():
        return
    error = held.inner.exception() if not held.inner.cancelled() else None
    if error is not None:
        held.outer.set_exception(error)
    elif held.inner.cancelled():
        held.outer.cancel()
    elif held.work is None:
        held.outer.set_result(held.inner.result())
    else:
        verdict = held.inner.result()
        told = Told(verdict.said, lambda: timeline.append(("use", held)))
        held.outer.set_result(Verdict(verdict.passed, told))


def random_pick(seed: int) -> Pick:
    """Any result that is in."""
    rng = random.Random(seed)

    def pick(held: list[Held]) -> Held | None:
        ready = [h for h in held if h.inner.done()]
        return ready[rng.randrange(len(ready))] if ready else None

    return pick


def calls_first(seed: int) -> Pick:
    """Every answer handed back before any check's verdict (so checks run ahead), the
    verdicts in a random order."""
    rng = random.Random(seed)

    def pick(held: list[Held]) -> Held | None:
        calls = [h for h in held if h.work is None]
        if calls:
            return calls[0] if calls[0].inner.done() else None
        ready = [h for h in held if h.inner.done()]
        return ready[rng.randrange(len(ready))] if ready else None

    return pick


@dataclass
class Outcome:
    record: dict[str, bytes]  # every file of ai/: the log, exchanges, evidence, checklist
    commits: list[str]  # the subtasks' commits, in the order they landed
    trees: list[str]
    checked: list[tuple[Any, ...]]  # the checks whose verdicts were used, in order
    given: list[tuple[Any, ...]]  # every check an executor was given
    ahead: list[str]  # whose checks used had started while another change was checked
    used: list[int]  # which of `given` were used, in order


def key(root: Path, work: Work) -> tuple[Any, ...]:
    """What a check ran on, its head a tree (the step names it by commit, runs ahead by
    tree)."""
    head = git(root, "rev-parse", f"{work.head}^{{tree}}")
    return (work.sub.id, head, work.tree, work.changes, work.logged)


def landed(root: Path) -> tuple[list[str], list[str]]:
    found = git(root, "log", "--reverse", "--format=%H %T", "--grep=^Harness-Subtask:")
    pairs = [line.split() for line in found.splitlines()]
    return [c for c, _ in pairs], [t for _, t in pairs]


@contextmanager
def shuffled(pick: Pick) -> Iterator[list[Shuffled]]:
    """Every run made inside uses a Shuffled executor with `pick`; they are listed."""
    made: list[Shuffled] = []
    real = executors.make

    def make(task: Task, slots: int, name: str = "local") -> executors.Executor:
        made.append(Shuffled(real(task, slots, name), pick))
        return made[-1]

    with mock.patch.object(executors, "make", make):
        yield made


def record(root: Path) -> dict[str, bytes]:
    """Every file of ai/: the record."""
    ai = Layout(root).ai
    return {p.relative_to(ai).as_posix(): p.read_bytes() for p in ai.rglob("*") if p.is_file()}


def outcome(root: Path, checked: list[Work], given: list[Work], ahead: list[str]) -> Outcome:
    commits, trees = landed(root)
    return Outcome(
        record(root),
        commits,
        trees,
        [key(root, w) for w in checked],
        [key(root, w) for w in given],
        ahead,
        [next(i for i, g in enumerate(given) if g is w) for w in checked],
    )


def finished(root: Path, worker: Scripted, slots: int, ahead: bool = True) -> None:
    """The task run to its end, resuming each blocker and approving each change that
    awaits approval, as a person would."""
    while True:
        try:
            run(root, worker, resumes=4, slots=slots, ahead=ahead)
            return
        except Halted:
            task = load(root, worker)
            try:
                awaiting = [s.id for s in task.plan.subtasks if task.model.attempt(s.id).awaiting]
                if not awaiting:
                    raise
                for sid in awaiting:
                    supervising.decide(task, sid, supervision.Verdict(CONTINUE, "ok", ""), "p")
            finally:
                task.git.close()


def serial(
    where: Path,
    fates: dict[str, str],
    slots: int,
    modes: dict[str, str] | None = None,
    worker: Scripted | None = None,
    child: dict[str, str] | None = None,
) -> Outcome:
    """A run that checks each change only at its turn; the checks it ran, in order; each
    answer asked for once, unless the test brings its own `worker`."""
    root = prepared(where, fates, modes, child)
    ran: list[Work] = []
    real = sequence.run

    def recorded(work: Work, *rest: Any) -> Verdict:
        ran.append(work)
        return real(work, *rest)

    # A run halted (for a person's approval) with calls in flight makes them again.
    mine = worker or Scripted(script(fates, child), again=True)
    with mock.patch.object(checking, "run", recorded):
        finished(root, mine, slots, ahead=False)
    if worker is None:
        mine.assert_used()
    return outcome(root, ran, ran, [])


def ahead(
    where: Path,
    fates: dict[str, str],
    pick: Pick,
    modes: dict[str, str] | None = None,
    worker: Scripted | None = None,
    child: dict[str, str] | None = None,
) -> Outcome:
    """A run with SLOTS slots checking ahead, its results handed back as `pick` says; each
    answer asked for once, unless the test brings its own `worker`."""
    root = prepared(where, fates, modes, child)
    mine = worker or Scripted(script(fates, child), again=True)
    with shuffled(pick) as made:
        finished(root, mine, SLOTS)
    if worker is None:
        mine.assert_used()
    timeline = [e for ex in made for e in ex.timeline]
    used = [h for kind, h in timeline if kind == "use"]
    given = [h for kind, h in timeline if kind == "start"]
    works = [h.work for h in used if h.work is not None]
    return outcome(root, works, [h.work for h in given if h.work is not None], early(timeline))


def early(timeline: list[tuple[str, Held]]) -> list[str]:
    """Whose runs used were made ahead: another's verdict was used between their start and
    their use."""
    made, started = [], {}
    for i, (kind, held) in enumerate(timeline):
        if kind == "start":
            started[id(held)] = i
        elif any(k == "use" for k, _ in timeline[started[id(held)] : i]):
            assert held.work is not None
            made.append(held.work.sub.id)
    return made


@contextmanager
def when(point: str, nth: int, do: Callable[[], None]) -> Iterator[None]:
    """`do` the `nth` time the step passes `point` (the fault points of progress.fault that
    tests/test_crash.py kills the CLI at)."""
    seen = [0]

    def fault(at: str) -> None:
        if at == point:
            seen[0] += 1
            if seen[0] == nth:
                do()

    with ExitStack() as stack:
        for module in (progress, answering, landing):
            stack.enter_context(mock.patch.object(module, "fault", fault))
        yield


def person_commits(root: Path) -> Callable[[], None]:
    """A person's commit on the branch, the same in every run."""

    def commit() -> None:
        (root / "README.md").write_text("# calc, by a person\n")
        env = {**os.environ, "GIT_AUTHOR_DATE": CLOCK, "GIT_COMMITTER_DATE": CLOCK}
        subprocess.run(
            ["git", "-c", "user.name=p", "-c", "user.email=p@p", "commit", "-qam", "mine"],
            cwd=root,
            env=env,
            check=True,
        )

    return commit


def person_revokes(root: Path) -> Callable[[], None]:
    """A person revokes the write token the calls were made with, and issues another."""

    def revoke() -> None:
        path = Layout(root).tokens
        tokens.revoke(path, root, "W1")
        tokens.issue(path, root, ["src/**"], "1d", False, CLOCK)

    return revoke


def built_on(out: Outcome, tree: str) -> list[tuple[Any, ...]]:
    return [g for g in out.given if g[1] == tree]


@pytest.fixture(scope="module")
def one_slot(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    return serial(tmp_path_factory.mktemp("one"), dict.fromkeys(IDS, "ok"), 1)


@pytest.mark.parametrize("meanwhile", ["commit", "revoke"])
def test_a_check_failing_ahead_or_a_persons_act_discards_the_runs_built_before(
    tmp_path: Path, meanwhile: str
) -> None:
    fates = {"P1": "check", "P2": "ok", "P3": "ok", "P4": "ok"}
    act = {"commit": person_commits, "revoke": person_revokes}[meanwhile]
    outcomes = []
    for name in ("serial", "ahead"):
        # A person acts once P1 has landed, while P2's checks run ahead: a commit on the
        # branch, or the calls' token revoked (P2's gate refuses it at its turn, the task
        # halts, and P2 is called again once resumed).
        # Subtasks refused for the token are called again: they answer again.
        worker = Scripted({sid: q * 2 for sid, q in answers(fates).items()}, again=True)
        with when("after:step_completed", 1, act(tmp_path / name / "repo")):
            if name == "serial":
                outcomes.append(serial(tmp_path / name, fates, SLOTS, worker=worker))
            else:
                outcomes.append(ahead(tmp_path / name, fates, calls_first(0), worker=worker))
    base, out = outcomes
    assert (out.record, out.commits, out.trees) == (base.record, base.commits, base.trees)
    assert out.checked == base.checked
    log = out.record["tasks/demo/progress.ndjson"]
    assert (b"token W1 is revoked" in log) == (meanwhile == "revoke")
    bad = next(g[2] for g in out.given if g[0] == "P1" and MARKER in str(g[3]))
    stale = built_on(out, bad)
    assert [g[0] for g in stale] == ["P2"]  # made ahead on P1's failing change...
    assert not set(stale) & set(out.checked)  # ... and never used
    good = next(g[2] for g in out.checked if g[0] == "P1")
    before = [i for i, g in enumerate(out.given) if g[0] == "P2" and g[1] == good]
    assert before  # P2's checks ran ahead on P1's change before the person acted...
    assert not set(before[:1]) & set(out.used)  # ... and that run was never used
    assert out.ahead  # while runs made ahead after it were


def test_a_plan_nested_in_the_plan_checks_ahead_and_records_what_serial_checks_do(
    tmp_path: Path,
) -> None:
    fates, child = {"P1": "check", "P2": "ok", "P3": "ok", "P4": "ok"}, {"C1": "ok", "C2": "check"}
    base = serial(tmp_path / "serial", fates, SLOTS, child=child)
    out = ahead(tmp_path / "ahead", fates, calls_first(0), child=child)
    assert (out.record, out.commits, out.trees) == (base.record, base.commits, base.trees)
    assert "tasks/child/progress.ndjson" in out.record
    assert out.checked == base.checked
    assert {"P2", "C2"} <= set(out.ahead)  # in the plan, and in the plan it runs


def test_a_change_retried_after_its_checks_failed_lands_in_plan_order_with_two_slots(
    tmp_path: Path, one_slot: Outcome
) -> None:
    # P3, launched in P2's slot while P2 was checked, is taken before P2's retry answers;
    # it lands after P2 all the same, as with one slot.
    two = serial(tmp_path, {"P1": "ok", "P2": "check", "P3": "ok", "P4": "ok"}, 2)
    assert two.trees == one_slot.trees


@settings(FAST, max_examples=3)
@given(
    fates=st.lists(st.sampled_from(FATES), min_size=len(IDS), max_size=len(IDS)),
    on_error=st.lists(st.sampled_from(MODES), min_size=len(IDS), max_size=len(IDS)),
    seed=st.integers(0, 2**16),
)
def test_whatever_ends_first_and_fails_ahead_the_log_and_commits_are_checking_one_at_a_time(
    tmp_path: Path, one_slot: Outcome, fates: list[str], on_error: list[str], seed: int
) -> None:
    drawn, modes = dict(zip(IDS, fates, strict=True)), dict(zip(IDS, on_error, strict=True))
    base = serial(tmp_path / "serial", drawn, SLOTS, modes)
    # No step failed: all land in plan order (with four subtasks and three slots, a retry
    # always finds a slot: see the test above for two).
    if not {"gate", "apply"} & set(fates):
        assert base.trees == one_slot.trees
    for name, pick in (("first", calls_first(seed)), ("random", random_pick(seed))):
        out = ahead(tmp_path / name, drawn, pick, modes)
        assert (out.record, out.commits, out.trees) == (base.record, base.commits, base.trees)
        # Every verdict used came from a run on exactly the tree its change landed on.
        assert out.checked == base.checked
        if name == "first" and drawn["P1"] == "ok" and drawn["P2"] in ("ok", "check"):
            assert "P2" in out.ahead  # P2's checks ran while P1's did


# -- killed while runs ahead are under way ------------------------------------------------------


class Killed(BaseException):
    """A kill, as far as the in-process step can have one: nothing of the step handles it."""


def kill() -> None:
    raise Killed


@settings(FAST, max_examples=3)
@given(
    point=st.sampled_from(
        [
            "after:test_passed",
            "before:advance",
            "after:subagent_diffs_applied",
            "after:step_completed",
        ]
    ),
    nth=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_a_run_killed_while_checks_run_ahead_is_finished_as_if_never_killed(
    tmp_path: Path, point: str, nth: int, seed: int
) -> None:
    fates = dict.fromkeys(IDS, "ok")
    base = prepared(tmp_path / "whole", fates)
    run(base, Scripted(answers(fates)), slots=SLOTS)
    root = prepared(tmp_path / "killed", fates)
    worker = Scripted(answers(fates), again=True)  # a call in flight at the kill is made again
    with shuffled(calls_first(seed)) as made, when(point, nth, kill), pytest.raises(Killed):
        run(root, worker, slots=SLOTS)
    timeline = made[0].timeline
    under_way = {id(h) for k, h in timeline if k == "start"} - {
        id(h) for k, h in timeline if k == "use"
    }
    assert under_way  # runs ahead had started and were not used yet
    run(root, worker, slots=SLOTS)
    assert record(root) == record(base)  # the log's bytes too: nothing of a run discarded
    assert landed(root) == landed(base)


@pytest.mark.e2e
def test_harness_run_killed_while_checks_run_ahead_finishes_as_if_never_killed(
    tmp_path: Path,
) -> None:
    """The same, for real: `harness run` killed -9 (HARNESS_FAULT) once the first change's
    tests passed, while the checks of those behind it run ahead, sandboxed; and `replay`
    of the record rebuilds its commits."""
    ids = IDS[:2]

    def sample() -> Sample:
        """The same sample each time, in the same folder: the record names its paths."""
        folders.remove(tmp_path / "s")
        (tmp_path / "s").mkdir()
        s = scripted(tmp_path / "s")
        s.set_config(
            '[identity]\nname = "harness"\nemail = "harness@example.invalid"\n'
            f'[verify]\ntest = "sleep 0.3; ! grep -rqs {MARKER} src"\n'
        )
        script = answers(dict.fromkeys(ids, "ok"))
        s.write_plan([p for p in plan(dict.fromkeys(IDS, "ok")) if p["id"] in ids])
        s.write_script([{"subtask": sid, "result": q[0]} for sid, q in script.items()])
        return s

    s = sample()
    assert s.cli("run", "demo", "--max-parallel", "3").returncode == 0
    whole = record(s.root), landed(s.root)
    s = sample()
    res = s.cli("run", "demo", "--max-parallel", "3", env={"HARNESS_FAULT": "after:test_passed"})
    assert res.returncode == -9, res.stderr
    assert s.names().count("test_passed") == 1
    ahead = Layout(s.root).state / "tasks/demo/ahead"
    assert len(list(ahead.iterdir())) >= 2  # its own run and at least one behind it
    res = s.cli("run", "demo", "--max-parallel", "3")
    assert res.returncode == 0, res.stderr
    assert (record(s.root), landed(s.root)) == whole
    replayed = s.cli("replay", "demo")  # the record rebuilds the same commits
    assert replayed.returncode == 0, replayed.stderr
    assert all(c in replayed.stdout for c in whole[1][0])


def test_with_no_check_that_runs_a_command_nothing_is_gated_ahead(tmp_path: Path) -> None:
    """Checks that run no command end as they start: every answer is gated once, at its
    turn, and the record is the one checking one change at a time writes."""
    ids = ("P1", "P2", "P3")
    subtasks = [subtask(sid, creates=[f"src/made_{sid.lower()}_1.py"]) for sid in ids]
    gated: list[str] = []
    real = gating.gate

    def gate(job: Any, *rest: Any) -> Any:
        gated.append(job.sub.id)
        return real(job, *rest)

    records = []
    for name, ahead_on in (("ahead", True), ("serial", False)):
        root = repository(tmp_path / name, subtasks)
        # P1 answers last: the answers behind it are in when it is taken.
        worker = Scripted({sid: ["diff"] for sid in ids}, {"P1": 0.3})
        gated.clear()
        with (
            mock.patch.object(gating, "ahead", side_effect=AssertionError("gated ahead")),
            mock.patch.object(gating, "gate", side_effect=gate),
        ):
            assert run(root, worker, slots=3, ahead=ahead_on) == list(ids)
        assert gated == list(ids)
        records.append(record(root))
    assert records[0] == records[1]
