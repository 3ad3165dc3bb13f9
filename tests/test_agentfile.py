"""Agentfiles (seeds 001, 003) into plan.json documents: the seeds' examples, each statement,
every error at its file:line:column with a twin that imports, and fuzzing for any other exit."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base import schemas
from harness.base.errors import InvalidInput
from harness.importers.agentfile import to_plan

CREATED = "2026-01-01T00:00:00Z"
LABEL = "workflows/tdd/Agentfile"

# Seed 001's example, as the seed writes it.
SEED_001_DEPLOY = """NAME deploy-service
INPUT version, environment

SUPERVISED

GOAL "Build and test"
  run tests
  build docker image

SUPERVISED HUMAN
GOAL "Deploy to {environment}"
  push image to registry
  update kubernetes deployment
  verify health checks
"""

# Seed 001's sub-agent example, kept to the byte: a whitespace-only line, trailing blanks.
SEED_001_ORCHESTRATOR = "\n".join(
    [
        "NAME orchestrator",
        "",
        'GOAL "Analyze multiple repos"',
        "  spawn_agents:",
        '    - task: "Analyze repo A"',
        "      agent: code-reviewer",
        '    - task: "Analyze repo B"  ',
        "      agent: code-reviewer",
        '    - task: "Analyze repo C"',
        "      agent: code-reviewer",
        "  ",
        "  collect results",
        "  generate combined report",
        "",
    ]
)

# Seed 003 names a TDD workflow (its layout: agents/, goals/) without printing it; this one is
# made of the spec's own example lines, interleaved (its "Style B").
SEED_003_TDD = """# TDD, from seed 003's examples
NAME tdd
INPUT feature_request
INPUT max_iterations DEFAULT 5

AGENT creative FROM agents/creative.md
AGENT devils_advocate FROM agents/devils_advocate.md

GOAL analyze "Understand $feature_request" USING creative, devils_advocate
GOAL system_tests FROM goals/system_tests.md
GOAL unit_tests FROM goals/unit_tests.md
RUN design USING analyze, system_tests, unit_tests

GOAL run_tests "Run all tests and capture failures"
GOAL analyze_failures FROM goals/analyze_failures.md
GOAL fix FROM goals/fix.md
LOOP implement USING run_tests, analyze_failures, fix WITHIN $max_iterations
"""

# The other example lines of seed 003, definitions first (its "Style A").
SEED_003_STYLE_A = """AGENT creative FROM agents/creative.md
AGENT devils_advocate FROM agents/devils_advocate.md
GOAL analyze FROM goals/analyze.md USING creative, devils_advocate
GOAL run_tests "Run all tests and capture failures"
GOAL fix FROM goals/fix.md
LOOP repair USING run_tests, fix WITHIN 3
RUN review USING analyze
"""

FILES = {
    "agents/creative.md": "You propose bold designs.\n",
    "agents/devils_advocate.md": "You look for what breaks.\n",
    "goals/analyze.md": "# Analyze\n\nUnderstand the feature request.\n",
    "goals/system_tests.md": "Write system tests for\n$feature_request.\n",
    "goals/unit_tests.md": "Write unit tests that fail\nfor $analyze.\n",
    "goals/analyze_failures.md": "Find why the failing tests fail.\n",
    "goals/fix.md": "Fix the code\n  until the tests pass.\n",
    "goals/who.md": "Greet\n  the $who\n",
}


class Reader:
    """`read` over a dict, as the CLI's is over the repository; it records what was read."""

    def __init__(self, files: Mapping[str, str] = FILES) -> None:
        self.files = dict(files)
        self.calls: list[str] = []

    def __call__(self, path: str) -> str:
        self.calls.append(path)
        if path not in self.files:
            raise InvalidInput(f"{path}: no such regular file")
        return self.files[path]


def imported(
    text: str,
    inputs: Mapping[str, str] | None = None,
    *,
    label: str = LABEL,
    read: Any = None,
    write_scope: str | list[str] = "none",
) -> dict[str, Any]:
    doc = to_plan(
        text,
        label,
        task_id="t1",
        created=CREATED,
        inputs=inputs or {},
        role="localized-impl",
        write_scope=write_scope,
        read=read or Reader(),
    )
    assert_valid(doc)
    return doc


def assert_valid(doc: dict[str, Any]) -> None:
    """Valid against plan.schema.json; ids unique and every dependency on a subtask before
    it (so no cycle)."""
    schemas.validate("plan", doc, "imported")
    seen: set[str] = set()
    for sub in doc["subtasks"]:
        assert sub["id"] not in seen
        assert set(sub["depends_on"]) <= seen
        seen.add(sub["id"])


