"""Glee workflows (seed 000) into plan documents: the seed's examples, each mode, references,
on_error, nesting, every refusal at its file:line:column, and fuzzing."""

from __future__ import annotations

import graphlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from harness.base import schemas
from harness.base.errors import InvalidInput
from harness.importers.glee import to_plans
from harness.repository.layout import Layout
from harness.spec import config, plan
from harness.step import nesting

from .builders import FAST

CREATED = "2026-01-02T03:04:05Z"

# Seed 000's examples, as written there (comments included).
FULL_REVIEW = """\
# .glee/workflows/full-review.yml
name: full-review
description: Complete code review with security and performance analysis

# Sequence of steps
steps:
  - agent: security-scanner
    inputs:
      target_file: ${target}

  - agent: performance-analyzer
    inputs:
      target_file: ${target}

  - agent: code-reviewer
    inputs:
      target_file: ${target}
      security_report: ${steps[0].output}
      performance_report: ${steps[1].output}

# How to run steps
execution: sequential  # or: parallel, dag
"""

PARALLEL_SCAN = """\
# .glee/workflows/parallel-scan.yml
name: parallel-scan
description: Run multiple scanners in parallel

steps:
  - agent: security-scanner
    parallel_group: scanners

  - agent: lint-checker
    parallel_group: scanners

  - agent: type-checker
    parallel_group: scanners

  # This runs after all scanners complete
  - agent: report-aggregator
    inputs:
      reports: ${parallel_group.scanners.outputs}

execution: parallel
"""

ON_ERROR_OVERRIDE = """\
steps:
  - agent: security-scanner
    on_error: continue    # continue | stop | skip_dependents (default: stop)

  - agent: code-reviewer
    inputs:
      # Handle potential missing output from previous step
      security_report: ${steps[0].output ?? "No security scan available"}
"""

RUN_RESTAURANT = """\
# .glee/workflows/run-restaurant.yml
name: run-restaurant
description: Daily operations for a restaurant

steps:
  - workflow: accounting          # Another workflow
  - workflow: purchasing          # Another workflow
  - workflow: serve-customers     # Another workflow (more specific scope)
  - workflow: cleaning            # Another workflow
"""

SERVE_CUSTOMERS = """\
# .glee/workflows/serve-customers.yml
name: serve-customers
description: Handle customer service flow

steps:
  - agent: order-taker
    inputs:
      channel: ${channel}  # in-store, drive-thru, app

  - agent: payment-processor
    inputs:
      order: ${steps[0].output}

  - agent: food-preparer
    inputs:
      order: ${steps[0].output}

  - agent: delivery-handler
    inputs:
      order: ${steps[0].output}
      food: ${steps[2].output}
"""

# The seed names these three without showing them.
ACCOUNTING = """\
name: accounting
steps:
  - agent: bookkeeper
    description: |
      Reconcile the day's receipts
      against the register
"""

PURCHASING = """\
name: purchasing
execution: dag
on_error: continue
steps:
  - name: Count stock
    agent: stock-counter
  - name: Order
    agent: buyer
    prompt: Order what ${steps[0].output} says is short, from ${supplier ?? 'the usual supplier'}
"""

CLEANING = """\
name: cleaning
steps:
  - agent: cleaner
  - workflow: accounting
    description: the cleaning bill
"""

RESTAURANT = {
    "accounting": ACCOUNTING,
    "purchasing": PURCHASING,
    "serve-customers": SERVE_CUSTOMERS,
    "cleaning": CLEANING,
}


@dataclass
class Reader:
    texts: Mapping[str, str]
    asked: list[str] = field(default_factory=list)

    def __call__(self, name: str) -> str | None:
        self.asked.append(name)
        return self.texts.get(name)


def convert(
    text: str,
    *,
    task_id: str = "wf",
    inputs: Mapping[str, str] | None = None,
    read: Callable[[str], str | None] | None = None,
    role: str = "localized-impl",
    write_scope: str | list[str] = "none",
) -> dict[str, dict[str, Any]]:
    plans = to_plans(
        text,
        "wf.yml",
        task_id=task_id,
        created=CREATED,
        inputs=inputs or {},
        role=role,
        write_scope=write_scope,
        read=read or Reader({}),
    )
    for tid, doc in plans.items():
        assert schemas.problem("plan", doc) is None, tid
    return plans


