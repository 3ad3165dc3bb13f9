"""Nested plans: the tree a plan runs (cycles, depth, budgets), and budgets shared down it."""

from __future__ import annotations

import dataclasses
import itertools
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.clock import SteppingClock
from harness.base.errors import InvalidInput
from harness.record.progress import Log
from harness.repository.layout import Layout
from harness.spec import config
from harness.spec import plan as plan_mod
from harness.spec.config import Config
from harness.step import budgets, nesting

from .builders import FAST, sub
from .conftest import CLOCK, subtask

Graph = dict[str, list[str]]


def nested(sid: str, task: str, **fields: Any) -> dict[str, Any]:
    """A plan entry running the plan of `task` as one unit."""
    return {"id": sid, "plan": task, **fields}


def write_plan(
    root: Path, task: str, subtasks: list[dict[str, Any]], **fields: Any
) -> dict[str, Any]:
    path = Layout(root).plan(task)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"task_id": task, "created": CLOCK, "subtasks": subtasks, **fields}
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return doc


def write_graph(root: Path, graph: Graph) -> None:
    """Each task's plan: one subtask of its own, then one running each plan it names."""
    for task, kids in graph.items():
        units = [nested(f"run{i}", kid) for i, kid in enumerate(kids)]
        write_plan(root, task, [subtask("own"), *units])


def defaults(tmp_path: Path, **changes: Any) -> Config:
    """The config with nothing in ai/harness.toml (each field defaulted), then `changes`."""
    found = config.load(tmp_path / "no-such-harness.toml")
    return dataclasses.replace(found, **changes)


def tree(root: Path, task: str) -> nesting.Tree:
    layout = Layout(root)
    return nesting.Tree(layout, task, plan_mod.load(layout.plan(task), root, task))


def problem(root: Path, task: str, cfg: Config) -> str | None:
    return tree(root, task).problem(cfg)


def chain(n: int) -> Graph:
    """p0 runs p1, which runs p2, ... down to p<n>: plans nested n deep."""
    return {f"p{i}": [f"p{i + 1}"] if i < n else [] for i in range(n + 1)}


# -- cycles ---------------------------------------------------------------------------------


def test_the_default_max_depth_is_five(tmp_path: Path) -> None:
    assert defaults(tmp_path).max_depth == 5


def test_a_plan_running_itself_is_a_cycle(tmp_path: Path) -> None:
    write_graph(tmp_path, {"a": ["a"]})
    assert problem(tmp_path, "a", defaults(tmp_path)) == "plans run in a cycle: a -> a"


def test_two_plans_running_each_other_are_a_cycle_with_its_path(tmp_path: Path) -> None:
    write_graph(tmp_path, {"a": ["b"], "b": ["a"]})
    assert problem(tmp_path, "a", defaults(tmp_path)) == "plans run in a cycle: a -> b -> a"
    # Seen from the other end, the same loop starts there.
    assert problem(tmp_path, "b", defaults(tmp_path)) == "plans run in a cycle: b -> a -> b"


def test_a_cycle_below_plans_that_run_no_cycle_is_named_from_where_it_closes(
    tmp_path: Path,
) -> None:
    graph = {"top": ["x", "mid"], "x": [], "mid": ["c1"], "c1": ["c2"], "c2": ["c3"]}
    graph["c3"] = ["x", "c1"]  # c1 -> c2 -> c3 -> c1, reached through top and mid
    write_graph(tmp_path, graph)
    found = problem(tmp_path, "top", defaults(tmp_path))
    assert found == "plans run in a cycle: c1 -> c2 -> c3 -> c1"
    # The twin without the edge back: no cycle, and nothing else wrong.
    graph["c3"] = ["x"]
    write_graph(tmp_path, graph)
    assert problem(tmp_path, "top", defaults(tmp_path)) is None