def failure(text: str, inputs: Mapping[str, str] | None = None, **kw: Any) -> str:
    with pytest.raises(InvalidInput) as caught:
        imported(text, inputs, **kw)
    return str(caught.value)


def sub(sid: str, goal: str, *deps: str, inputs: list[str] | None = None, **more: Any) -> Any:
    return {
        "id": sid,
        "role": "localized-impl",
        "goal": goal,
        "inputs": inputs or [],
        "acceptance": [],
        "write_scope": "none",
        "depends_on": list(deps),
        **more,
    }


def ids(doc: dict[str, Any]) -> list[str]:
    return [s["id"] for s in doc["subtasks"]]


def by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in doc["subtasks"]}


# -- the seeds' examples ---------------------------------------------------------------------


def test_seed_001_deploy_example_imports_to_the_whole_plan() -> None:
    doc = imported(SEED_001_DEPLOY, {"version": "1.4.2", "environment": "staging"})
    assert doc == {
        "task_id": "t1",
        "created": CREATED,
        "subtasks": [
            sub("goal-1", "Build and test run tests build docker image", supervised=True),
            sub(
                "goal-2",
                "Deploy to staging push image to registry update kubernetes deployment "
                "verify health checks",
                "goal-1",
                supervised="human",
            ),
        ],
    }


def test_seed_001_orchestrator_example_keeps_its_indented_lines_through_blank_ones() -> None:
    doc = imported(SEED_001_ORCHESTRATOR)
    assert doc["subtasks"] == [
        sub(
            "goal-1",
            'Analyze multiple repos spawn_agents: - task: "Analyze repo A" agent: code-reviewer'
            ' - task: "Analyze repo B" agent: code-reviewer - task: "Analyze repo C"'
            " agent: code-reviewer collect results generate combined report",
        )
    ]


def test_seed_003_tdd_example_imports_to_the_whole_plan() -> None:
    reader = Reader()
    doc = imported(SEED_003_TDD, {"feature_request": "password reset"}, read=reader)
    creative = "workflows/tdd/agents/creative.md"
    devil = "workflows/tdd/agents/devils_advocate.md"
    loop = {"max": 5, "until": "no_diff"}
    assert doc == {
        "task_id": "t1",
        "created": CREATED,
        "subtasks": [
            sub(
                "analyze-creative",
                f"Work as the persona in {creative} (agent creative): Understand password reset",
                inputs=[creative],
            ),
            sub(
                "analyze-devils_advocate",
                f"Work as the persona in {devil} (agent devils_advocate): "
                "Understand password reset",
                inputs=[devil],
            ),
            sub(
                "analyze",
                "Reconcile into one result what analyze-creative, analyze-devils_advocate did,"
                " each as its persona: Understand password reset",
                "analyze-creative",
                "analyze-devils_advocate",
            ),
            sub("system_tests", "Write system tests for password reset.", "analyze"),
            sub(
                "unit_tests",
                "Write unit tests that fail for the result of goal analyze.",
                "system_tests",
            ),
            sub("run_tests", "Run all tests and capture failures", "unit_tests", loop=loop),
            sub("analyze_failures", "Find why the failing tests fail.", "run_tests", loop=loop),
            sub("fix", "Fix the code until the tests pass.", "analyze_failures", loop=loop),
        ],
    }
    # Each file read once, by the path as the Agentfile writes it.
    assert sorted(reader.calls) == sorted(set(reader.calls))
    assert "agents/creative.md" in reader.calls


def test_seed_003_style_a_runs_statements_in_file_order_with_the_synthesis_last() -> None:
    doc = imported(SEED_003_STYLE_A, label="Agentfile")
    loop = {"max": 3, "until": "no_diff"}
    assert doc["subtasks"] == [
        sub("run_tests", "Run all tests and capture failures", loop=loop),
        sub("fix", "Fix the code until the tests pass.", "run_tests", loop=loop),
        sub(
            "analyze-creative",
            "Work as the persona in agents/creative.md (agent creative): "
            "# Analyze Understand the feature request.",
            "fix",
            inputs=["agents/creative.md"],
        ),
        sub(
            "analyze-devils_advocate",
            "Work as the persona in agents/devils_advocate.md (agent devils_advocate): "
            "# Analyze Understand the feature request.",
            "fix",
            inputs=["agents/devils_advocate.md"],
        ),
        sub(
            "analyze",
            "Reconcile into one result what analyze-creative, analyze-devils_advocate did, "
            "each as its persona: # Analyze Understand the feature request.",
            "analyze-creative",
            "analyze-devils_advocate",
        ),
    ]