def agent(sid: str, goal: str, *deps: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": sid,
        "role": "localized-impl",
        "goal": goal,
        "inputs": [],
        "acceptance": [],
        "write_scope": "none",
        "depends_on": list(deps),
        **extra,
    }


def nested(sid: str, name: str, goal: str, *deps: str) -> dict[str, Any]:
    return {"id": sid, "plan": name, "goal": goal, "depends_on": list(deps)}


def doc(task_id: str, on_error: str, *subtasks: dict[str, Any]) -> dict[str, Any]:
    return {"task_id": task_id, "created": CREATED, "on_error": on_error, "subtasks": [*subtasks]}


def edges(plan_doc: dict[str, Any]) -> dict[str, list[str]]:
    return {s["id"]: s["depends_on"] for s in plan_doc["subtasks"]}


# --- the seed's examples -----------------------------------------------------------------


def test_full_review_is_a_chain_with_its_references_as_direct_edges() -> None:
    plans = convert(FULL_REVIEW, task_id="review", inputs={"target": "src/api/auth.py"})
    assert plans == {
        "review": doc(
            "review",
            "stop",
            agent("step-0", "Glee agent security-scanner; inputs: target_file=src/api/auth.py"),
            agent(
                "step-1",
                "Glee agent performance-analyzer; inputs: target_file=src/api/auth.py",
                "step-0",
            ),
            agent(
                "step-2",
                "Glee agent code-reviewer; inputs: target_file=src/api/auth.py, "
                "security_report=<output of step-0>, performance_report=<output of step-1>",
                "step-0",
                "step-1",
            ),
        )
    }


def test_run_restaurant_converts_with_each_nested_workflow_once() -> None:
    read = Reader(RESTAURANT)
    plans = convert(
        RUN_RESTAURANT, task_id="run-restaurant", inputs={"channel": "drive-thru"}, read=read
    )
    assert list(plans) == [
        "run-restaurant",
        "accounting",
        "purchasing",
        "serve-customers",
        "cleaning",
    ]
    assert read.asked == ["accounting", "purchasing", "serve-customers", "cleaning"]
    assert plans["run-restaurant"] == doc(
        "run-restaurant",
        "stop",
        nested("step-0", "accounting", "Glee workflow accounting"),
        nested("step-1", "purchasing", "Glee workflow purchasing", "step-0"),
        nested("step-2", "serve-customers", "Glee workflow serve-customers", "step-1"),
        nested("step-3", "cleaning", "Glee workflow cleaning", "step-2"),
    )
    assert plans["accounting"] == doc(
        "accounting",
        "stop",
        agent("step-0", "Glee agent bookkeeper: Reconcile the day's receipts against the register"),
    )
    assert plans["purchasing"] == doc(
        "purchasing",
        "continue",
        agent("Count-stock", "Glee agent stock-counter"),
        agent(
            "Order",
            "Glee agent buyer: Order what <output of Count-stock> says is short, "
            "from the usual supplier",
            "Count-stock",
        ),
    )
    # Sequential: the step before, and every step whose output it names, directly.
    assert plans["serve-customers"] == doc(
        "serve-customers",
        "stop",
        agent("step-0", "Glee agent order-taker; inputs: channel=drive-thru"),
        agent("step-1", "Glee agent payment-processor; inputs: order=<output of step-0>", "step-0"),
        agent(
            "step-2",
            "Glee agent food-preparer; inputs: order=<output of step-0>",
            "step-0",
            "step-1",
        ),
        agent(
            "step-3",
            "Glee agent delivery-handler; inputs: order=<output of step-0>, food=<output of"
            " step-2>",
            "step-0",
            "step-2",
        ),
    )
    assert plans["cleaning"] == doc(
        "cleaning",
        "stop",
        agent("step-0", "Glee agent cleaner"),
        nested("step-1", "accounting", "Glee workflow accounting: the cleaning bill", "step-0"),
    )


def test_serve_customers_as_a_dag_has_only_its_references_for_edges() -> None:
    text = SERVE_CUSTOMERS + "execution: dag\n"
    plans = convert(text, task_id="serve-customers", inputs={"channel": "app"})
    assert plans["serve-customers"] == doc(
        "serve-customers",
        "skip_dependents",
        agent("step-0", "Glee agent order-taker; inputs: channel=app"),
        agent("step-1", "Glee agent payment-processor; inputs: order=<output of step-0>", "step-0"),
        agent("step-2", "Glee agent food-preparer; inputs: order=<output of step-0>", "step-0"),
        agent(
            "step-3",
            "Glee agent delivery-handler; inputs: order=<output of step-0>, food=<output of"
            " step-2>",
            "step-0",
            "step-2",
        ),
    )


