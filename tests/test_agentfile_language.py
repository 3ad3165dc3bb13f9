"""The Agentfile project's language as its repository writes it today, into plan.json: each
construct harness maps, each it refuses naming why, every error at its place with a twin
that imports, and fuzzing of its forms for any other exit."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .test_agentfile import FILES, FRAGMENTS, LABEL, Reader, failure, imported, outcome

AGENTS = {**FILES, "agents/a.md": "You are careful.\n", "skills/review/SKILL.md": "Review.\n"}


def subs(text: str, inputs: dict[str, str] | None = None) -> list[dict[str, Any]]:
    doc: dict[str, Any] = imported(text, inputs, read=Reader(AGENTS))
    subtasks: list[dict[str, Any]] = doc["subtasks"]
    return subtasks


def test_triple_quoted_strings_span_lines_without_their_edge_newlines() -> None:
    text = 'NAME x\nGOAL g """\n  Fix the bug.\n\n  Keep it "green".\n"""\nRUN r USING g\n'
    assert [s["goal"] for s in subs(text)] == ['Fix the bug. Keep it "green".']
    assert subs('GOAL g """one""" SUPERVISED')[0]["goal"] == "one"


def test_one_line_strings_take_the_projects_escapes() -> None:
    text = r'GOAL g "say \"hi\"\tthen\\now \q"'
    assert subs(text)[0]["goal"] == 'say "hi" then\\now \\q'


def test_hyphenated_names_version_workflow_and_then() -> None:
    text = (
        'WORKFLOW my-flow\nVERSION 1.0.0\nGOAL fetch-all "a"\nGOAL sum-up "b"\n'
        'GOAL last "c"\nRUN main USING fetch-all, sum-up THEN last\n'
    )
    assert [(s["id"], s["depends_on"]) for s in subs(text)] == [
        ("fetch-all", []),
        ("sum-up", ["fetch-all"]),
        ("last", ["sum-up"]),
    ]


def test_input_defaults_as_an_assignment_or_a_string() -> None:
    text = 'INPUT a="x y"\nINPUT b=z\nINPUT c "w"\nINPUT d DEFAULT 1\nGOAL g "$a $b $c $d"'
    assert subs(text)[0]["goal"] == "x y z w 1"
    assert subs(text, {"a": "given"})[0]["goal"] == "given z w 1"


def test_inline_agents_and_output_fields() -> None:
    text = (
        'INPUT topic DEFAULT tea\nAGENT r "Research $topic" -> findings\n'
        'GOAL g "Study $topic" -> summary USING r\nGOAL h "Use $findings and $summary"'
    )
    first, second = subs(text)
    assert first["goal"] == (
        'Work as agent r, whose persona is "Research tea". Your goal: Study tea; report its '
        "results as: summary; report its results as: findings"
    )
    assert first["inputs"] == []
    assert second["goal"] == "Use the findings from agent r and the summary from goal g"


def test_requires_names_the_registry_agent_of_the_agents_subtasks() -> None:
    text = (
        'AGENT a FROM agents/a.md REQUIRES "reasoning-heavy"\nAGENT b "Check"\n'
        'GOAL g "x" USING a, b'
    )
    assert [(s["id"], s.get("agent")) for s in subs(text)] == [
        ("g-a", "reasoning-heavy"),
        ("g-b", None),
        ("g", None),
    ]


def test_a_skill_folder_is_its_skill_md() -> None:
    (sub,) = subs('AGENT r FROM skills/review\nGOAL g "x" USING r')
    assert sub["inputs"] == ["workflows/tdd/skills/review/SKILL.md"]


def test_converge_is_a_loop_with_its_own_bound() -> None:
    text = 'INPUT n DEFAULT 4\nCONVERGE c "Polish" WITHIN $n\nCONVERGE d "More" WITHIN 2 SUPERVISED'
    assert [(s["loop"], s.get("supervised")) for s in subs(text)] == [
        ({"max": 4, "until": "no_diff"}, None),
        ({"max": 2, "until": "no_diff"}, True),
    ]


def test_clauses_after_the_outcome_come_in_any_order() -> None:
    text = (
        'AGENT a FROM agents/a.md\nGOAL g "x" UNSUPERVISED USING a\n'
        'GOAL h "y" SUPERVISED -> out\nGOAL i -> z "w"'
    )
    assert [(s["id"], s.get("supervised")) for s in subs(text)] == [
        ("g", False),
        ("h", True),
        ("i", None),
    ]


def test_a_named_goal_may_take_its_text_from_indented_lines() -> None:
    assert subs("GOAL research\n  Research {topic}\n  thoroughly.")[0]["goal"] == (
        "Research {topic} thoroughly."
    )


def test_the_nearest_mode_wins_agent_goal_run_workflow() -> None:
    text = (
        'SUPERVISED\nAGENT a FROM agents/a.md SUPERVISED HUMAN\nAGENT b "B"\n'
        'GOAL g "x" USING a, b\nGOAL h "y" UNSUPERVISED\nGOAL i "z"\n'
        "RUN r USING g, h\nRUN s USING i UNSUPERVISED\n"
    )
    assert [(s["id"], s["supervised"]) for s in subs(text)] == [
        ("g-a", "human"),
        ("g-b", True),
        ("g", True),
        ("h", False),
        ("i", False),
    ]


def test_security_default_is_dropped() -> None:
    assert subs('SECURITY default\nGOAL g "x"')[0]["goal"] == "x"


# (id, text, the message after the label, a twin)
ERRORS: list[tuple[str, str, str, str]] = [
    (
        "security-research",
        'SECURITY research "lab"\nGOAL g "x"',
        "1:1: SECURITY research: harness has no mode that lets security research through "
        "within a declared scope; its workers run contained whatever the scope says",
        'SECURITY default\nGOAL g "x"',
    ),
    (
        "security-paranoid",
        'GOAL g "x"\nSECURITY paranoid',
        "2:1: SECURITY paranoid: harness has no per-tool-call verification to make stricter "
        "(its workers run sandboxed, and every diff is gated, in every plan)",
        'GOAL g "x"\nSECURITY default',
    ),
    (
        "security-unknown",
        'SECURITY lax\nGOAL g "x"',
        "1:10: SECURITY needs default, paranoid or research (a mode)",
        'SECURITY default\nGOAL g "x"',
    ),
    (
        "skill-by-name",
        'AGENT r FROM testing\nGOAL g "x" USING r',
        "1:14: AGENT r FROM testing: testing/SKILL.md: no such regular file (a skill is its "
        "folder's SKILL.md; harness searches no skills.paths for one by name)",
        'AGENT r FROM skills/review\nGOAL g "x" USING r',
    ),
    (
        "unsupervised-under-human",
        'SUPERVISED HUMAN\nGOAL g "x" UNSUPERVISED',
        "2:6: UNSUPERVISED: GOAL g cannot be unsupervised when the workflow is SUPERVISED HUMAN",
        'SUPERVISED HUMAN\nGOAL g "x" SUPERVISED',
    ),
    (
        "unclosed-triple",
        'GOAL a "x"\nGOAL g """\nnever closed',
        '2:8: the """ string has no closing """',
        'GOAL a "x"\nGOAL g """\nclosed\n"""',
    ),
    (
        "variable-in-triple",
        'GOAL g """\nline one\n  and $nope\n"""',
        "3:7: undefined variable $nope",
        'INPUT nope DEFAULT 1\nGOAL g """\nline one\n  and $nope\n"""',
    ),
    (
        "variable-after-an-escape",
        r'GOAL g "say \"$nope\""',
        "1:15: undefined variable $nope",
        r'GOAL g "say \"$$nope\""',
    ),
    (
        "after-a-triple",
        'GOAL g """\nx\n""" extra',
        "3:5: unexpected 'extra'",
        'GOAL g """\nx\n""" # extra',
    ),
    (
        "converge-without-within",
        'CONVERGE c "x"',
        "1:15: expected WITHIN",
        'CONVERGE c "x" WITHIN 3',
    ),
    (
        "clause-twice",
        'AGENT a FROM agents/a.md\nGOAL g "x" USING a USING a',
        "2:20: unexpected 'USING'",
        'AGENT a FROM agents/a.md\nGOAL g "x" USING a',
    ),
    (
        "requires-not-an-agent-id",
        'AGENT a FROM agents/a.md REQUIRES "../x"\nGOAL g "x" USING a',
        "1:35: REQUIRES needs a quoted profile that can name a registry agent (a letter or "
        "digit, then letters, digits, ., _ or -)",
        'AGENT a FROM agents/a.md REQUIRES "x"\nGOAL g "x" USING a',
    ),
    (
        "agent-without-source",
        'AGENT a to\nGOAL g "x"',
        "1:9: expected FROM, found 'to'",
        'AGENT a "to"\nGOAL g "x"',
    ),
    (
        "bad-assignment",
        'INPUT 1x="v"\nGOAL g "x"',
        "1:7: expected an input name (a letter, then letters, digits, _ or -), found '1x'",
        'INPUT x="v"\nGOAL g "x"',
    ),
    (
        "version-twice",
        'VERSION 1\nVERSION 2\nGOAL g "x"',
        "2:9: VERSION is already given at line 1",
        'VERSION 1\nGOAL g "x"',
    ),
    (
        "workflow-and-name",
        'NAME a\nWORKFLOW b\nGOAL g "x"',
        "2:10: WORKFLOW is already given at line 1",
        'WORKFLOW b\nGOAL g "x"',
    ),
]