# -- each statement --------------------------------------------------------------------------


def test_name_is_checked_then_dropped_from_the_plan() -> None:
    doc = imported('NAME deploy-service\nGOAL a "x"')
    assert set(doc) == {"task_id", "created", "subtasks"}
    assert ids(imported('NAME "with spaces"\nGOAL a "x"')) == ["a"]


def test_input_lists_defaults_and_given_values() -> None:
    text = (
        'INPUT a, b\nINPUT c DEFAULT word\nINPUT d DEFAULT "two words"\nINPUT e DEFAULT 7\n'
        'GOAL g "$a $b $c $d $e"'
    )
    doc = imported(text, {"a": "1", "b": "2", "e": "8"})
    assert doc["subtasks"][0]["goal"] == "1 2 word two words 8"


def test_input_declared_after_its_use_is_bound_first() -> None:
    assert imported('GOAL g "hi $who"\nINPUT who', {"who": "you"})["subtasks"][0]["goal"] == (
        "hi you"
    )


def test_agent_paths_resolve_against_the_agentfile_folder() -> None:
    text = 'AGENT c FROM ./agents/../agents/creative.md\nGOAL g "x" USING c'
    reader = Reader({"./agents/../agents/creative.md": "persona"})
    assert imported(text, label="a/b/Agentfile", read=reader)["subtasks"][0]["inputs"] == [
        "a/b/agents/creative.md"
    ]
    assert reader.calls == ["./agents/../agents/creative.md"]  # as written
    text = 'AGENT c FROM agents/creative.md\nGOAL g "x" USING c'
    assert imported(text, label="Agentfile")["subtasks"][0]["inputs"] == ["agents/creative.md"]
    quoted = 'AGENT c FROM "agents/creative.md"\nGOAL g "x" USING c'
    assert imported(quoted, label="Agentfile")["subtasks"][0]["inputs"] == ["agents/creative.md"]


def test_agent_path_up_a_folder_is_fine_while_inside_the_repository() -> None:
    reader = Reader({"../shared/p.md": "persona"})
    doc = imported('AGENT p FROM ../shared/p.md\nGOAL g "x" USING p', read=reader)
    assert doc["subtasks"][0]["inputs"] == ["workflows/shared/p.md"]


def test_goal_using_one_agent_is_one_subtask_with_the_persona() -> None:
    doc = imported('AGENT c FROM agents/creative.md\nGOAL g "Draw it" USING c', label="Agentfile")
    assert doc["subtasks"] == [
        sub(
            "g",
            "Work as the persona in agents/creative.md (agent c): Draw it",
            inputs=["agents/creative.md"],
        )
    ]


def test_goal_from_a_file_joins_its_lines_and_indented_lines_follow_it() -> None:
    doc = imported("GOAL f FROM goals/fix.md\n  and keep it green\n")
    assert doc["subtasks"][0]["goal"] == "Fix the code until the tests pass. and keep it green"


def test_unnamed_goal_from_a_file() -> None:
    assert imported("GOAL FROM goals/fix.md")["subtasks"][0]["id"] == "goal-1"


def test_run_orders_goals_and_chains_runs() -> None:
    text = 'GOAL a "A"\nGOAL b "B"\nGOAL c "C"\nRUN one USING c, a\nRUN two USING b'
    doc = imported(text)
    assert [(s["id"], s["depends_on"]) for s in doc["subtasks"]] == [
        ("c", []),
        ("a", ["c"]),
        ("b", ["a"]),
    ]


def test_goals_no_run_uses_come_after_in_file_order() -> None:
    doc = imported('GOAL a "A"\nGOAL b "B"\nGOAL c "C"\nRUN r USING b')
    assert [(s["id"], s["depends_on"]) for s in doc["subtasks"]] == [
        ("b", []),
        ("a", ["b"]),
        ("c", ["a"]),
    ]


def test_without_run_goals_run_in_file_order() -> None:
    assert ids(imported('GOAL z "Z"\nGOAL "unnamed"\nGOAL a "A"')) == ["z", "goal-2", "a"]