def test_parallel_scan_aggregator_waits_for_the_whole_group() -> None:
    plans = convert(PARALLEL_SCAN, task_id="scan")
    assert plans == {
        "scan": doc(
            "scan",
            "continue",
            agent("step-0", "Glee agent security-scanner"),
            agent("step-1", "Glee agent lint-checker"),
            agent("step-2", "Glee agent type-checker"),
            agent(
                "step-3",
                "Glee agent report-aggregator; inputs: reports=<outputs of parallel group "
                "scanners (step-0, step-1, step-2)>",
                "step-0",
                "step-1",
                "step-2",
            ),
        )
    }


def test_on_error_override_and_null_coalescing() -> None:
    plans = convert(ON_ERROR_OVERRIDE)
    assert plans["wf"] == doc(
        "wf",
        "stop",
        agent("step-0", "Glee agent security-scanner", on_error="continue"),
        agent(
            "step-1",
            'Glee agent code-reviewer; inputs: security_report=<output of step-0, or "No '
            'security scan available" if there is none>',
            "step-0",
        ),
    )


def test_every_plan_loads_and_nests_as_harness_checks_plans(tmp_path: Path) -> None:
    plans = convert(
        RUN_RESTAURANT, task_id="daily", inputs={"channel": "app"}, read=Reader(RESTAURANT)
    )
    layout = Layout(tmp_path)
    for tid, made in plans.items():
        path = layout.plan(tid)
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(made), "utf-8")
        loaded = plan.load(path, tmp_path, tid)
        assert [s.id for s in plan.order(loaded)] == [s["id"] for s in made["subtasks"]]
    tree = nesting.Tree(layout, "daily", plan.load(layout.plan("daily"), tmp_path, "daily"))
    assert tree.problem(config.load(tmp_path / "no-such-harness.toml")) is None


# --- modes, groups, on_error, references -------------------------------------------------

FOUR = """\
steps:
  - agent: a
  - agent: b
  - agent: c
    inputs: {x: "${steps[0].output}"}
  - agent: d
"""


@pytest.mark.parametrize(
    ("mode", "expected", "on_error"),
    [
        (
            "",
            {
                "step-0": [],
                "step-1": ["step-0"],
                "step-2": ["step-0", "step-1"],
                "step-3": ["step-2"],
            },
            "stop",
        ),
        ("execution: sequential\n", None, "stop"),
        (
            "execution: parallel\n",
            {"step-0": [], "step-1": [], "step-2": ["step-0"], "step-3": []},
            "continue",
        ),
        (
            "execution: dag\n",
            {"step-0": [], "step-1": [], "step-2": ["step-0"], "step-3": []},
            "skip_dependents",
        ),
    ],
)
def test_each_execution_mode(
    mode: str, expected: dict[str, list[str]] | None, on_error: str
) -> None:
    made = convert(FOUR + mode)["wf"]
    sequential = {
        "step-0": [],
        "step-1": ["step-0"],
        "step-2": ["step-0", "step-1"],
        "step-3": ["step-2"],
    }
    assert edges(made) == (expected or sequential)
    assert made["on_error"] == on_error
    assert "max_parallel" not in made


def test_parallel_groups_are_stages_when_sequential() -> None:
    text = """\
steps:
  - agent: prepare
  - {agent: s1, parallel_group: scan}
  - {agent: s2, parallel_group: scan}
  - {agent: t1, parallel_group: test}
  - {agent: t2, parallel_group: test}
  - agent: report
    inputs: {statuses: "${parallel_group.scan.status}"}
"""
    assert edges(convert(text)["wf"]) == {
        "step-0": [],
        "step-1": ["step-0"],
        "step-2": ["step-0"],
        "step-3": ["step-1", "step-2"],
        "step-4": ["step-1", "step-2"],
        "step-5": ["step-1", "step-2", "step-3", "step-4"],
    }


