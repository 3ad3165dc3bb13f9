"""Every hostile diff of the corpus, returned by a real worker to the real CLI: refused, with
nothing written to the branch (outside the record of the refusal), the tree or elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from harness.base import files
from harness.boundary.launchers import launcher
from harness.gate.diffgate import Rules
from harness.repository.layout import Layout
from tests.hostile_corpus import BASE_FILES, BENIGN, HOSTILE, SYMLINKS, Case, rules_for

from .conftest import CLOCK


def _toml_list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(orjson.dumps(i).decode() for i in items) + "]"


def build(tmp: Path, case: Case, base: dict[str, str] = BASE_FILES) -> Path:
    """A repository holding the corpus's base tree (or `base`), set up so the subtask's rules
    are `case`'s."""
    rules: Rules = rules_for(case)
    root = tmp / "repo"
    for rel, text in base.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for rel, target in SYMLINKS.items() if base is BASE_FILES else ():
        os.symlink(target, root / rel)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"],
        cwd=root,
        check=True,
    )
    layout = Layout(root)
    agent = tmp / "scripted-cli"
    agent.write_text(launcher("scripted"))
    agent.chmod(0o755)
    script = tmp / "script.json"
    # json, not orjson: the corpus holds strings (lone surrogates) orjson will not encode.
    answers = {"answers": [{"subtask": "T1", "result": {"diffs": case.diffs}}]}
    script.write_text(json.dumps(answers))
    files.atomic_write(
        layout.config,
        (
            f"[scope]\nreadonly = {_toml_list(rules.readonly)}\n"
            f"manifests = {_toml_list(rules.manifests)}\n"
            f"[limits]\nmax_diff_bytes = {rules.max_bytes}\nmax_files = {rules.max_files}\n"
        ).encode(),
    )
    registry = {
        "agents": [
            {
                "id": "scripted",
                "cmd": str(agent),
                "version": ">=0.1",
                "capabilities": ["localized-impl"],
                "args": ["--script", str(script)],
                "read": [str(script)],
            }
        ]
    }
    files.atomic_write(layout.registry, files.pretty(registry))
    tokens = (
        [
            {
                "id": "W1",
                "paths": list(rules.token_paths),
                "expires": "2026-01-02T00:00:00Z",
                "one_shot": False,
            }
        ]
        if rules.token_paths
        else []
    )
    files.atomic_write(layout.tokens, files.pretty({"tokens": tokens}))
    sub = {
        "id": "T1",
        "role": "localized-impl",
        "goal": f"case {case.name}",
        "inputs": sorted(p for p in rules.cited if p in base),
        "acceptance": [],
        "write_scope": list(rules.write_scope),
        "creates": list(rules.creates),
        "allow_new_deps": not rules.no_new_deps,
        "allow_mode_change": rules.allow_mode_change,
    }
    files.atomic_write(
        layout.plan("demo"), files.pretty({"task_id": "demo", "created": CLOCK, "subtasks": [sub]})
    )
    return root


def run_next(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "next", "demo", "--repo", str(root)],
        capture_output=True,
        text=True,
        env={**os.environ, "HARNESS_CLOCK": CLOCK},
        check=False,
    )


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout


def snapshot(tmp: Path) -> dict[str, bytes]:
    """Every file outside ai/ and .git/, and everything beside the repository."""
    found = {}
    for path in sorted(tmp.rglob("*")):
        rel = path.relative_to(tmp).as_posix()
        if rel.startswith(("repo/ai/", "repo/.git/")) or rel in ("repo/ai", "repo/.git"):
            continue
        if path.is_symlink():
            found[rel] = b"->" + os.readlink(path).encode()
        elif path.is_file():
            found[rel] = path.read_bytes()
        else:
            found[rel] = b"<dir>"
    return found


HOSTILE_E2E = [c for c in HOSTILE if c.overrides.get("special") is None]


@pytest.mark.parametrize("case", HOSTILE_E2E, ids=[c.name for c in HOSTILE_E2E])
def test_hostile_diff_is_refused_with_nothing_written(tmp_path: Path, case: Case) -> None:
    root = build(tmp_path, case)
    base = git(root, "rev-parse", "HEAD").strip()
    before = snapshot(tmp_path)
    res = run_next(root)
    assert res.returncode == 1, res.stderr
    if "token_paths" in case.overrides and "no usable token covers" in res.stderr:
        # A token that does not cover the scope is never chosen: the run's pre-flight
        # refuses before any worker is called, and nothing is logged or committed.
        assert "no worker called" in res.stderr
        assert not (root / "ai/tasks/demo/progress.ndjson").exists()
        assert git(root, "rev-parse", "HEAD").strip() == base
        assert snapshot(tmp_path) == before
        return
    events = [
        orjson.loads(line)
        for line in (root / "ai/tasks/demo/progress.ndjson").read_bytes().splitlines()
    ]
    names = [e["event"] for e in events]
    assert names[-2:] == ["step_failed", "blocker_encountered"]
    assert "subagent_diffs_applied" not in names
    failed = events[-2]
    if failed["details"]["phase"] == "subagent_failed":
        # Entries that are not even well-typed die earlier, at the output schema.
        kind = next(e for e in events if e["event"] == "subagent_failed")["details"]["kind"]
        assert kind == "format"
    elif case.stage == "gate":
        assert failed["details"]["phase"] == "gate"
        assert case.reason in failed["error"]
    else:
        assert failed["details"]["phase"] == "apply"
    # The branch gained only the record of the refusal: no change outside ai/.
    assert git(root, "log", "--format=%s", f"{base}..HEAD").splitlines() == ["harness: record demo"]
    assert git(root, "diff", "--name-only", base, "HEAD", "--", ".", ":(exclude)ai") == ""
    assert snapshot(tmp_path) == before
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.parametrize("case", BENIGN, ids=[c.name for c in BENIGN])
def test_benign_twin_is_applied_and_committed(tmp_path: Path, case: Case) -> None:
    root = build(tmp_path, case)
    base = git(root, "rev-parse", "HEAD").strip()
    res = run_next(root)
    assert res.returncode == 0, res.stderr
    subjects = git(root, "log", "--format=%s", f"{base}..HEAD").splitlines()
    assert subjects == ["harness: record demo", f"localized-impl: case {case.name}"]
    assert git(root, "diff", "--name-only", base, "HEAD", "--", ".", ":(exclude)ai") != ""
    assert git(root, "status", "--porcelain") == ""
    assert tree(root, "HEAD") == applied_by_git(root, base, case)


def tree(root: Path, commit: str) -> list[str]:
    """Every entry of `commit`'s tree outside ai/, with its mode and blob."""
    listing = git(root, "ls-tree", "-r", commit).splitlines()
    return [line for line in listing if not line.split("\t", 1)[1].startswith("ai/")]


def applied_by_git(root: Path, base: str, case: Case) -> list[str]:
    """The tree `git apply --cached` makes of the case's patches on `base`, one after another
    on a private index. Not all at once: git then writes every deletion before any other
    change, so a change and then a deletion of one file would keep the file."""
    env = {**os.environ, "GIT_INDEX_FILE": str(root.parent / "conformance.index")}
    subprocess.run(["git", "read-tree", base], cwd=root, env=env, check=True)
    for entry in case.diffs:
        subprocess.run(
            ["git", "apply", "--cached", "--whitespace=nowarn", "-"],
            cwd=root,
            env=env,
            input=str(entry["patch"]).encode(),
            check=True,
        )
    made = subprocess.run(
        ["git", "write-tree"], cwd=root, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    return tree(root, made)