def test_a_goal_used_twice_gets_unique_ids() -> None:
    text = 'AGENT p FROM agents/creative.md\nAGENT q FROM agents/fix.md\nGOAL a "A"\n'
    text += 'GOAL b "B" USING p, q\nRUN r USING a, b, a\nLOOP l USING b WITHIN 2'
    reader = Reader({"agents/creative.md": "p", "agents/fix.md": "q"})
    doc = imported(text, read=reader)
    assert [(s["id"], s["depends_on"]) for s in doc["subtasks"]] == [
        ("a", []),
        ("b-p", ["a"]),
        ("b-q", ["a"]),
        ("b", ["b-p", "b-q"]),
        ("a-2", ["b"]),
        ("b-p-2", ["a-2"]),
        ("b-q-2", ["a-2"]),
        ("b-2", ["b-p-2", "b-q-2"]),
    ]
    assert [("loop" in s) for s in doc["subtasks"]] == [False] * 5 + [True] * 3


def test_long_names_are_cut_to_an_id_and_kept_unique() -> None:
    long = "g" + "o" * 80
    doc = imported(f'GOAL {long} "x"\nRUN r USING {long}, {long}')
    assert ids(doc) == [long[:64], long[:62] + "-2"]


def test_comments_blank_lines_and_crlf() -> None:
    text = '# top\r\n\r\nGOAL a "x # not a comment" # a comment\r\n   # indented comment\r\n'
    assert imported(text)["subtasks"][0]["goal"] == "x # not a comment"


def test_indented_statement_with_no_goal_open_is_a_statement() -> None:
    assert ids(imported('  NAME n\n  GOAL a "x"')) == ["a"]


def test_role_and_write_scope_go_on_every_subtask() -> None:
    scope = ["src/**", "tests/**"]
    doc = to_plan(
        'GOAL a "x"\nGOAL b "y"',
        LABEL,
        task_id="t1",
        created=CREATED,
        inputs={},
        role="reviewer",
        write_scope=scope,
        read=Reader(),
    )
    assert [(s["role"], s["write_scope"]) for s in doc["subtasks"]] == [("reviewer", scope)] * 2
    assert doc["subtasks"][0]["write_scope"] is not scope


# -- interpolation ---------------------------------------------------------------------------


def test_interpolation_forms() -> None:
    text = 'INPUT x DEFAULT X\nGOAL a "one"\nGOAL b "$x ${x}y {x} {other} $$x $1 ${ $ $a"'
    assert imported(text)["subtasks"][1]["goal"] == (
        "X Xy X {other} $x $1 ${ $ the result of goal a"
    )


def test_an_input_wins_over_a_goal_of_the_same_name() -> None:
    doc = imported('INPUT a DEFAULT in\nGOAL a "A"\nGOAL b "$a"')
    assert doc["subtasks"][1]["goal"] == "in"


def test_values_are_not_interpolated_again_and_their_newlines_become_spaces() -> None:
    doc = imported('INPUT x\nGOAL a "[$x]"', {"x": "$y\n{x}\r\nz"})
    assert doc["subtasks"][0]["goal"] == "[$y {x} z]"


def test_goal_files_are_interpolated() -> None:
    doc = imported("INPUT who\nGOAL g FROM goals/who.md", {"who": "world"})
    assert doc["subtasks"][0]["goal"] == "Greet the world"


# -- LOOP and SUPERVISED ---------------------------------------------------------------------


def test_loop_bound_as_a_number_or_a_variable() -> None:
    doc = imported('GOAL a "A"\nLOOP l USING a WITHIN 1000')
    assert doc["subtasks"][0]["loop"] == {"max": 1000, "until": "no_diff"}
    doc = imported('INPUT n\nGOAL a "A"\nLOOP l USING a WITHIN $n', {"n": " 007 "})
    assert doc["subtasks"][0]["loop"] == {"max": 7, "until": "no_diff"}


def test_supervised_before_any_goal_holds_for_every_subtask() -> None:
    text = 'SUPERVISED HUMAN\nAGENT p FROM agents/creative.md\nGOAL a "A" USING p\nGOAL b "B"'
    doc = imported(text)
    assert [s["supervised"] for s in doc["subtasks"]] == ["human", "human"]
    doc = imported('SUPERVISED\nGOAL a "A"\nGOAL b "B"')
    assert [s["supervised"] for s in doc["subtasks"]] == [True, True]


def test_supervised_after_a_goal_holds_for_the_next_goal_only_and_overrides() -> None:
    doc = imported('GOAL a "A"\nSUPERVISED\nGOAL b "B"\nGOAL c "C"')
    assert [s.get("supervised") for s in doc["subtasks"]] == [None, True, None]
    doc = imported('GOAL a "A"\nSUPERVISED HUMAN\nGOAL b "B"')
    assert [s.get("supervised") for s in doc["subtasks"]] == [None, "human"]
    doc = imported('SUPERVISED HUMAN\nGOAL a "A"\nSUPERVISED\nGOAL b "B"')
    assert [s.get("supervised") for s in doc["subtasks"]] == ["human", True]


