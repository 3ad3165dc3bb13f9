"""plan.json structure: order, cycles, problems."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.spec.plan import Plan, Subtask, find_cycle, order, structure_problem

from .builders import FAST, plan_of, sub


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


def test_a_long_chain_listed_backwards_validates_and_orders() -> None:
    n = 5000
    plan = plan_of(*(sub(f"T{i}", *([f"T{i - 1}"] if i else [])) for i in reversed(range(n))))
    assert structure_problem(plan) is None
    assert [s.id for s in order(plan)] == [f"T{i}" for i in range(n)]
    looped = plan_of(sub("T0", f"T{n - 1}"), *plan.subtasks[:-1])
    assert find_cycle(looped)[0] == find_cycle(looped)[-1]


def test_order_matches_the_one_at_a_time_definition() -> None:
    """The heap gives what picking the first ready subtask in file order, again and again,
    gives (the definition, quadratic)."""
    plan = plan_of(sub("C", "A"), sub("D"), sub("A"), sub("E", "D", "C"), sub("B", "A"))
    done: set[str] = set()
    expected, pending = [], list(plan.subtasks)
    while pending:
        ready = next(s for s in pending if all(d in done for d in s.depends_on))
        expected.append(ready.id)
        done.add(ready.id)
        pending.remove(ready)
    assert [s.id for s in order(plan)] == expected == ["D", "A", "C", "E", "B"]
