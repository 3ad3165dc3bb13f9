"""The pure parts: plan order, glob cover, the worker verdict, call_id, the log chain,
state queries and token choice."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from harness import envelope, scope, state, tokens, worker
from harness.clock import SteppingClock
from harness.errors import InvalidInput
from harness.plan import Plan, Subtask, find_cycle, order, structure_problem
from harness.progress import GENESIS, Log, line_hash
from harness.workers import shim

FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# -- plan ------------------------------------------------------------------------------------


def sub(sid: str, *deps: str, **fields: Any) -> Subtask:
    base: dict[str, Any] = {
        "id": sid,
        "role": "localized-impl",
        "goal": f"Goal of {sid}",
        "inputs": ("src/calc.py",),
        "acceptance": (),
        "write_scope": ("src/**",),
        "depends_on": tuple(deps),
        "creates": (),
        "agent": None,
        "token": None,
        "allow_new_deps": False,
        "allow_mode_change": False,
        "allow_api_change": False,
    }
    return Subtask(**(base | fields))


def plan_of(*subtasks: Subtask) -> Plan:
    return Plan("demo", "2026-01-01T00:00:00Z", tuple(subtasks))


@st.composite
def dags(draw: st.DrawFn) -> Plan:
    """Ids created in order, each depending only on earlier ones; then the file order shuffled."""
    n = draw(st.integers(1, 9))
    ids = [f"T{i}" for i in range(n)]
    made = []
    for i, sid in enumerate(ids):
        deps = draw(st.lists(st.sampled_from(ids[:i]), unique=True)) if i else []
        made.append(sub(sid, *deps))
    return plan_of(*draw(st.permutations(made)))


@FAST
@given(dags())
def test_order_respects_every_edge_and_file_order_among_ready(plan: Plan) -> None:
    result = order(plan)
    ids = [s.id for s in result]
    assert sorted(ids) == sorted(s.id for s in plan.subtasks) and len(set(ids)) == len(ids)
    pos = {sid: i for i, sid in enumerate(ids)}
    for s in plan.subtasks:
        for dep in s.depends_on:
            assert pos[dep] < pos[s.id], f"{s.id} runs before its dependency {dep}"
    file_pos = {s.id: i for i, s in enumerate(plan.subtasks)}
    for k, chosen in enumerate(result):
        done = set(ids[:k])
        for later in result[k + 1 :]:
            ready = all(d in done for d in later.depends_on)
            # a subtask ready at step k that sits earlier in the file must have been chosen
            assert not (ready and file_pos[later.id] < file_pos[chosen.id])
    assert find_cycle(plan) == []
    assert structure_problem(plan) is None


def test_order_hand_example_ties_go_to_file_order() -> None:
    plan = plan_of(sub("T2", "T1"), sub("T4"), sub("T1"), sub("T3", "T4"))
    assert [s.id for s in order(plan)] == ["T4", "T1", "T2", "T3"]
    plan = plan_of(sub("B"), sub("A"), sub("C", "A", "B"))
    assert [s.id for s in order(plan)] == ["B", "A", "C"]


@st.composite
def graphs_with_a_cycle(draw: st.DrawFn) -> Plan:
    n = draw(st.integers(1, 8))
    ids = [f"T{i}" for i in range(n)]
    deps: dict[str, set[str]] = {
        sid: set(draw(st.lists(st.sampled_from(ids), max_size=3))) for sid in ids
    }
    ring = draw(st.lists(st.sampled_from(ids), min_size=1, max_size=n, unique=True))
    for a, b in zip(ring, [*ring[1:], ring[0]], strict=True):
        deps[a].add(b)  # a depends on b, around the ring back to its start
    made = [sub(sid, *sorted(deps[sid])) for sid in ids]
    return plan_of(*draw(st.permutations(made)))


@FAST
@given(graphs_with_a_cycle())
def test_find_cycle_returns_a_closed_path_of_real_edges(plan: Plan) -> None:
    cycle = find_cycle(plan)
    assert len(cycle) >= 2 and cycle[0] == cycle[-1]
    deps = {s.id: s.depends_on for s in plan.subtasks}
    for a, b in itertools.pairwise(cycle):
        assert b in deps[a], f"{a} -> {b} is not an edge"
    assert len(set(cycle[:-1])) == len(cycle) - 1  # a simple cycle
    assert structure_problem(plan) == "dependency cycle: " + " -> ".join(cycle)


def test_find_cycle_hand_cases() -> None:
    assert find_cycle(plan_of(sub("T1", "T1"))) == ["T1", "T1"]
    assert find_cycle(plan_of(sub("T1", "T2"), sub("T2", "T1"))) == ["T1", "T2", "T1"]
    assert find_cycle(plan_of(sub("T1"), sub("T2", "T1"))) == []


@pytest.mark.parametrize(
    ("subtasks", "problem"),
    [
        ([sub("T1"), sub("T2"), sub("T1")], "duplicate subtask id 'T1'"),
        ([sub("T1"), sub("T2", "T9")], "subtask T2 depends on unknown subtask 'T9'"),
        ([sub("T1", "T2"), sub("T2", "T1")], "dependency cycle: T1 -> T2 -> T1"),
        ([sub("T1"), sub("T2", "T1")], None),
    ],
)
def test_structure_problem(subtasks: list[Subtask], problem: str | None) -> None:
    assert structure_problem(plan_of(*subtasks)) == problem


# -- scope -----------------------------------------------------------------------------------

SEGMENTS = ["src", "a", "*", "**", "*.py"]
GLOBS = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4).map("/".join)
NAMES = st.sampled_from(["src", "a", "b", "x.py", ".hidden", "m.py.txt"])


@st.composite
def instance(draw: st.DrawFn, glob: str) -> str:
    """A concrete path matched by `glob`, wildcards filled in at random."""
    parts: list[str] = []
    for seg in glob.split("/"):
        if seg == "**":
            parts += draw(st.lists(NAMES, max_size=3))
        elif seg == "*":
            parts.append(draw(NAMES))
        elif seg == "*.py":
            parts.append(draw(st.sampled_from(["", "x", "a.b", ".t"])) + ".py")
        else:
            parts.append(seg)
    return "/".join(parts)


@st.composite
def narrower(draw: st.DrawFn, outer: str) -> str:
    """A glob that is often, but not always, covered by `outer`."""
    parts: list[str] = []
    for seg in outer.split("/"):
        if seg == "**":
            parts += draw(st.lists(st.sampled_from(SEGMENTS), max_size=2))
        elif seg == "*":
            parts.append(draw(st.sampled_from(["*", "src", "a", "*.py", "x.py"])))
        elif seg == "*.py":
            parts.append(draw(st.sampled_from(["*.py", "x.py", "x.pyc"])))
        else:
            parts.append(seg)
    return "/".join(parts)


@FAST
@given(GLOBS, st.data())
def test_covers_is_sound(outer: str, data: st.DataObject) -> None:
    inner = data.draw(st.one_of(GLOBS, narrower(outer)), label="inner")
    assume(inner and scope.covers(outer, inner))
    for _ in range(5):
        path = data.draw(instance(inner), label="path")
        if path and scope.matches(path, [inner]):
            assert scope.matches(path, [outer]), f"{outer} covers {inner} but not {path}"


@pytest.mark.parametrize(
    ("outer", "inner", "expected"),
    [
        ("src/**", "src/**", True),
        ("src/**", "src/a/*.py", True),
        ("**", "src/*.py", True),
        ("src/*", "src/calc.py", True),
        ("src/*.py", "src/calc.py", True),
        ("src/**", "tests/**", False),
        ("src/*", "src/**", False),  # * is one segment, ** any depth
        ("src/*", "src/a/b.py", False),
        ("src/*.py", "src/*", False),
        ("src/a", "src/*", False),
        ("src/**", "src", False),  # src/** matches nothing named exactly src
    ],
)
def test_covers_hand_cases(outer: str, inner: str, expected: bool) -> None:
    assert scope.covers(outer, inner) is expected


@pytest.mark.parametrize(
    ("path", "globs", "expected"),
    [
        ("src/calc.py", ["src/**"], True),
        ("src/a/b/c.py", ["src/**"], True),
        ("src/a/b.py", ["src/*"], False),
        ("src/.env", ["src/*"], True),
        ("docs/x.md", ["src/**", "docs/*.md"], True),
        ("src/calc.py", [], False),
    ],
)
def test_matches_hand_cases(path: str, globs: list[str], expected: bool) -> None:
    assert scope.matches(path, globs) is expected


# -- worker.judge ----------------------------------------------------------------------------

LIMITS = (2000, 100)


def answer(**fields: Any) -> dict[str, Any]:
    base = {
        "ts": "2026-01-01T00:00:00Z",
        "task_id": "demo",
        "agent_id": "scripted",
        "status": "ok",
        "result": {"diffs": [], "notes": []},
    }
    return {k: v for k, v in (base | fields).items() if v is not ...}


def line(doc: object) -> bytes:
    return orjson.dumps(doc) + b"\n"


ERROR_R = answer(status="error", result=..., error={"message": "later", "kind": "retryable"})
ERROR_H = answer(status="error", result=..., error={"message": "never", "kind": "hard"})
TWO_ARTIFACTS = answer(
    result={"artifacts": [{"name": "a.md", "content": "1"}, {"name": "a.md", "content": "2"}]}
)


@pytest.mark.parametrize(
    ("stdout", "code", "timed_out", "status", "kind"),
    [
        pytest.param(line(answer()), 0, None, "ok", None, id="ok-exit0"),
        pytest.param(orjson.dumps(answer()), 0, None, "ok", None, id="ok-no-newline"),
        pytest.param(line(answer()), 1, None, "error", "format", id="ok-exit1"),
        pytest.param(line(ERROR_R), 1, None, "error", "retryable", id="retryable-exit1"),
        pytest.param(line(ERROR_R), 2, None, "error", "format", id="retryable-exit2"),
        pytest.param(line(ERROR_H), 2, None, "error", "hard", id="hard-exit2"),
        pytest.param(line(ERROR_H), 1, None, "error", "format", id="hard-exit1"),
        pytest.param(line(ERROR_H), 0, None, "error", "format", id="hard-exit0"),
        pytest.param(line(answer()) * 2, 0, None, "error", "format", id="two-lines"),
        pytest.param(line(answer()) + b"\n", 0, None, "error", "format", id="two-newlines"),
        pytest.param(b"", 0, None, "error", "format", id="empty"),
        pytest.param(b"{not json\n", 0, None, "error", "format", id="invalid-json"),
        pytest.param(line(answer(result=...)), 0, None, "error", "format", id="ok-no-result"),
        pytest.param(
            line(answer(error={"message": "m", "kind": "hard"})),
            0,
            None,
            "error",
            "format",
            id="ok-with-error",
        ),
        pytest.param(
            line(answer(status="error", result=...)),
            1,
            None,
            "error",
            "format",
            id="error-without-error",
        ),
        pytest.param(line(answer(task_id="other")), 0, None, "error", "format", id="task-id"),
        pytest.param(line(answer(agent_id="other")), 0, None, "error", "format", id="agent-id"),
        pytest.param(line(answer(extra=1)), 0, None, "error", "format", id="extra-field"),
        pytest.param(
            line(answer(result={"notes": ["x" * 3000]})), 0, None, "error", "format", id="oversize"
        ),
        pytest.param(
            line(answer(result={"artifacts": [{"name": "a.md", "content": "x" * 101}]})),
            0,
            None,
            "error",
            "format",
            id="artifact-oversize",
        ),
        pytest.param(
            line(answer(result={"artifacts": [{"name": "a.md", "content": "x" * 100}]})),
            0,
            None,
            "ok",
            None,
            id="artifact-at-limit",
        ),
        pytest.param(line(TWO_ARTIFACTS), 0, None, "error", "format", id="duplicate-artifacts"),
        pytest.param(
            line(answer(result={"artifacts": [{"name": "../x", "content": "1"}]})),
            0,
            None,
            "error",
            "format",
            id="artifact-path-name",
        ),
        pytest.param(line(answer()), -9, "hard", "error", "timeout", id="timed-out"),
        pytest.param(b"", -15, "soft", "error", "timeout", id="timed-out-silent"),
    ],
)
def test_judge(
    stdout: bytes, code: int, timed_out: str | None, status: str, kind: str | None
) -> None:
    outcome = worker.judge(stdout, code, timed_out, "demo", "scripted", LIMITS)
    assert (outcome.status, outcome.kind) == (status, kind), outcome.message
    if status == "ok":
        assert outcome.result == orjson.loads(stdout)["result"]
    else:
        assert outcome.message


# -- envelope.call_id ------------------------------------------------------------------------

HASHES = {"src/a.py": "a" * 64, "src/b.py": "b" * 64}
BLOBS = [{"name": "T0/notes.md", "text": "hello"}]
CONS = list(envelope.DEFAULT_CONSTRAINTS)


def cid(sub_: Subtask | None = None, **kw: Any) -> str:
    args: dict[str, Any] = {
        "task_id": "demo",
        "sub": sub_ or sub("T1"),
        "constraint_list": CONS,
        "write_scope": "token:W1",
        "input_hashes": HASHES,
        "blobs": BLOBS,
        "epoch": 0,
    }
    return envelope.call_id(**(args | kw))


def test_call_id_is_stable_and_ignores_dict_order() -> None:
    first = cid()
    assert len(first) == 64 and all(c in "0123456789abcdef" for c in first)
    assert cid() == first
    assert cid(input_hashes=dict(reversed(HASHES.items()))) == first
    assert cid(sub_=sub("T1", inputs=("x",), acceptance=("y",))) == first  # not part of it


@pytest.mark.parametrize(
    "change",
    [
        {"sub_": sub("T1", goal="Another goal")},
        {"sub_": sub("T1", role="doc-writer")},
        {"sub_": sub("T9")},
        {"sub_": sub("T1", write_scope=("src/a/**",))},
        {"task_id": "other"},
        {"constraint_list": [*CONS, envelope.RETRY_CONSTRAINT]},
        {"constraint_list": CONS[:1]},
        {"write_scope": "none"},
        {"write_scope": "token:W2"},
        {"input_hashes": {**HASHES, "src/a.py": "c" * 64}},
        {"input_hashes": {"src/a.py": "a" * 64}},
        {"blobs": [{"name": "T0/notes.md", "text": "hello!"}]},
        {"blobs": [{"name": "T0/other.md", "text": "hello"}]},
        {"blobs": []},
        {"epoch": 1},
    ],
    ids=lambda change: next(iter(change)) + ":" + repr(next(iter(change.values())))[:30],
)
def test_call_id_changes_with_what_shapes_the_answer(change: dict[str, Any]) -> None:
    assert cid(**change) != cid()


# -- progress.Log ----------------------------------------------------------------------------

N_EVENTS = 5


def fresh_log(path: Path) -> list[str]:
    """Append N events; return the head after each append."""
    log = Log(path, "demo", SteppingClock("2026-01-01T00:00:00Z"))
    heads = []
    log.append("task_started", "ok", details={"subtasks": 2})
    heads.append(log.head)
    for i in range(N_EVENTS - 1):
        log.append("subagent_invoked", "pending", step=f"T{i}", details={"call_id": "c" * 64})
        heads.append(log.head)
    return heads


def read(path: Path) -> Log:
    return Log(path, "demo", SteppingClock("2026-01-01T00:00:00Z"))


def test_log_appends_form_a_chain_that_rereads(tmp_path: Path) -> None:
    path = tmp_path / "progress.ndjson"
    heads = fresh_log(path)
    log = read(path)
    assert [ev["seq"] for ev in log.events] == list(range(N_EVENTS))
    assert log.head == heads[-1]
    lines = path.read_bytes().splitlines()
    assert [ev["prev"] for ev in log.events] == [GENESIS, *(line_hash(x) for x in lines[:-1])]
    assert read(tmp_path / "absent.ndjson").events == []


@pytest.fixture(scope="module")
def log_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("log") / "progress.ndjson"
    fresh_log(path)
    return path.read_bytes()


@FAST
@given(st.data())
def test_flipping_any_byte_is_detected(
    tmp_path: Path, log_bytes: bytes, data: st.DataObject
) -> None:
    last_start = log_bytes.rstrip(b"\n").rfind(b"\n") + 1
    pos = data.draw(st.integers(0, len(log_bytes) - 1), label="pos")
    mask = data.draw(st.integers(1, 255), label="mask")
    bad = bytearray(log_bytes)
    bad[pos] ^= mask
    path = tmp_path / "flipped.ndjson"
    path.write_bytes(bytes(bad))
    if pos < last_start or pos == len(log_bytes) - 1:
        with pytest.raises(InvalidInput):
            read(path)
        return
    # A change inside the last line can leave a valid line (a digit of ts, a letter of a
    # name): the chain alone cannot see it, but the head moves, so a stored head differs.
    try:
        log = read(path)
    except InvalidInput:
        return
    assert log.head != line_hash(log_bytes.splitlines()[-1])


@pytest.mark.parametrize("victim", range(N_EVENTS - 1))
def test_deleting_a_line_is_detected(tmp_path: Path, log_bytes: bytes, victim: int) -> None:
    lines = log_bytes.splitlines(keepends=True)
    del lines[victim]
    path = tmp_path / "p.ndjson"
    path.write_bytes(b"".join(lines))
    with pytest.raises(InvalidInput, match="chain broken"):
        read(path)


@pytest.mark.parametrize(("i", "j"), [(0, 1), (1, 3), (3, 4), (0, 4)])
def test_swapping_two_lines_is_detected(tmp_path: Path, log_bytes: bytes, i: int, j: int) -> None:
    lines = log_bytes.splitlines(keepends=True)
    lines[i], lines[j] = lines[j], lines[i]
    path = tmp_path / "p.ndjson"
    path.write_bytes(b"".join(lines))
    with pytest.raises(InvalidInput):
        read(path)


def test_truncated_last_line_is_detected(tmp_path: Path, log_bytes: bytes) -> None:
    path = tmp_path / "p.ndjson"
    for cut in (1, 10, len(log_bytes.splitlines()[-1])):
        path.write_bytes(log_bytes[:-cut])
        with pytest.raises(InvalidInput, match="incomplete"):
            read(path)
    path.write_bytes(log_bytes)
    assert len(read(path).events) == N_EVENTS  # the twin: the whole file reads


def test_dropping_whole_trailing_lines_moves_the_head(tmp_path: Path, log_bytes: bytes) -> None:
    # Not visible to the chain alone: the Harness-Log-Head trailer is what catches it.
    heads = fresh_log(tmp_path / "again.ndjson")
    lines = log_bytes.splitlines(keepends=True)
    path = tmp_path / "p.ndjson"
    for keep in range(1, N_EVENTS):
        path.write_bytes(b"".join(lines[:keep]))
        log = read(path)
        assert len(log.events) == keep
        assert log.head == heads[keep - 1] != heads[-1]


def test_foreign_task_or_non_canonical_line_is_refused(tmp_path: Path, log_bytes: bytes) -> None:
    path = tmp_path / "p.ndjson"
    path.write_bytes(log_bytes)
    with pytest.raises(InvalidInput, match="not a line harness wrote"):
        Log(path, "other", SteppingClock("2026-01-01T00:00:00Z"))
    first = orjson.loads(log_bytes.splitlines()[0])
    path.write_bytes(orjson.dumps(first, option=orjson.OPT_INDENT_2).replace(b"\n", b" ") + b"\n")
    with pytest.raises(InvalidInput, match="not a line harness wrote"):
        read(path)


# -- state -----------------------------------------------------------------------------------


def ev(event: str, step: str | None = None, **details: Any) -> dict[str, Any]:
    made: dict[str, Any] = {"event": event}
    if step is not None:
        made["step"] = step
    if details:
        made["details"] = details
    return made


def test_blocker_and_epoch() -> None:
    events = [ev("task_started"), ev("blocker_encountered", "T1")]
    assert state.blocker(events) is events[-1] and state.epoch(events) == 0
    events.append(ev("blocker_resolved", "T1"))
    assert state.blocker(events) is None and state.epoch(events) == 1
    events.append(ev("blocker_encountered", "T2"))
    assert state.blocker(events) is events[-1]
    events.append(ev("blocker_resolved", "T2"))
    assert state.blocker(events) is None and state.epoch(events) == 2
    assert state.blocker([]) is None and state.epoch([]) == 0


def test_current_is_the_steps_events_since_the_last_resolve() -> None:
    events = [
        ev("subagent_invoked", "T1", call_id="a"),
        ev("subagent_failed", "T1"),
        ev("blocker_encountered", "T1"),
        ev("blocker_resolved", "T1"),
        ev("subagent_invoked", "T1", call_id="b"),
        ev("subagent_invoked", "T2"),
    ]
    assert state.current(events, "T1") == [events[4]]
    assert state.current(events[:3], "T1") == events[:3]


def test_attempt_counts_retries_and_keeps_only_the_latest_events() -> None:
    first = [ev("subagent_invoked", "T1", call_id="a"), ev("subagent_failed", "T1", kind="timeout")]
    att = state.attempt(first)
    assert att.number == 1 and att.call_id == "a" and att.has("subagent_failed")
    assert state.failure(att) is first[1]
    retried = [*first, ev("subagent_retried", "T1"), ev("subagent_invoked", "T1", call_id="b")]
    att = state.attempt(retried)
    assert att.number == 2 and att.call_id == "b" and att.events == retried[3:]
    assert state.failure(att) is None and not att.has("subagent_failed")
    assert att.last("subagent_failed") is None
    empty = state.attempt([])
    assert empty.number == 1 and empty.call_id is None and state.failure(empty) is None


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (ev("subagent_failed", kind="retryable"), True),
        (ev("subagent_failed", kind="timeout"), True),
        (ev("subagent_failed", kind="hard"), False),
        (ev("subagent_failed", kind="format"), False),
        (ev("subagent_failed"), False),
        (ev("build_failed"), True),
        (ev("test_failed"), True),
        (ev("acceptance_failed"), False),
    ],
)
def test_retryable(event: dict[str, Any], expected: bool) -> None:
    assert state.retryable(event) is expected


def test_failure_picks_the_last_failure_event() -> None:
    att = state.Attempt(
        1,
        [
            ev("subagent_invoked", "T1"),
            ev("subagent_succeeded", "T1"),
            ev("build_succeeded", "T1"),
            ev("test_failed", "T1"),
        ],
    )
    assert state.failure(att) is att.events[-1]


def test_subtask_status() -> None:
    events = [ev("task_started")]
    assert state.subtask_status(events, "T1") == "pending"
    events.append(ev("subagent_invoked", "T1"))
    assert state.subtask_status(events, "T1") == "running"
    events.append(ev("step_failed", "T1"))
    assert state.subtask_status(events, "T1") == "failed"
    events.append(ev("blocker_encountered", "T1"))
    assert state.subtask_status(events, "T1") == "blocked"
    assert state.subtask_status(events, "T2") == "pending"
    events.append(ev("blocker_resolved", "T1"))
    assert state.subtask_status(events, "T1") == "running"
    events += [ev("subagent_invoked", "T1"), ev("step_completed", "T1", commit=None)]
    assert state.subtask_status(events, "T1") == "done"
    assert state.done(events) == {"T1": events[-1]}
    assert state.has(events, "step_completed") and not state.has(events, "task_completed")


# -- tokens ----------------------------------------------------------------------------------

NOW = "2026-01-01T12:00:00Z"


def token(tid: str, *paths: str, **fields: Any) -> tokens.Token:
    base: dict[str, Any] = {
        "id": tid,
        "paths": paths or ("src/**",),
        "expires": "2026-01-02T00:00:00Z",
        "one_shot": False,
        "revoked": False,
        "spent": None,
    }
    return tokens.Token(**(base | fields))


SPENT = {"task_id": "demo", "call_id": "c" * 64, "commit": "d" * 40}


@pytest.mark.parametrize(
    ("made", "why"),
    [
        (token("W1"), None),
        (token("W1", expires="2026-01-01T12:00:01Z"), None),
        (token("W1", expires=NOW), "token W1 expired at 2026-01-01T12:00:00Z"),
        (token("W1", expires="2025-12-31T00:00:00Z"), "expired"),
        (token("W1", revoked=True), "token W1 is revoked"),
        (token("W1", one_shot=True), None),
        (token("W1", one_shot=True, spent=SPENT), "was spent by dddddddddddd"),
        (token("W1", one_shot=False, spent=SPENT), None),
    ],
)
def test_usable_at(made: tokens.Token, why: str | None) -> None:
    found = made.usable_at(NOW)
    if why is None:
        assert found is None
    else:
        assert found is not None and why in found


def test_select_first_usable_covering_token_in_file_order() -> None:
    known = [
        token("W1", "src/**", revoked=True),
        token("W2", "docs/**"),
        token("W3", "src/**", expires="2025-01-01T00:00:00Z"),
        token("W4", "src/**", one_shot=True, spent=SPENT),
        token("W5", "src/**", "tests/**"),
        token("W6", "**"),
    ]
    assert tokens.select(known, None, ["src/**"], NOW) == (known[4], None)
    assert tokens.select(known, None, ["src/**", "tests/test_*.py"], NOW) == (known[4], None)
    assert tokens.select(known, None, ["lib/**"], NOW) == (known[5], None)
    assert tokens.select(known[:5], None, ["lib/**"], NOW) == (
        None,
        "no usable token covers lib/**",
    )
    assert tokens.select([], None, ["src/**"], NOW)[0] is None


def test_select_named_token() -> None:
    known = [token("W1", "src/**"), token("W2", "docs/**"), token("W3", "src/**", revoked=True)]
    assert tokens.select(known, "W1", ["src/a/*.py"], NOW) == (known[0], None)
    assert tokens.select(known, "W2", ["src/**"], NOW) == (None, "token W2 does not cover src/**")
    assert tokens.select(known, "W9", ["src/**"], NOW) == (None, "token W9 does not exist")
    found, why = tokens.select(known, "W3", ["src/**"], NOW)
    assert found is known[2] and why == "token W3 is revoked"  # named: no fallback to W1


def test_token_covers_needs_every_glob() -> None:
    made = token("W1", "src/**", "tests/*.py")
    assert made.covers(["src/x/y.py", "tests/test_a.py"])
    assert not made.covers(["src/x/y.py", "tests/a/test_a.py"])
    assert made.covers([])


# -- shim launch options and the command allowlist --------------------------------------------


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
    assert shim.allowed_command(command, launch) is allowed


@given(st.text(max_size=60))
def test_nothing_is_allowed_without_an_allowlist(command: str) -> None:
    assert not shim.allowed_command(command, shim.Launch())