def test_supervised_goal_with_several_agents_supervises_all_its_subtasks() -> None:
    reader = Reader({"p.md": "p", "q.md": "q"})
    text = 'AGENT p FROM p.md\nAGENT q FROM q.md\nGOAL a "A"\nSUPERVISED\nGOAL b "B" USING p, q'
    doc = imported(text, read=reader)
    assert [s.get("supervised") for s in doc["subtasks"]] == [None, True, True, True]


# -- errors: each at its place, each with a twin that imports ---------------------------------

# (id, text, inputs, the message after the label, a twin, its inputs)
ERRORS: list[tuple[str, str, dict[str, str], str, str, dict[str, str]]] = [
    (
        "unknown-keyword",
        'GOAL a "x"\n\nFOO bar',
        {},
        "3:1: unknown keyword 'FOO'",
        'GOAL a "x"\n\n# FOO bar',
        {},
    ),
    (
        "lower-case-keyword",
        'goal a "x"',
        {},
        "1:1: unknown keyword 'goal' (keywords are upper case)",
        'GOAL a "x"',
        {},
    ),
    (
        "keyword-not-a-statement",
        'GOAL a "x"\nUSING a',
        {},
        "2:1: USING does not start a statement",
        'GOAL a "x"\n# USING a',
        {},
    ),
    (
        "string-not-a-keyword",
        '"GOAL" a',
        {},
        '1:1: expected a keyword, found "GOAL"',
        'GOAL a "GOAL"',
        {},
    ),
    (
        "comma-not-a-keyword",
        ', GOAL a "x"',
        {},
        "1:1: expected a keyword, found ','",
        'GOAL a "x"',
        {},
    ),
    (
        "run-goal-never-defined",
        'GOAL a "x"\nRUN r USING a, b',
        {},
        "2:16: GOAL b is never defined",
        'GOAL a "x"\nGOAL b "y"\nRUN r USING a, b',
        {},
    ),
    (
        "run-goal-defined-later",
        'RUN r USING a\nGOAL a "x"',
        {},
        "1:13: GOAL a is defined only later, at line 2",
        'GOAL a "x"\nRUN r USING a',
        {},
    ),
    (
        "agent-never-defined",
        'GOAL a "x" USING p',
        {},
        "1:18: AGENT p is never defined",
        'AGENT p FROM agents/creative.md\nGOAL a "x" USING p',
        {},
    ),
    (
        "agent-defined-later",
        'GOAL a "x" USING p\nAGENT p FROM agents/creative.md',
        {},
        "1:18: AGENT p is defined only later, at line 2",
        'AGENT p FROM agents/creative.md\nGOAL a "x" USING p',
        {},
    ),
    (
        "agent-named-twice",
        'AGENT p FROM agents/creative.md\nGOAL a "x" USING p, p',
        {},
        "2:21: agent p is named twice",
        'AGENT p FROM agents/creative.md\nGOAL a "x" USING p',
        {},
    ),
    (
        "input-without-value",
        'INPUT version\nGOAL a "x"',
        {},
        "1:7: INPUT version has no value: give --input version=VALUE",
        'INPUT version\nGOAL a "x"',
        {"version": "1"},
    ),
    (
        "input-list-without-value",
        'INPUT a, b\nGOAL g "x"',
        {"a": "1"},
        "1:10: INPUT b has no value: give --input b=VALUE",
        'INPUT a\nINPUT b DEFAULT 2\nGOAL g "x"',
        {"a": "1"},
    ),
    (
        "input-not-declared",
        'GOAL a "x"',
        {"verison": "1"},
        "1:1: --input verison: the Agentfile declares no INPUT verison",
        'INPUT verison DEFAULT 0\nGOAL a "x"',
        {"verison": "1"},
    ),
    (
        "undefined-variable",
        'INPUT who DEFAULT me\nGOAL a "hello $whom"',
        {},
        "2:15: undefined variable $whom",
        'INPUT who DEFAULT me\nGOAL a "hello $who"',
        {},
    ),
    (
        "undefined-braced-variable",
        'GOAL a "x ${nope}"',
        {},
        "1:11: undefined variable $nope",
        'GOAL a "x $${nope}"',
        {},
    ),
    (
        "undefined-variable-in-indented-line",
        'GOAL "Build"\n    for $target',
        {},
        "2:9: undefined variable $target",
        'INPUT target DEFAULT all\nGOAL "Build"\n    for $target',
        {},
    ),
    (
        "undefined-variable-in-goal-file",
        "GOAL g FROM goals/who.md",
        {},
        "1:13: goals/who.md:2:7: undefined variable $who",
        "INPUT who DEFAULT you\nGOAL g FROM goals/who.md",
        {},
    ),
    (
        "unclosed-string",
        'GOAL a "x',
        {},
        "1:8: the string has no closing quote",
        'GOAL a "x"',
        {},
    ),
    (
        "goal-without-outcome",
        "GOAL a",
        {},
        "1:7: expected a quoted outcome or FROM <path>",
        'GOAL a "x"',
        {},
    ),
    (
        "goal-with-bare-outcome",
        "GOAL a b",
        {},
        "1:8: expected a quoted outcome or FROM <path>",
        'GOAL a "b"',
        {},
    ),
    (
        "goal-empty-outcome",
        'GOAL a "  "',
        {},
        "1:6: GOAL a has no outcome",
        'GOAL a " . "',
        {},
    ),
    (
        "goal-empty-after-interpolation",
        'INPUT x DEFAULT ""\nGOAL "$x"',
        {},
        "2:1: GOAL goal-1 has no outcome",
        'INPUT x DEFAULT ""\nGOAL "$x"',
        {"x": "something"},
    ),
    (
        "trailing-token",
        'GOAL a "x" extra',
        {},
        "1:12: unexpected 'extra'",
        'GOAL a "x" # extra',
        {},
    ),
    (
        "bad-name",
        'GOAL 2-tests "x"',
        {},
        "1:6: expected a goal name (a letter, then letters, digits, _ or -), found '2-tests'",
        'GOAL run-tests "x"',
        {},
    ),
    (
        "keyword-as-name",
        'GOAL USING "x"',
        {},
        "1:6: expected a goal name: USING is a keyword",
        'GOAL using "x"',
        {},
    ),
    (
        "trailing-comma",
        'INPUT a,\nGOAL g "x"',
        {},
        "1:9: expected an input name",
        'INPUT a\nGOAL g "x"',
        {"a": "1"},
    ),
    (
        "default-with-a-list",
        'INPUT a, b DEFAULT 1\nGOAL g "x"',
        {},
        "1:20: DEFAULT needs a single INPUT on its line",
        'INPUT a DEFAULT 1\nINPUT b DEFAULT 1\nGOAL g "x"',
        {},
    ),
    (
        "default-without-value",
        'INPUT a DEFAULT\nGOAL g "x"',
        {},
        "1:16: expected a DEFAULT value",
        'INPUT a DEFAULT ""\nGOAL g "x"',
        {},
    ),
    (
        "input-twice",
        'INPUT a DEFAULT 1\nINPUT b, a\nGOAL g "x"',
        {},
        "2:10: INPUT a is already declared at line 1",
        'INPUT a DEFAULT 1\nINPUT b\nGOAL g "x"',
        {"b": "2"},
    ),
    (
        "agent-twice",
        'AGENT p FROM agents/creative.md\nAGENT p FROM agents/fix.md\nGOAL g "x"',
        {},
        "2:7: AGENT p is already defined at line 1",
        'AGENT p FROM agents/creative.md\nAGENT q FROM agents/fix.md\nGOAL g "x"',
        {},
    ),
    (
        "goal-twice",
        'GOAL a "x"\nGOAL a "y"',
        {},
        "2:6: GOAL a is already defined at line 1",
        'GOAL a "x"\nGOAL b "y"',
        {},
    ),
    (
        "step-name-twice",
        'GOAL a "x"\nRUN r USING a\nLOOP r USING a WITHIN 2',
        {},
        "3:6: RUN or LOOP r is already at line 2",
        'GOAL a "x"\nRUN r USING a\nLOOP s USING a WITHIN 2',
        {},
    ),
    (
        "name-twice",
        'NAME a\nNAME b\nGOAL g "x"',
        {},
        "2:6: NAME is already given at line 1",
        'NAME a\nGOAL g "x"',
        {},
    ),
    (
        "run-without-using",
        'GOAL a "x"\nRUN r a',
        {},
        "2:7: expected USING, found 'a'",
        'GOAL a "x"\nRUN r USING a',
        {},
    ),
    (
        "run-list-without-comma",
        'GOAL a "x"\nGOAL b "y"\nRUN r USING a b',
        {},
        "3:15: unexpected 'b'",
        'GOAL a "x"\nGOAL b "y"\nRUN r USING a, b',
        {},
    ),
    (
        "loop-without-within",
        'GOAL a "x"\nLOOP l USING a',
        {},
        "2:15: expected WITHIN",
        'GOAL a "x"\nLOOP l USING a WITHIN 3',
        {},
    ),
    (
        "loop-within-a-word",
        'GOAL a "x"\nLOOP l USING a WITHIN three',
        {},
        "2:23: WITHIN needs a number or a $variable",
        'GOAL a "x"\nLOOP l USING a WITHIN 3',
        {},
    ),
    (
        "loop-within-zero",
        'GOAL a "x"\nLOOP l USING a WITHIN 0',
        {},
        "2:23: WITHIN needs a whole number from 1 to 1000",
        'GOAL a "x"\nLOOP l USING a WITHIN 1',
        {},
    ),
    (
        "loop-within-too-many",
        'GOAL a "x"\nLOOP l USING a WITHIN 99999999999999999999',
        {},
        "2:23: WITHIN needs a whole number from 1 to 1000",
        'GOAL a "x"\nLOOP l USING a WITHIN 0001000',
        {},
    ),
    (
        "loop-within-variable-not-a-number",
        'INPUT n\nGOAL a "x"\nLOOP l USING a WITHIN $n',
        {"n": "many"},
        "3:23: $n is 'many', not a whole number from 1 to 1000",
        'INPUT n\nGOAL a "x"\nLOOP l USING a WITHIN $n',
        {"n": "4"},
    ),
    (
        "loop-within-undefined-variable",
        'GOAL a "x"\nLOOP l USING a WITHIN $n',
        {},
        "2:23: undefined variable $n",
        'INPUT n DEFAULT 2\nGOAL a "x"\nLOOP l USING a WITHIN $n',
        {},
    ),
    (
        "supervised-with-no-goal-after",
        'GOAL a "x"\nSUPERVISED HUMAN\nRUN r USING a',
        {},
        "2:1: SUPERVISED applies to the next GOAL, and none follows",
        'SUPERVISED HUMAN\nGOAL a "x"\nRUN r USING a',
        {},
    ),
    (
        "supervised-twice-for-a-goal",
        'GOAL a "x"\nSUPERVISED\nSUPERVISED HUMAN\nGOAL b "y"',
        {},
        "3:1: SUPERVISED is already given at line 2",
        'GOAL a "x"\nSUPERVISED HUMAN\nGOAL b "y"',
        {},
    ),
    (
        "supervised-twice-for-the-workflow",
        'SUPERVISED\nSUPERVISED\nGOAL a "x"',
        {},
        "2:1: SUPERVISED is already given for the whole workflow",
        'SUPERVISED\nGOAL a "x"',
        {},
    ),
    (
        "supervised-with-a-word",
        'SUPERVISED BY_HUMAN\nGOAL a "x"',
        {},
        "1:12: unexpected 'BY_HUMAN'",
        'SUPERVISED HUMAN\nGOAL a "x"',
        {},
    ),
    (
        "missing-goal-file",
        "GOAL g FROM goals/nope.md",
        {},
        "1:13: goals/nope.md: no such regular file",
        "GOAL g FROM goals/fix.md",
        {},
    ),
    (
        "missing-agent-file",
        'AGENT p FROM agents/nope.md\nGOAL g "x"',
        {},
        "1:14: agents/nope.md: no such regular file",
        'AGENT p FROM agents/creative.md\nGOAL g "x"',
        {},
    ),
    (
        "absolute-path",
        'AGENT p FROM /etc/passwd\nGOAL g "x"',
        {},
        "1:14: /etc/passwd: a path must be relative to the Agentfile",
        'AGENT p FROM agents/creative.md\nGOAL g "x"',
        {},
    ),
    (
        "path-out-of-the-repository",
        'AGENT p FROM ../../../x.md\nGOAL g "x"',
        {},
        "1:14: ../../../x.md: leaves the repository",
        'AGENT p FROM ../tdd/agents/creative.md\nGOAL g "x"',
        {},
    ),
    (
        "from-without-path",
        'AGENT p FROM\nGOAL g "x"',
        {},
        "1:13: expected a path",
        'AGENT p FROM agents/creative.md\nGOAL g "x"',
        {},
    ),
    (
        "no-goal",
        "NAME empty\n# nothing else",
        {},
        "1:1: no GOAL: there is nothing to import",
        "NAME empty\nGOAL g FROM goals/fix.md",
        {},
    ),
    (
        "empty-file",
        "",
        {},
        "1:1: no GOAL: there is nothing to import",
        'GOAL "x"',
        {},
    ),
]


