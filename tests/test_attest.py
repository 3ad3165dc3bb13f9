"""`harness attest`: an in-toto Statement of the demo task, checked against git and disk."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from .conftest import Sample, completed_demo

DIGEST = {"type": "object", "minProperties": 1, "additionalProperties": {"type": "string"}}
DESCRIPTOR = {
    "type": "object",
    "anyOf": [{"required": ["uri"]}, {"required": ["digest"]}],
    "properties": {
        "name": {"type": "string"},
        "uri": {"type": "string"},
        "digest": DIGEST,
        "annotations": {"type": "object"},
    },
    "additionalProperties": False,
}
TIMESTAMP = {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"}
# in-toto Statement v1 with SLSA provenance v1, as far as the specifications require.
STATEMENT_SCHEMA = {
    "type": "object",
    "required": ["_type", "subject", "predicateType", "predicate"],
    "additionalProperties": False,
    "properties": {
        "_type": {"const": "https://in-toto.io/Statement/v1"},
        "subject": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["name", "digest"],
                "properties": {"name": {"type": "string"}, "digest": DIGEST},
            },
        },
        "predicateType": {"const": "https://slsa.dev/provenance/v1"},
        "predicate": {
            "type": "object",
            "required": ["buildDefinition", "runDetails"],
            "additionalProperties": False,
            "properties": {
                "buildDefinition": {
                    "type": "object",
                    "required": ["buildType", "externalParameters"],
                    "additionalProperties": False,
                    "properties": {
                        "buildType": {"type": "string", "pattern": "^https://"},
                        "externalParameters": {
                            "type": "object",
                            "required": ["task_id", "plan"],
                        },
                        "internalParameters": {"type": "object"},
                        "resolvedDependencies": {"type": "array", "items": DESCRIPTOR},
                    },
                },
                "runDetails": {
                    "type": "object",
                    "required": ["builder"],
                    "additionalProperties": False,
                    "properties": {
                        "builder": {
                            "type": "object",
                            "required": ["id"],
                            "properties": {"id": {"type": "string", "pattern": "^https://"}},
                        },
                        "metadata": {
                            "type": "object",
                            "required": ["invocationId", "startedOn", "finishedOn"],
                            "properties": {
                                "invocationId": {"type": "string"},
                                "startedOn": TIMESTAMP,
                                "finishedOn": TIMESTAMP,
                            },
                        },
                        "byproducts": {"type": "array", "items": DESCRIPTOR},
                    },
                },
            },
        },
    },
}


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    """The demo task run to completion once; tests that change it work on a copy."""
    return completed_demo(tmp_path_factory.mktemp("attest"))


def copy_of(sample: Sample, where: Path) -> Sample:
    shutil.copytree(sample.root, where / "copy", symlinks=True)
    return Sample(where / "copy", sample.script)


def attest(sample: Sample, *args: str) -> tuple[bytes, dict[str, Any]]:
    res = sample.cli("attest", "demo", *args)
    assert res.returncode == 0, res.stderr
    return res.stdout.encode(), orjson.loads(res.stdout)


def test_statement_has_the_in_toto_and_slsa_shape(ran: Sample) -> None:
    _, doc = attest(ran)
    Draft202012Validator.check_schema(STATEMENT_SCHEMA)
    errors = [e.message for e in Draft202012Validator(STATEMENT_SCHEMA).iter_errors(doc)]
    assert errors == []
    build = doc["predicate"]["buildDefinition"]
    assert build["externalParameters"]["task_id"] == "demo"
    assert build["externalParameters"]["plan"] == ran.read_json("ai/tasks/demo/plan.json")
    config = (ran.root / "ai/harness.toml").read_bytes()
    files = build["internalParameters"]["files"]
    assert files["ai/harness.toml"]["sha256"] == hashlib.sha256(config).hexdigest()


def test_subject_is_the_last_task_commit_and_its_tree(ran: Sample, tmp_path: Path) -> None:
    copy = copy_of(ran, tmp_path)
    last = copy.head()
    assert "Harness-Task: demo" in copy.git("log", "-1", "--format=%B", last)
    # A later commit that is not the task's does not move the subject.
    (copy.root / "NOTES.md").write_text("later\n")
    copy.commit_all("unrelated")
    _, doc = attest(copy)
    digests = [s["digest"] for s in doc["subject"]]
    assert digests == [
        {"gitCommit": copy.git("rev-parse", last).strip()},
        {"gitTree": copy.git("rev-parse", f"{last}^{{tree}}").strip()},
    ]
    assert doc["subject"][0]["name"] == "git+commit:main"


def test_dependencies_name_harness_the_agent_and_the_base(ran: Sample) -> None:
    _, doc = attest(ran)
    deps = {d["name"]: d for d in doc["predicate"]["buildDefinition"]["resolvedDependencies"]}
    assert set(deps) == {"harness", "agent:scripted", "base"}
    metas = {
        p.parent.name: orjson.loads(p.read_bytes())
        for p in (ran.root / "ai/exchanges/demo").glob("*/meta.json")
    }
    agent = deps["agent:scripted"]
    assert agent["annotations"]["calls"] == {k: m["agent_version"] for k, m in metas.items()}
    assert agent["annotations"]["version_range"] == ">=0.1"
    launcher = (ran.root / "agents/scripted-cli").read_bytes()
    assert agent["digest"] == {"sha256": hashlib.sha256(launcher).hexdigest()}
    first = next(e for e in ran.events() if e["event"] == "subagent_invoked")
    assert deps["base"]["digest"] == {"gitCommit": first["details"]["base"]}


def test_byproducts_cover_every_exchange_and_the_log(ran: Sample) -> None:
    _, doc = attest(ran)
    found = {b["name"]: b["digest"]["sha256"] for b in doc["predicate"]["runDetails"]["byproducts"]}
    folders = sorted((ran.root / "ai/exchanges/demo").iterdir())
    assert len(folders) == 3
    expected = {
        f"ai/exchanges/demo/{f.name}": hashlib.sha256((f / "meta.json").read_bytes()).hexdigest()
        for f in folders
    }
    log = (ran.root / "ai/tasks/demo/progress.ndjson").read_bytes()
    expected["ai/tasks/demo/progress.ndjson"] = hashlib.sha256(log).hexdigest()
    assert found == expected
    events = ran.events()
    meta = doc["predicate"]["runDetails"]["metadata"]
    head = hashlib.sha256(log.splitlines()[-1]).hexdigest()
    assert meta == {
        "invocationId": f"demo@{head}",
        "startedOn": events[0]["ts"],
        "finishedOn": events[-1]["ts"],
    }


def test_same_commit_same_bytes_even_from_a_detached_checkout(ran: Sample, tmp_path: Path) -> None:
    first, _ = attest(ran)
    again, _ = attest(ran)
    assert first == again
    copy = copy_of(ran, tmp_path)
    copy.git("checkout", "-q", "--detach", "HEAD")
    (copy.root / "ai/tasks/demo/plan.json").write_text("not even JSON")  # the tree is not read
    detached, _ = attest(copy)
    assert detached == first


def test_output_file_is_written_whole_and_only_on_success(ran: Sample, tmp_path: Path) -> None:
    out = tmp_path / "out" / "statement.json"
    res = ran.cli("attest", "demo", "-o", str(out))
    assert res.returncode == 0, res.stderr
    stdout, _ = attest(ran)
    assert out.read_bytes() == stdout
    assert sorted(p.name for p in out.parent.iterdir()) == ["statement.json"]
    out.write_text("kept")
    res = ran.cli("attest", "nosuch", "-o", str(out))
    assert res.returncode == 2
    assert out.read_text() == "kept"
    assert sorted(p.name for p in out.parent.iterdir()) == ["statement.json"]


@pytest.mark.parametrize("task", ["nosuch", "dem"])
def test_a_task_without_commits_is_invalid_input(ran: Sample, task: str) -> None:
    res = ran.cli("attest", task)
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        f"harness: task {task}: no commit on HEAD carries Harness-Task: {task}"
    ]
    assert res.stdout == ""