def test_parallel_groups_in_a_dag_add_no_edges_of_their_own() -> None:
    text = """\
execution: dag
steps:
  - {agent: s1, parallel_group: scan}
  - {agent: s2, parallel_group: scan}
  - agent: report
    prompt: "merge ${parallel_group.scan.succeeded} and note ${parallel_group.scan.failed}"
"""
    made = convert(text)["wf"]
    assert edges(made) == {"step-0": [], "step-1": [], "step-2": ["step-0", "step-1"]}
    assert made["subtasks"][2]["goal"] == (
        "Glee agent report: merge <outputs that succeeded of parallel group scan (step-0, "
        "step-1)> and note <failures of parallel group scan (step-0, step-1)>"
    )


def test_on_error_at_both_levels_the_steps_own_wins() -> None:
    text = """\
execution: parallel
on_error: skip_dependents
steps:
  - {agent: a, on_error: stop}
  - {agent: b}
  - {workflow: w, on_error: continue}
"""
    made = convert(text, read=Reader({"w": "steps: [{agent: x}]"}))
    assert made["wf"]["on_error"] == "skip_dependents"
    assert [s.get("on_error") for s in made["wf"]["subtasks"]] == ["stop", None, "continue"]
    assert made["w"]["on_error"] == "stop"


def test_interpolation_defaults_and_plain_dollars() -> None:
    text = """\
steps:
  - agent: writer
    description: "Write ${topic} for ${audience ?? everyone}, costing $5"
    prompt: "Cite ${source ?? \\"the docs\\"}; ${ topic } again; ${missing ?? }"
    inputs:
      level: ${level ?? 'beginner'}
      count: 3
"""
    goal = convert(text, inputs={"topic": "caching", "level": "expert"})["wf"]["subtasks"][0][
        "goal"
    ]
    assert goal == (
        "Glee agent writer: Write caching for everyone, costing $5 Cite the docs; caching again;"
        "; inputs: level=expert, count=3"
    )


def test_input_values_are_used_as_given_never_interpolated_again() -> None:
    text = "steps:\n  - agent: a\n    inputs: {x: '${x}'}\n"
    goal = convert(text, inputs={"x": "${steps[5].output}\nsecond line"})["wf"]["subtasks"][0][
        "goal"
    ]
    assert goal == "Glee agent a; inputs: x=${steps[5].output} second line"


def test_ids_from_names_made_valid_and_unique() -> None:
    text = """\
steps:
  - {agent: a, name: "Scan the API!"}
  - {agent: b, name: "Scan the API?"}
  - {agent: c, name: "..."}
  - {agent: d, name: step-4}
  - {agent: e}
  - {agent: f, name: "%s"}
""" % ("x" * 80)
    ids = [s["id"] for s in convert(text)["wf"]["subtasks"]]
    assert ids == ["Scan-the-API", "Scan-the-API-2", "step-2", "step-4", "step-4-2", "x" * 64]


def test_write_scope_and_role_are_the_callers() -> None:
    made = convert(
        "steps: [{agent: a}, {workflow: w}]",
        role="docs",
        write_scope=["docs/**"],
        read=Reader({"w": "steps: [{agent: b}]"}),
    )
    first, unit = made["wf"]["subtasks"]
    assert (first["role"], first["write_scope"]) == ("docs", ["docs/**"])
    assert set(unit) == {"id", "plan", "goal", "depends_on"}
    assert made["w"]["subtasks"][0]["write_scope"] == ["docs/**"]


def test_a_deep_chain_of_nested_workflows_needs_no_recursion() -> None:
    depth = 3000
    texts = {f"w{i}": f"steps: [{{workflow: w{i + 1}}}]" for i in range(depth)}
    texts[f"w{depth}"] = "steps: [{agent: leaf}]"
    plans = convert("steps: [{workflow: w0}]", task_id="top", read=Reader(texts))
    assert len(plans) == depth + 2


# --- refusals: each at its file:line:column, each with a passing twin ---------------------


@dataclass(frozen=True)
class Case:
    bad: str
    message: str
    good: str
    texts: Mapping[str, str] = field(default_factory=dict)
    inputs: Mapping[str, str] = field(default_factory=dict)
    good_texts: Mapping[str, str] | None = None  # the twin's nested workflows, if others