@pytest.mark.parametrize(
    ("text", "inputs", "message", "twin", "twin_inputs"),
    [pytest.param(*case[1:], id=case[0]) for case in ERRORS],
)
def test_every_error_names_its_place_and_its_twin_imports(
    text: str,
    inputs: dict[str, str],
    message: str,
    twin: str,
    twin_inputs: dict[str, str],
) -> None:
    reader = Reader({**FILES, "../tdd/agents/creative.md": "p", "agents/fix.md": "q"})
    assert failure(text, inputs, read=reader) == f"{LABEL}:{message}"
    assert imported(twin, twin_inputs, read=reader)["subtasks"]


def test_a_read_that_fails_otherwise_is_one_line_at_the_path() -> None:
    def broken(path: str) -> str:
        raise OSError(f"{path}: permission denied\nsecond line")

    message = failure('AGENT p FROM "a b.md"\nGOAL g "x"', read=broken)
    assert message == f"{LABEL}:1:14: a b.md: permission denied second line"


def test_arguments_the_plan_cannot_hold_are_refused_too() -> None:
    with pytest.raises(InvalidInput, match=r"^workflows/tdd/Agentfile: \$\.task_id"):
        to_plan(
            'GOAL a "x"',
            LABEL,
            task_id="not an id",
            created=CREATED,
            inputs={},
            role="r",
            write_scope="none",
            read=Reader(),
        )


