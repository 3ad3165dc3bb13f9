"""The Agentfile project's own 177 Agentfiles (tests/data/agentfile-project, vendored
unmodified): each imported in process, or refused naming the one construct harness cannot
express; a plan for each language feature harness maps imported and run end to end through
the real CLI with the scripted worker; and hostile Agentfiles refused with nothing written."""

from __future__ import annotations

import posixpath
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.base import schemas
from harness.base.errors import InvalidInput
from harness.importers import agentfile, importing

from .conftest import Sample, ok
from .test_importing import import_, plan_of, snapshot

CORPUS = Path(__file__).parent / "data" / "agentfile-project"
CREATED = "2026-01-01T00:00:00Z"
_NO_VALUE = re.compile(r"INPUT (\S+) has no value: give --input ")
# The constructs a refusal may name: what harness cannot express yet.
CONSTRUCTS = ("SECURITY research:", "SECURITY paranoid:", "AGENT ", "UNSUPERVISED:")


def agentfiles() -> list[str]:
    return sorted(
        p.relative_to(CORPUS).as_posix()
        for p in CORPUS.rglob("*")
        if p.is_file() and (p.name == "Agentfile" or p.suffix == ".agent")
    )


def import_in_process(label: str) -> tuple[dict[str, Any] | None, str, dict[str, str]]:
    """The plan of one Agentfile, or its refusal's message (after its place); a required
    INPUT is given the value `example`, as a person would give one with --input."""
    folder = posixpath.dirname(label)

    def read(rel: str) -> str:
        found = importing.read_text(CORPUS, posixpath.normpath(posixpath.join(folder, rel)))
        if found is None:
            raise InvalidInput(f"{rel}: no such file")
        return found

    text = importing.read_text(CORPUS, label)
    assert text is not None
    given: dict[str, str] = {}
    while True:
        try:
            doc = agentfile.to_plan(
                text,
                label,
                task_id="t",
                created=CREATED,
                inputs=given,
                role="localized-impl",
                write_scope="none",
                read=read,
            )
            return doc, "", given
        except InvalidInput as exc:
            message = str(exc)
            missing = _NO_VALUE.search(message)
            if missing is None:
                assert message.startswith(f"{label}:") and "\n" not in message, message
                return None, message.split(": ", 1)[1], given
            given[missing.group(1)] = "example"


def test_the_corpus_is_the_projects_177_agentfiles() -> None:
    names = agentfiles()
    assert len(names) == 177
    assert sum(name.endswith("/Agentfile") for name in names) == 6


def test_every_agentfile_imports_or_is_refused_naming_its_construct() -> None:
    imported, refused = 0, Counter[str]()
    for label in agentfiles():
        doc, refusal, _ = import_in_process(label)
        if doc is None:
            construct = next((c for c in CONSTRUCTS if refusal.startswith(c)), None)
            assert construct is not None, f"{label}: {refusal}"
            refused[construct.rstrip(": ")] += 1
            continue
        schemas.validate("plan", doc, label)
        assert doc["subtasks"]
        imported += 1
    assert (imported, dict(refused)) == (172, {"SECURITY research": 5})


def test_the_refusal_says_why() -> None:
    _, refusal, _ = import_in_process("examples/agent/security-research/ctf-solver.agent")
    assert refusal == (
        "SECURITY research: harness has no mode that lets security research through within "
        "a declared scope; its workers run contained whatever the scope says"
    )


def test_the_current_languages_constructs_map_as_documented() -> None:
    doc, _, _ = import_in_process("examples/agent/packaged/code-reviewer/Agentfile")
    assert doc is not None
    subtasks = {s["id"]: s for s in doc["subtasks"]}
    # REQUIRES names the registry agent; a hyphenated name is a name; THEN orders.
    assert subtasks["review"]["agent"] == "reasoning-heavy"
    assert subtasks["style"]["agent"] == "fast"
    assert subtasks["style"]["inputs"] == [
        "examples/agent/packaged/code-reviewer/agents/style-checker.md"
    ]
    assert subtasks["synthesize"]["depends_on"] == ["style"]
    doc, _, _ = import_in_process("examples/agent/44-converge-simple.agent")
    assert doc is not None
    (summarize,) = doc["subtasks"]
    assert summarize["loop"] == {"max": 3, "until": "no_diff"}
    assert summarize["goal"] == (
        "Summarize in 100 words or less: example Refine once for clarity. CONVERGED after one "
        "good revision.; report its results as: summary"
    )
    doc, _, _ = import_in_process("examples/agent/security/encoded-detection.agent")
    assert doc is not None
    assert doc["subtasks"][0]["id"] == "goal-1"


# -- end to end: imported and run with the scripted worker, one plan per mapped feature ------

# (the Agentfile, its --input values, what the run proves)
RUNS = [
    ("examples/agent/07-recipe-creator.agent", ["ingredients=eggs"], "a GOAL chain, defaults"),
    ("examples/agent/security/encoded-detection.agent", [], 'INPUT x="v", an unnamed GOAL'),
    ("examples/agent/38-multi-agent-structured/Agentfile", ["topic=tea"], "inline AGENTs, ->"),
    ("examples/agent/44-converge-simple.agent", ["content=text"], "CONVERGE as a loop"),
    ("examples/agent/packaged/code-reviewer/Agentfile", ["code_path=src"], "REQUIRES, VERSION"),
    ("examples/agent/memory/simple-memory.agent", [], "WORKFLOW, triple-quoted strings"),
]