@pytest.mark.parametrize(
    ("text", "message", "twin"), [pytest.param(*case[1:], id=case[0]) for case in ERRORS]
)
def test_every_error_names_its_place_and_its_twin_imports(
    text: str, message: str, twin: str
) -> None:
    assert failure(text, read=Reader(AGENTS)) == f"{LABEL}:{message}"
    assert imported(twin, read=Reader(AGENTS))["subtasks"]


# -- fuzzing the current forms: a dict or InvalidInput, never anything else -----------------

CURRENT = (
    'NAME x-y\nINPUT t="v"\nAGENT a "A $t" -> f REQUIRES "p"\nAGENT b FROM agents/creative.md\n'
)
CURRENT += 'GOAL g """\n  Do $t\n""" -> o USING a, b SUPERVISED\nCONVERGE c "\\"$f\\"" WITHIN 3\n'
CURRENT += "RUN r USING g THEN c UNSUPERVISED\n"
NEW_FRAGMENTS = [
    *('"""', "->", "CONVERGE ", "REQUIRES ", "THEN ", "UNSUPERVISED", "SECURITY ", "="),
    *("\\", '\\"', "VERSION ", "WORKFLOW ", "skills/review", "fetch-all", "$o", "-"),
]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10_000),
            st.sampled_from([*FRAGMENTS, *NEW_FRAGMENTS]),
            st.booleans(),
        ),
        max_size=6,
    )
)
def test_fuzz_mutated_current_forms_give_a_plan_or_one_located_line(
    edits: list[tuple[int, str, bool]],
) -> None:
    text = CURRENT
    for at, piece, insert in edits:
        where = at % (len(text) + 1)
        text = text[:where] + piece + text[where + (0 if insert else len(piece)) :]
    outcome(text, {})