CASES = {
    "invalid yaml": Case(
        "steps: [{agent: a}\n",
        "wf.yml:2:1: invalid YAML: while parsing a flow sequence expected ',' or ']', but got "
        "'<stream end>'",
        "steps: [{agent: a}]\n",
    ),
    "two documents": Case(
        "steps: [{agent: a}]\n---\nsteps: [{agent: b}]\n",
        "wf.yml:2:1: invalid YAML: expected a single document in the stream but found another "
        "document",
        "---\nsteps: [{agent: a}]\n...\n",
    ),
    "control character": Case(
        "steps:\n  - agent: a\x07\n",
        "wf.yml:2:13: invalid YAML: character '\\x07' is not accepted",
        "steps:\n  - agent: a\n",
    ),
    "empty": Case(
        "# nothing\n",
        "wf.yml:1:1: empty: a workflow is a mapping (steps:, execution:, ...)",
        "steps: [{agent: a}]",
    ),
    "not a mapping": Case(
        "- agent: a\n",
        "wf.yml:1:1: a workflow is a mapping (steps:, execution:, ...)",
        "steps:\n- agent: a\n",
    ),
    "no steps": Case(
        "name: x\n", "wf.yml:1:1: a workflow needs steps:", "name: x\nsteps: [{agent: a}]\n"
    ),
    "empty steps": Case(
        "steps: []\n", "wf.yml:1:8: steps: is a list of at least one step", "steps: [agent: a]\n"
    ),
    "unknown workflow key": Case(
        "steps: [{agent: a}]\nexecute: dag\n",
        "wf.yml:2:1: unknown key 'execute' in a workflow (name, description, steps, execution, "
        "on_error)",
        "steps: [{agent: a}]\nexecution: dag\n",
    ),
    "unknown step key": Case(
        "steps:\n  - agent: a\n    agnet: b\n",
        "wf.yml:3:5: unknown key 'agnet' in a step (agent, workflow, name, description, prompt, "
        "inputs, parallel_group, on_error)",
        "steps:\n  - agent: a\n    name: b\n",
    ),
    "duplicate key": Case(
        "steps:\n  - agent: a\n    agent: b\n",
        "wf.yml:3:5: 'agent' appears twice in a step",
        "steps:\n  - agent: a\n  - agent: b\n",
    ),
    "neither agent nor workflow": Case(
        "steps:\n  - name: x\n",
        "wf.yml:2:5: a step has neither agent: and workflow: (one of them)",
        "steps:\n  - name: x\n    agent: a\n",
    ),
    "both agent and workflow": Case(
        "steps:\n  - agent: a\n    workflow: w\n",
        "wf.yml:2:5: a step has both agent: and workflow: (one of them)",
        "steps:\n  - workflow: w\n",
        texts={"w": "steps: [{agent: a}]"},
    ),
    "step not a mapping": Case(
        "steps:\n  - agent: a\n  - b\n",
        "wf.yml:3:5: a step is a mapping (agent: or workflow:, ...)",
        "steps:\n  - agent: a\n  - agent: b\n",
    ),
    "agent without a name": Case(
        "steps:\n  - agent:\n", "wf.yml:2:11: agent has no value", "steps:\n  - agent: x\n"
    ),
    "agent a list": Case(
        "steps:\n  - agent: [a, b]\n",
        "wf.yml:2:12: agent is text, not a list or a mapping",
        "steps:\n  - agent: a b\n",
    ),
    "step past the steps": Case(
        "steps:\n  - agent: a\n  - agent: b\n    inputs:\n      x: ${steps[9].output}\n",
        "wf.yml:5:10: ${steps[9].output} is past the last step, steps[1]",
        "steps:\n  - agent: a\n  - agent: b\n    inputs:\n      x: ${steps[0].output}\n",
    ),
    "huge step index": Case(
        "steps:\n  - agent: a\n  - agent: b\n    prompt: 'see ${steps[%s].output}'\n"
        % ("9" * 5000),
        "wf.yml:4:18: ${steps[%s].output} is past the last step, steps[1]" % ("9" * 5000),
        "steps:\n  - agent: a\n  - agent: b\n    prompt: 'see ${steps[00].output}'\n",
    ),
    "forward reference when sequential": Case(
        "steps:\n  - agent: a\n    inputs:\n      x: ${steps[1].output}\n  - agent: b\n",
        "wf.yml:4:10: ${steps[1].output} runs later: sequential steps use only the steps before",
        "execution: dag\nsteps:\n  - agent: a\n    inputs:\n"
        "      x: ${steps[1].output}\n  - agent: b\n",
    ),
    "own output": Case(
        'steps:\n  - agent: a\n    prompt: "redo ${steps[0].output}"\n',
        "wf.yml:3:19: ${steps[0].output} is this step's own",
        'steps:\n  - agent: a\n    prompt: "redo $steps[0].output"\n',
    ),
    "cycle of references": Case(
        "execution: dag\nsteps:\n  - agent: a\n    prompt: ${steps[1].status}\n"
        "  - agent: b\n    prompt: ${steps[0].error}\n",
        "wf.yml:4:13: steps refer to each other in a cycle: step-0 -> step-1 -> step-0",
        "execution: dag\nsteps:\n  - agent: a\n    prompt: ${steps[1].status}\n"
        "  - agent: b\n    prompt: steps[0].error\n",
    ),
    "unknown reference": Case(
        "steps:\n  - agent: a\n  - agent: b\n    prompt: >\n      use ${steps[0]}\n",
        "wf.yml:4:13: unknown reference ${steps[0]}: an input name, steps[i].output|status|error "
        "or parallel_group.NAME.outputs|succeeded|failed|status",
        "steps:\n  - agent: a\n  - agent: b\n    prompt: >\n      use ${steps[0].output}\n",
    ),
    "unclosed reference": Case(
        "steps:\n  - agent: a\n    prompt: 'x ${target'\n",
        "wf.yml:3:16: unclosed or malformed reference '${target'",
        "steps:\n  - agent: a\n    prompt: 'x ${target}'\n",
        inputs={"target": "t"},
    ),
    "input with no value": Case(
        "steps:\n  - agent: a\n    inputs:\n      file: ${target}\n",
        "wf.yml:4:13: input 'target' has no value: --input target=VALUE, or ${... ?? default}",
        "steps:\n  - agent: a\n    inputs:\n      file: ${target ?? src}\n",
    ),
    "step input with no value": Case(
        "steps:\n  - agent: a\n    inputs:\n      file:\n",
        "wf.yml:4:12: input 'file' has no value",
        "steps:\n  - agent: a\n    inputs:\n      file: ''\n      other: x\n".replace("''", "x"),
    ),
    "inputs not a mapping": Case(
        "steps:\n  - agent: a\n    inputs: [x]\n",
        "wf.yml:3:13: inputs: is a mapping of names to values",
        "steps:\n  - agent: a\n    inputs: {x: 1}\n",
    ),
    "unknown step on_error": Case(
        "steps:\n  - agent: a\n    on_error: ignore\n",
        "wf.yml:3:15: unknown on_error 'ignore' (stop, continue, skip_dependents)",
        "steps:\n  - agent: a\n    on_error: continue\n",
    ),
    "unknown workflow on_error": Case(
        "on_error: retry\nsteps: [{agent: a}]\n",
        "wf.yml:1:11: unknown on_error 'retry' (stop, continue, skip_dependents)",
        "on_error: skip_dependents\nsteps: [{agent: a}]\n",
    ),
    "unknown execution": Case(
        "execution: fanout\nsteps: [{agent: a}]\n",
        "wf.yml:1:12: unknown execution 'fanout' (sequential, parallel, dag)",
        "execution: parallel\nsteps: [{agent: a}]\n",
    ),
    "split parallel group": Case(
        "steps:\n  - {agent: a, parallel_group: g}\n  - agent: b\n"
        "  - {agent: c, parallel_group: g}\n",
        "wf.yml:4:32: parallel group 'g' is split: its steps follow one another",
        "steps:\n  - {agent: a, parallel_group: g}\n"
        "  - {agent: c, parallel_group: g}\n  - agent: b\n",
    ),
    "reference inside its group": Case(
        "steps:\n  - {agent: a, parallel_group: g}\n"
        "  - {agent: b, parallel_group: g, prompt: '${steps[0].output}'}\n",
        "wf.yml:3:44: ${steps[0].output} is in this step's parallel group 'g', beside it",
        "steps:\n  - {agent: a, parallel_group: g}\n  - {agent: b, prompt: '${steps[0].output}'}\n",
    ),
    "unknown parallel group": Case(
        "steps:\n  - {agent: a, parallel_group: g}\n"
        "  - {agent: b, prompt: '${parallel_group.h.outputs}'}\n",
        "wf.yml:3:25: ${parallel_group.h.outputs}: there is no parallel group 'h'",
        "steps:\n  - {agent: a, parallel_group: g}\n"
        "  - {agent: b, prompt: '${parallel_group.g.outputs}'}\n",
    ),
    "reference to its own group": Case(
        "steps:\n  - {agent: a, parallel_group: g}\n"
        "  - {agent: b, parallel_group: g, prompt: '${parallel_group.g.status}'}\n",
        "wf.yml:3:44: ${parallel_group.g.status} is this step's own parallel group, running "
        "beside it",
        "steps:\n  - {agent: a, parallel_group: g}\n"
        "  - {agent: b, parallel_group: h, prompt: '${parallel_group.g.status}'}\n",
    ),
    "workflow step with inputs": Case(
        "steps:\n  - workflow: w\n    inputs: {x: 1}\n",
        "wf.yml:3:5: a workflow step takes no inputs: (nested workflows use the"
        " command-line inputs)",
        "steps:\n  - workflow: w\n    description: x is 1\n",
        texts={"w": "steps: [{agent: a}]"},
    ),
    "workflow name not a task id": Case(
        "steps:\n  - workflow: ../etc/passwd\n",
        "wf.yml:2:15: workflow '../etc/passwd' is not a task id ([A-Za-z0-9][A-Za-z0-9._-]{0,63})",
        "steps:\n  - workflow: etc.passwd\n",
        texts={"etc.passwd": "steps: [{agent: a}]"},
    ),
    "missing nested workflow": Case(
        "steps:\n  - agent: a\n  - workflow: billing\n",
        "wf.yml:3:15: no workflow named 'billing'",
        "steps:\n  - agent: a\n  - workflow: billing\n",
        good_texts={"billing": "steps: [{agent: biller}]"},
    ),
    "error in a nested workflow": Case(
        "steps:\n  - workflow: billing\n",
        "<billing>:2:5: unknown key 'agnet' in a step (agent, workflow, name, description, prompt, "
        "inputs, parallel_group, on_error)",
        "steps:\n  - workflow: billing\n",
        texts={"billing": "steps:\n  - agnet: biller\n"},
        good_texts={"billing": "steps:\n  - agent: biller\n"},
    ),
    "nested workflow cycle": Case(
        "steps:\n  - workflow: a\n",
        "<b>:3:15: workflows run in a cycle: a -> b -> a",
        "steps:\n  - workflow: a\n",
        texts={"a": "steps: [{workflow: b}]", "b": "steps:\n  - agent: x\n  - workflow: a\n"},
        good_texts={"a": "steps: [{workflow: b}]", "b": "steps:\n  - agent: x\n"},
    ),
    "a workflow running itself": Case(
        "steps:\n  - workflow: wf\n",
        "wf.yml:2:15: workflows run in a cycle: wf -> wf",
        "steps:\n  - workflow: wf2\n",
        texts={"wf": "steps: [{agent: a}]", "wf2": "steps: [{agent: a}]"},
    ),
    "anchor": Case(
        "defaults: &d {agent: a}\nsteps: [*d]\n",
        "wf.yml:1:11: anchors and aliases (& and *) are not accepted",
        "steps: [{agent: a}]\n",
    ),
    "nested too deep": Case(
        "steps: [{agent: a, inputs: {x: " + "[" * 70 + "]" * 70 + "}}]\n",
        "wf.yml:1:92: nested deeper than 64 levels",
        "steps: [{agent: a, inputs: {x: y}}]\n",
    ),
    "key not text": Case(
        "steps:\n  - agent: a\n    [x]: 1\n",
        "wf.yml:3:5: a key in a step is plain text",
        "steps:\n  - agent: a\n    name: '1'\n",
    ),
    "lone surrogate": Case(
        'steps:\n  - agent: "a\\ud800"\n',
        "wf.yml:2:12: agent holds a lone surrogate '\\ud800'",
        'steps:\n  - agent: "a\\u00e9"\n',
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_refusals_name_file_line_and_column(case: Case) -> None:
    with pytest.raises(InvalidInput) as caught:
        convert(case.bad, inputs=case.inputs, read=Reader(case.texts))
    assert str(caught.value) == case.message
    assert caught.value.exit_code == 2
    good_texts = case.texts if case.good_texts is None else case.good_texts
    convert(case.good, inputs=case.inputs, read=Reader(good_texts))


def test_a_bad_argument_is_refused_by_the_schema_naming_the_file() -> None:
    with pytest.raises(InvalidInput, match=r"^wf\.yml: \$\.task_id: "):
        convert("steps: [{agent: a}]", task_id="no spaces allowed")


def test_an_alias_bomb_is_refused_at_once() -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 12)]
    bomb = "\n".join(lines) + "\nsteps: [{agent: a, inputs: {x: *a11}}]\n"
    # Refused where the first anchor stands: expanded, the bomb would be 9**12 strings.
    with pytest.raises(InvalidInput, match=r"^wf\.yml:1:5: anchors and aliases"):
        convert(bomb)