def vendor(sample: Sample, label: str) -> None:
    """The Agentfile and every file its import reads, at the same paths in the repository."""
    doc, _, _ = import_in_process(label)
    assert doc is not None
    needed = {label, *(path for s in doc["subtasks"] for path in s["inputs"])}
    for rel in needed:
        (sample.root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CORPUS / rel, sample.root / rel)


@pytest.mark.e2e
@pytest.mark.parametrize(("label", "inputs", "feature"), RUNS, ids=[r[2] for r in RUNS])
def test_an_imported_agentfile_runs_end_to_end(
    sample: Sample, label: str, inputs: list[str], feature: str
) -> None:
    vendor(sample, label)
    registry = sample.read_json("ai/agents/registry.json")
    scripted = registry["agents"][0]
    # The profiles REQUIRES names, as registry agents: the same scripted worker.
    registry["agents"] += [
        {**scripted, "id": name, "args": [*scripted["args"], "--agent-id", name]}
        for name in ("reasoning-heavy", "fast")
    ]
    sample.write_json("ai/agents/registry.json", registry)
    sample.commit_all("the Agentfile, the files it names, the profiles' agents")
    given = [arg for value in inputs for arg in ("--input", value)]
    code, _, err = import_(sample, sample.root / label, "af", *given)
    assert code == 0, err
    subtasks = plan_of(sample, "af")["subtasks"]
    assert isinstance(subtasks, list)
    sample.write_script([ok(s["id"]) for s in subtasks])
    assert sample.cli("plan", "validate", "af").returncode == 0
    res = sample.cli("run", "af")
    assert res.returncode == 0, res.stderr
    assert sample.names("af")[-1] == "task_completed"
    audit = sample.cli("audit", "af")
    assert audit.returncode == 0, audit.stdout + audit.stderr


# -- hostile Agentfiles: exit 2, one line, nothing written; each with a twin that imports ----

HOSTILE: dict[str, tuple[bytes, bytes, str]] = {
    # case: (the hostile text, its twin, what the one line says)
    "unterminated triple quote": (
        b'NAME x\nGOAL g """\nnever closed\n',
        b'NAME x\nGOAL g """\nclosed\n"""\n',
        'workflows/Agentfile:2:8: the """ string has no closing """',
    ),
    "10 MB line": (
        b'GOAL g "' + b"x" * 10_000_000 + b'"\n',
        b'GOAL g "' + b"x" * 10_000 + b'"\n',
        "workflows/Agentfile: larger than 1000000 bytes",
    ),
    "NUL bytes": (
        b'GOAL g "fix\0 it"\n',
        b'GOAL g "fix it"\n',
        "workflows/Agentfile: holds a NUL byte",
    ),
    "agent path out of the repository": (
        b'AGENT a FROM ../../../../etc/passwd.md\nGOAL g "x" USING a\n',
        b'AGENT a FROM agents/a.md\nGOAL g "x" USING a\n',
        "workflows/Agentfile:1:14: ../../../../etc/passwd.md: leaves the repository",
    ),
    "skill folder out of the repository": (
        b'AGENT a FROM ../../skills\nGOAL g "x" USING a\n',
        b'AGENT a FROM skills/s\nGOAL g "x" USING a\n',
        "workflows/Agentfile:1:14: ../../skills: leaves the repository",
    ),
    "REQUIRES that names no agent": (
        b'AGENT a FROM agents/a.md REQUIRES "../../ai/agents"\nGOAL g "x" USING a\n',
        b'AGENT a FROM agents/a.md REQUIRES "reasoning-heavy"\nGOAL g "x" USING a\n',
        "workflows/Agentfile:1:35: REQUIRES needs a quoted profile that can name a registry agent",
    ),
    "SECURITY research": (
        b'SECURITY research "the lab"\nGOAL g "x"\n',
        b'SECURITY default\nGOAL g "x"\n',
        "workflows/Agentfile:1:1: SECURITY research: harness has no mode",
    ),
}


@pytest.mark.e2e
@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_agentfile_is_refused_with_nothing_written(
    sample: Sample, case: str, hostile: bool
) -> None:
    text, twin, said = HOSTILE[case]
    (sample.root / "workflows/agents").mkdir(parents=True)
    (sample.root / "workflows/agents/a.md").write_text("You are careful.\n")
    (sample.root / "workflows/skills/s").mkdir(parents=True)
    (sample.root / "workflows/skills/s/SKILL.md").write_text("Review code.\n")
    source = sample.root / "workflows/Agentfile"
    source.write_bytes(text if hostile else twin)
    before = snapshot(sample.root)
    code, out, err = import_(sample, source, "t")
    if not hostile:
        assert code == 0, err
        assert out == "wrote ai/tasks/t/plan.json\n"
        return
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"harness: {said}"), err
    assert snapshot(sample.root) == before