# -- fuzzing: a dict or InvalidInput, never anything else -------------------------------------

EXAMPLES = [
    (SEED_001_DEPLOY, {"version": "1", "environment": "staging"}),
    (SEED_001_ORCHESTRATOR, {}),
    (SEED_003_TDD, {"feature_request": "login"}),
    (SEED_003_STYLE_A, {}),
]
FRAGMENTS = [
    *("NAME ", "INPUT ", "DEFAULT ", "AGENT ", "FROM ", "GOAL ", "USING ", "RUN ", "LOOP "),
    *("WITHIN ", "SUPERVISED", "HUMAN", "\n", "\r\n", "  ", ", ", '"', "#", "$", "${", "{"),
    *("}", "$$", "a", "b", "goal-1", "0", "7", "$n", "agents/creative.md", "goals/who.md"),
    *("../", "/", "\t", "\u2028", "\x00", "\x85", "é", "9" * 5000),
]
MESSAGE = re.compile(rf"{re.escape(LABEL)}:[1-9][0-9]*:[1-9][0-9]*: [^\n\r]+")


def outcome(text: str, inputs: Mapping[str, str]) -> None:
    try:
        doc = to_plan(
            text,
            LABEL,
            task_id="t1",
            created=CREATED,
            inputs=inputs,
            role="localized-impl",
            write_scope="none",
            read=Reader(),
        )
    except InvalidInput as exc:
        assert MESSAGE.fullmatch(str(exc)), str(exc)
        return
    assert_valid(doc)