# --- fuzz: a dict of valid plans or InvalidInput, never anything else ---------------------

SEEDS = [FULL_REVIEW, PARALLEL_SCAN, ON_ERROR_OVERRIDE, RUN_RESTAURANT, *RESTAURANT.values()]
YAMLISH = st.text(
    alphabet=st.sampled_from(
        [*"abcdsteps:-[]{}${}?&*!|>#'\"\n\t .,0123456789_", "\r", "\ud800", "\x00", "é"]
    ),
    max_size=200,
)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 12))
        text = text[:at] + draw(YAMLISH.filter(lambda s: len(s) < 20)) + text[at + cut :]
    return text


def check_fuzz(text: str, nested_texts: Mapping[str, str]) -> None:
    try:
        plans = to_plans(
            text,
            "f.yml",
            task_id="fuzz",
            created=CREATED,
            inputs={"target": "t", "channel": "c"},
            role="r",
            write_scope="none",
            read=Reader(nested_texts),
        )
    except InvalidInput as exc:
        message = str(exc)
        assert "\n" not in message
        assert message.split(":", 1)[0] in {"f.yml", *(f"<{n}>" for n in nested_texts)}
        return
    assert next(iter(plans)) == "fuzz"
    for made in plans.values():
        assert schemas.problem("plan", made) is None
        orjson.dumps(made)