def test_a_cycle_is_refused_by_check_naming_the_plan(tmp_path: Path) -> None:
    write_graph(tmp_path, {"a": ["b"], "b": ["a"]})
    layout = Layout(tmp_path)
    plan = plan_mod.load(layout.plan("a"), tmp_path, "a")
    with pytest.raises(InvalidInput) as caught:
        nesting.check(layout, "a", plan, defaults(tmp_path))
    assert str(caught.value) == "ai/tasks/a/plan.json: plans run in a cycle: a -> b -> a"


def test_a_lattice_of_shared_plans_is_no_cycle(tmp_path: Path) -> None:
    # a runs b and c, both run d, which b also reaches through c's sibling e.
    write_graph(tmp_path, {"a": ["b", "c"], "b": ["d", "e"], "c": ["d"], "e": ["d"], "d": []})
    assert problem(tmp_path, "a", defaults(tmp_path)) is None
    # A plan run twice by the same plan is no cycle either.
    write_graph(tmp_path, {"a": ["d", "d"], "d": []})
    assert problem(tmp_path, "a", defaults(tmp_path)) is None


# -- depth ----------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_nesting_exactly_max_depth_deep_passes_one_more_is_refused_with_its_path(
    tmp_path: Path, limit: int
) -> None:
    cfg = defaults(tmp_path, max_depth=limit)
    write_graph(tmp_path, chain(limit))
    assert problem(tmp_path, "p0", cfg) is None
    write_graph(tmp_path, chain(limit + 1))
    path = " -> ".join(f"p{i}" for i in range(limit + 2))
    assert problem(tmp_path, "p0", cfg) == (
        f"plans nest {limit + 1} deep, more than [limits] max_depth {limit} allows: {path}"
    )


def test_the_depth_reported_is_the_deepest_path_not_the_first(tmp_path: Path) -> None:
    # a's first unit is shallow (a -> s), its second deep (a -> d1 -> d2 -> d3).
    graph = {"a": ["s", "d1"], "s": [], "d1": ["d2"], "d2": ["d3"], "d3": []}
    write_graph(tmp_path, graph)
    assert problem(tmp_path, "a", defaults(tmp_path, max_depth=3)) is None
    assert problem(tmp_path, "a", defaults(tmp_path, max_depth=2)) == (
        "plans nest 3 deep, more than [limits] max_depth 2 allows: a -> d1 -> d2 -> d3"
    )


def test_a_plan_that_runs_no_plan_is_not_checked(tmp_path: Path) -> None:
    """check() looks at no file for a plan without units: not even a depth of 0 refuses."""
    write_plan(tmp_path, "a", [subtask("own")])
    layout = Layout(tmp_path)
    plan = plan_mod.load(layout.plan("a"), tmp_path, "a")
    nesting.check(layout, "a", plan, defaults(tmp_path, max_depth=0))
    write_graph(tmp_path, {"a": ["b"], "b": []})
    plan = plan_mod.load(layout.plan("a"), tmp_path, "a")
    with pytest.raises(InvalidInput, match=r"plans nest 1 deep, more than \[limits\] max_depth 0"):
        nesting.check(layout, "a", plan, defaults(tmp_path, max_depth=0))


def test_a_chain_longer_than_the_recursion_limit_is_walked(tmp_path: Path) -> None:
    n = 1200  # sys.getrecursionlimit() is 1000: a recursive walk would fail here
    write_graph(tmp_path, chain(n))
    plans = tree(tmp_path, "p0")  # each plan read once, then asked twice
    assert plans.problem(defaults(tmp_path, max_depth=n)) is None
    found = plans.problem(defaults(tmp_path, max_depth=n - 1))
    assert found is not None and found.startswith(f"plans nest {n} deep")
    assert found.endswith(f"p{n - 1} -> p{n}")


# -- missing and invalid plans --------------------------------------------------------------