INPUTS = st.dictionaries(
    st.sampled_from(["version", "environment", "feature_request", "n", "who", "x"]),
    st.sampled_from(["", "1", "staging", "$x", "{who}", "a\nb"]),
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=40).map("".join),
    INPUTS,
)
def test_fuzz_any_text_gives_a_plan_or_one_located_line(text: str, inputs: dict[str, str]) -> None:
    outcome(text, inputs)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(EXAMPLES),
    st.lists(
        st.tuples(
            st.sampled_from(["insert", "delete", "replace", "duplicate-line", "drop-line"]),
            st.integers(min_value=0, max_value=10_000),
            st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3)),
        ),
        max_size=6,
    ),
)
def test_fuzz_mutated_seed_examples_give_a_plan_or_one_located_line(
    example: tuple[str, dict[str, str]], edits: list[tuple[str, int, str]]
) -> None:
    text, inputs = example
    for kind, at, piece in edits:
        lines = text.split("\n")
        where = at % (len(text) + 1)
        row = at % len(lines)
        if kind == "insert":
            text = text[:where] + piece + text[where:]
        elif kind == "delete":
            text = text[:where] + text[where + len(piece) + 1 :]
        elif kind == "replace":
            text = text[:where] + piece + text[where + len(piece) :]
        elif kind == "duplicate-line":
            text = "\n".join([*lines[: row + 1], lines[row], *lines[row + 1 :]])
        else:
            text = "\n".join(lines[:row] + lines[row + 1 :])
    outcome(text, inputs)