@FAST
@given(
    st.one_of(YAMLISH, mutated()),
    st.dictionaries(st.sampled_from(list(RESTAURANT)), mutated(), max_size=3),
)
def test_fuzz_gives_plans_or_one_invalid_input_line(
    text: str, nested_texts: dict[str, str]
) -> None:
    check_fuzz(text, {**RESTAURANT, **nested_texts})


@st.composite
def workflows(draw: st.DrawFn) -> str:
    """Well-formed YAML of steps with random kinds, groups, names and references."""
    n = draw(st.integers(1, 6))
    refs = st.one_of(
        st.builds(
            lambda i, f: f"${{steps[{i}].{f}}}",
            st.integers(0, n),
            st.sampled_from(["output", "status"]),
        ),
        st.builds(lambda g: f"${{parallel_group.{g}.outputs}}", st.sampled_from("gh")),
        st.sampled_from(["${target}", "${nope ?? x}", "${nope}", "plain"]),
    )
    steps = []
    for _ in range(n):
        step: dict[str, Any] = (
            {"workflow": draw(st.sampled_from(["accounting", "cleaning", "wf"]))}
            if draw(st.booleans()) and draw(st.booleans())
            else {"agent": draw(st.sampled_from(["a", "b"])), "inputs": {"x": draw(refs)}}
        )
        if draw(st.booleans()):
            step["parallel_group"] = draw(st.sampled_from("gh"))
        if draw(st.booleans()):
            step["name"] = draw(st.sampled_from(["scan", "scan!", "Scan", "step-1"]))
        if draw(st.booleans()):
            step["on_error"] = draw(st.sampled_from(["stop", "continue", "skip_dependents"]))
        steps.append(step)
    top = {"steps": steps, "execution": draw(st.sampled_from(["sequential", "parallel", "dag"]))}
    return str(yaml.safe_dump(top, sort_keys=False))


@FAST
@given(workflows())
def test_fuzz_well_formed_workflows_give_acyclic_plans_or_a_refusal(text: str) -> None:
    try:
        plans = convert(text, inputs={"target": "t"}, read=Reader(RESTAURANT))
    except InvalidInput as exc:
        assert str(exc).startswith(("wf.yml:", "<")), exc
        return
    made = plans["wf"]
    ids = [s["id"] for s in made["subtasks"]]
    assert len(set(ids)) == len(ids)
    sorter = graphlib.TopologicalSorter({s["id"]: s["depends_on"] for s in made["subtasks"]})
    list(sorter.static_order())  # raises CycleError on a cycle
    if "execution: sequential" in text:
        for i, sub in enumerate(made["subtasks"]):
            assert all(ids.index(dep) < i for dep in sub["depends_on"])