def test_a_missing_plan_names_the_subtask_running_it_and_the_file(tmp_path: Path) -> None:
    write_plan(tmp_path, "a", [subtask("own"), nested("unit", "b")])
    write_plan(tmp_path, "b", [subtask("own"), nested("deeper", "ghost")])
    with pytest.raises(InvalidInput) as caught:
        problem(tmp_path, "a", defaults(tmp_path))
    assert str(caught.value) == (
        "ai/tasks/b/plan.json: subtask deeper runs the plan of task ghost, which has no "
        "ai/tasks/ghost/plan.json"
    )


def test_an_invalid_nested_plan_is_refused_naming_its_file(tmp_path: Path) -> None:
    write_plan(tmp_path, "a", [subtask("own"), nested("unit", "b")])
    write_plan(tmp_path, "b", [subtask("own")])
    assert problem(tmp_path, "a", defaults(tmp_path)) is None
    # The twin: b's plan says it is another task's.
    path = Layout(tmp_path).plan("b")
    path.write_bytes(orjson.dumps(orjson.loads(path.read_bytes()) | {"task_id": "other"}))
    with pytest.raises(InvalidInput) as caught:
        problem(tmp_path, "a", defaults(tmp_path))
    assert str(caught.value) == "ai/tasks/b/plan.json: $.task_id: 'other' is not 'b'"


# -- budgets --------------------------------------------------------------------------------


def budget_tree(root: Path, parent: dict[str, Any], unit: dict[str, Any], child: float) -> None:
    write_plan(root, "a", [subtask("own"), nested("unit", "b", **unit)], **parent)
    write_plan(root, "b", [subtask("own")], budgets={"max_steps": child})


@pytest.mark.parametrize(
    ("parent", "unit", "allowed"),
    [
        ({"budgets": {"max_steps": 5}}, {"budgets": {"max_steps": 3}}, 3),  # the subtask's
        ({"budgets": {"max_steps": 5}}, {}, 5),  # the parent plan's
        ({"budgets": {"max_steps": 2}}, {"budgets": {"max_steps": 3}}, 2),  # the lower wins
    ],
    ids=["subtask", "plan", "plan-below-subtask"],
)
def test_a_nested_budget_above_what_the_parent_allows_its_subtask_is_refused_equal_passes(
    tmp_path: Path, parent: dict[str, Any], unit: dict[str, Any], allowed: int
) -> None:
    budget_tree(tmp_path, parent, unit, allowed)
    assert problem(tmp_path, "a", defaults(tmp_path)) is None
    budget_tree(tmp_path, parent, unit, allowed + 1)
    assert problem(tmp_path, "a", defaults(tmp_path)) == (
        f"ai/tasks/b/plan.json: budgets.max_steps {allowed + 1} exceeds the {allowed} that "
        "task a allows its subtask unit"
    )


def test_a_nested_budget_is_held_to_the_config_the_parent_plan_inherits(tmp_path: Path) -> None:
    budget_tree(tmp_path, {}, {}, 7)
    assert problem(tmp_path, "a", defaults(tmp_path)) is None  # nothing bounds max_steps
    cfg = defaults(tmp_path, limits={"max_steps": 6})
    assert problem(tmp_path, "a", cfg) == (
        "ai/tasks/b/plan.json: budgets.max_steps 7 exceeds the 6 that task a allows its "
        "subtask unit"
    )


def test_a_budget_the_parent_does_not_bound_is_not_refused(tmp_path: Path) -> None:
    write_plan(tmp_path, "a", [subtask("own"), nested("unit", "b")], budgets={"max_steps": 5})
    write_plan(tmp_path, "b", [subtask("own")], budgets={"max_runtime_s": 1e6})
    assert problem(tmp_path, "a", defaults(tmp_path)) is None


def test_a_grandchild_budget_above_what_the_tree_above_allows_is_refused(tmp_path: Path) -> None:
    # a allows its unit 3 steps; b sets no budget of its own, so b may spend 3 at most;
    # c, run by b, sets 10.
    write_plan(tmp_path, "a", [subtask("own"), nested("unit", "b", budgets={"max_steps": 3})])
    write_plan(tmp_path, "b", [subtask("own"), nested("deeper", "c")])
    write_plan(tmp_path, "c", [subtask("own")], budgets={"max_steps": 10})
    found = problem(tmp_path, "a", defaults(tmp_path))
    assert found is not None and "ai/tasks/c/plan.json: budgets.max_steps 10 exceeds" in found


# -- the property: against brute force ------------------------------------------------------


@st.composite
def graphs(draw: st.DrawFn) -> tuple[Graph, int]:
    """Up to 7 tasks (t0 is the root), each running any of them (itself too, twice even),
    and a max_depth."""
    n = draw(st.integers(1, 7))
    ids = [f"t{i}" for i in range(n)]
    graph = {task: draw(st.lists(st.sampled_from(ids), max_size=3)) for task in ids}
    return graph, draw(st.integers(0, 6))


def reachable(graph: Graph, start: str) -> set[str]:
    """Every task reached from `start` through one edge or more."""
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        task = todo.pop()
        if task not in seen:
            seen.add(task)
            todo += graph[task]
    return seen


def longest(graph: Graph, start: str) -> int:
    """The most edges of any path from `start` (the graph has no cycle): every path tried."""
    return max((1 + longest(graph, kid) for kid in graph[start]), default=0)


def is_path(graph: Graph, path: list[str]) -> bool:
    return all(b in graph[a] for a, b in itertools.pairwise(path))


@FAST
@given(graphs())
def test_problem_agrees_with_brute_force_on_cycles_and_depth(drawn: tuple[Graph, int]) -> None:
    graph, depth = drawn
    root = "t0"
    under = {root} | reachable(graph, root)
    cyclic = any(task in reachable(graph, task) for task in under)
    with tempfile.TemporaryDirectory() as where:
        write_graph(Path(where), graph)
        found = problem(Path(where), root, defaults(Path(where), max_depth=depth))
    ring = "plans run in a cycle: "
    if cyclic:
        assert found is not None and found.startswith(ring), found
        cycle = found.removeprefix(ring).split(" -> ")
        assert len(cycle) >= 2 and cycle[0] == cycle[-1], cycle
        assert len(set(cycle[:-1])) == len(cycle) - 1, cycle  # each plan once around
        assert cycle[0] in under and is_path(graph, cycle), (graph, cycle)
        return
    most = longest(graph, root)
    if most <= depth:
        assert found is None, (graph, found)
        return
    head = f"plans nest {most} deep, more than [limits] max_depth {depth} allows: "
    assert found is not None and found.startswith(head), (graph, found)
    path = found.removeprefix(head).split(" -> ")
    assert path[0] == root and len(path) == most + 1 and is_path(graph, path), (graph, path)


# -- hostile shapes: a walk per path would never end ----------------------------------------

LEVELS = 40


def lattice(root: Path) -> str:
    """top runs L0a and L0b; each L<i>a and L<i>b runs both L<i+1>a and L<i+1>b: 2**40
    paths from top to the bottom, 81 plans. The expected answer names the first path."""
    graph: Graph = {"top": ["L0a", "L0b"]}
    for i in range(LEVELS):
        below = [f"L{i + 1}a", f"L{i + 1}b"] if i + 1 < LEVELS else []
        graph[f"L{i}a"] = graph[f"L{i}b"] = below
    write_graph(root, graph)
    return " -> ".join(["top", *(f"L{i}a" for i in range(LEVELS))])


def test_a_lattice_with_two_to_the_forty_paths_is_walked_once(tmp_path: Path) -> None:
    """Only a walk visiting each plan once ever returns here (no wall clock is asked)."""
    path = lattice(tmp_path)
    assert problem(tmp_path, "top", defaults(tmp_path, max_depth=LEVELS)) is None
    assert problem(tmp_path, "top", defaults(tmp_path, max_depth=LEVELS - 1)) == (
        f"plans nest {LEVELS} deep, more than [limits] max_depth {LEVELS - 1} allows: {path}"
    )


def test_a_cycle_after_a_lattice_with_two_to_the_forty_paths_is_found(tmp_path: Path) -> None:
    """The cycle hangs off top's last unit: a walk reaches it only once the whole lattice
    before it is walked, so only a linear walk gets there."""
    lattice(tmp_path)
    write_graph(tmp_path, {"top": ["L0a", "L0b", "z1"], "z1": ["z2"], "z2": ["z1"]})
    cfg = defaults(tmp_path, max_depth=LEVELS)
    assert problem(tmp_path, "top", cfg) == "plans run in a cycle: z1 -> z2 -> z1"


# -- counting what nested plans spent -------------------------------------------------------


def log_calls(root: Path, task: str, *calls: tuple[str, str]) -> None:
    log = Log(Layout(root).log(task), task, SteppingClock(CLOCK))
    log.append("task_started", "ok")
    for step, call_id in calls:
        details = {"call_id": call_id, "attempt": 1, "subagent": "scripted"}
        log.append("subagent_invoked", "pending", step=step, details=details)


def test_count_adds_every_nested_call_as_one_of_the_subtask_running_it(tmp_path: Path) -> None:
    # a's unit u runs b, which runs c twice (two units) and d; d runs c too.
    write_plan(tmp_path, "a", [subtask("own"), nested("u", "b"), nested("w", "e")])
    write_plan(
        tmp_path, "b", [subtask("x"), nested("v1", "c"), nested("v2", "c"), nested("v3", "d")]
    )
    write_graph(tmp_path, {"c": [], "d": ["c"], "e": []})
    log_calls(tmp_path, "b", ("x", "b1"), ("y", "b2"))
    log_calls(tmp_path, "c", ("own", "c1"))
    log_calls(tmp_path, "d", ("own", "d1"))
    log_calls(tmp_path, "e", ("own", "e1"))
    layout = Layout(tmp_path)
    plan = plan_mod.load(layout.plan("a"), tmp_path, "a")
    spent = budgets.Spent({})
    spent.invoked("a1", "own", "scripted")  # a's own call, as budgets.spent read it
    nesting.count(layout, plan, spent, defaults(tmp_path), metered=False)
    assert {c: call.step for c, call in spent.calls.items()} == {
        "a1": "own",
        "b1": "u",
        "b2": "u",
        "c1": "u",
        "d1": "u",
        "e1": "w",
    }
    assert (spent.used("max_steps"), spent.used("max_steps", "u")) == (6, 4)


# -- Account.up: budgets shared down the tree -----------------------------------------------


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def account(
    limits: dict[str, float],
    clock: Clock,
    started: float = 0.0,
    up: tuple[budgets.Account, Any] | None = None,
) -> budgets.Account:
    return budgets.Account(limits, budgets.Spent({}), started, clock, up=up)


UNIT = sub("unit", plan="b")  # the parent's subtask running the child plan
OWN = sub("own")  # a subtask of the child plan


def test_a_child_call_its_own_budget_allows_is_refused_when_the_parent_task_is_spent() -> None:
    clock = Clock()
    parent = account({"max_steps": 2}, clock)
    child = account({"max_steps": 10}, clock, up=(parent, UNIT))
    child.check(OWN)  # room at both levels
    parent.invoked("p1", "other", "scripted")
    child.check(OWN)  # one left above
    parent.invoked("p2", "other", "scripted")
    refusal = budgets.refusal(child.limits, OWN, child.spent, 0.0)
    assert refusal is None  # the child's own budgets afford the call ...
    with pytest.raises(budgets.OverBudget) as caught:
        child.check(OWN)  # ... its parent's do not
    assert caught.value.exhausted == budgets.Exhausted(
        "max_steps", 2, 2, "max_steps (task): 2 of 2 worker calls used"
    )


def test_a_child_call_is_refused_when_the_parent_subtask_running_it_is_spent() -> None:
    clock = Clock()
    parent = account({"max_steps": 10}, clock)
    unit = sub("unit", plan="b", limits=(("max_steps", 2.0),))
    child = account({"max_steps": 10}, clock, up=(parent, unit))
    for call_id in ("c1", "c2"):
        child.check(OWN)
        child.invoked(call_id, "own", "scripted")
    parent.invoked("p1", "other", "scripted")  # another subtask's call: not the unit's
    with pytest.raises(budgets.OverBudget) as caught:
        child.check(OWN)
    assert caught.value.exhausted.why == "max_steps (subtask unit): 2 of 2 worker calls used"
    # The parent's other subtasks may still call: only the unit ran out.
    parent.check(sub("other"))


def test_invoked_counts_a_call_at_every_level_under_the_subtask_running_it() -> None:
    clock = Clock()
    top = account({}, clock)
    middle = account({}, clock, up=(top, sub("mid", plan="b")))
    child = account({}, clock, up=(middle, sub("unit", plan="c")))
    child.invoked("c1", "own", "scripted")
    child.invoked("c1", "own", "scripted")  # the same call again counts once
    child.invoked("c2", "own", "scripted")
    assert {c: call.step for c, call in child.spent.calls.items()} == {"c1": "own", "c2": "own"}
    assert {c: call.step for c, call in middle.spent.calls.items()} == {
        "c1": "unit",
        "c2": "unit",
    }
    assert {c: call.step for c, call in top.spent.calls.items()} == {"c1": "mid", "c2": "mid"}
    assert [a.spent.used("max_steps") for a in (top, middle, child)] == [2, 2, 2]


def test_a_grandparent_budget_refuses_a_grandchild_call() -> None:
    clock = Clock()
    top = account({"max_steps": 1}, clock)
    middle = account({"max_steps": 5}, clock, up=(top, sub("mid", plan="b")))
    child = account({"max_steps": 5}, clock, up=(middle, UNIT))
    child.check(OWN)
    child.invoked("c1", "own", "scripted")
    with pytest.raises(budgets.OverBudget, match=r"max_steps \(task\): 1 of 1"):
        child.check(OWN)


@pytest.mark.parametrize(
    ("parent", "child", "left"),
    [
        ({"max_runtime_s": 100}, {"max_runtime_s": 50}, 20.0),  # the parent's is nearer
        ({"max_runtime_s": 100}, {"max_runtime_s": 15}, 5.0),  # the child's is nearer
        ({"max_runtime_s": 100}, {}, 20.0),  # only the parent's
        ({}, {"max_runtime_s": 15}, 5.0),  # only the child's
        ({}, {}, None),
        ({"max_runtime_s": 60}, {"max_runtime_s": 50}, 0.0),  # the parent's passed
    ],
)
def test_remaining_s_is_the_least_left_at_any_level(
    parent: dict[str, float], child: dict[str, float], left: float | None
) -> None:
    clock = Clock(now=80.0)
    above = account(parent, clock, started=0.0)
    below = account(child, clock, started=70.0, up=(above, UNIT))
    assert below.remaining_s() == left


def test_a_child_call_is_refused_once_the_parent_run_is_out_of_time() -> None:
    clock = Clock(now=50.0)
    parent = account({"max_runtime_s": 60}, clock, started=0.0)
    child = account({"max_runtime_s": 100}, clock, started=40.0, up=(parent, UNIT))
    child.check(OWN)
    clock.now = 61.0  # 21s into the child's run, 61s into the parent's
    with pytest.raises(budgets.OverBudget) as caught:
        child.check(OWN)
    assert caught.value.exhausted.name == "max_runtime_s"
    assert caught.value.exhausted.used == 61.0
