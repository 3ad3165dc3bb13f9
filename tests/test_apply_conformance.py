"""git's own `git apply` test patches and real upstream commits (tests/conformance/, see its
README), each with git's verdict beside harness's: harness accepts every plain in-repository
text change git accepts, with the tree git makes, and refuses only for a reason it names."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.gate.diffgate import DEFAULT_MANIFESTS, DiffRefused, Rules, apply_order, check
from harness.repository import repo
from tests.hostile_corpus import Case
from tests.test_hostile_e2e import applied_by_git, build, git, run_next, tree

HERE = Path(__file__).parent / "conformance"
CASES: list[dict[str, Any]] = json.loads((HERE / "cases.json").read_text("utf-8"))["cases"]
# Why harness may refuse what git takes: an unsafe class (an escape, a link, a binary, a mode,
# .git or harness's own ai/), a name no checkout holds alike everywhere, a copy (refused since
# the gate began), text git skips before a patch (the gate reads no prose), or git's own
# refusal at apply.
UNSAFE = (
    "path traversal",
    "symlink mode",
    "binary patch",
    "mode change",
    ".git path",
    "harness state",
)
NAMED = (
    *UNSAFE,
    "control character",
    "backslash in path",
    "copy header",
    "unknown header line",
    "apply refused",
)


def _git(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def _base(tmp: Path, tree: dict[str, str]) -> tuple[Path, str]:
    root = tmp / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    for name, text in tree.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(text.encode("utf-8"))
    (root / "README").write_text("conformance\n")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return root, _git(root, "rev-parse", "HEAD").strip()


def _git_tree(root: Path, base: str, patches: list[Path]) -> str | None:
    """What `git apply --cached` makes of the patches, one invocation, on `base`."""
    env = {**os.environ, "GIT_INDEX_FILE": str(root.parent / "git.index")}
    _git(root, "read-tree", base, env=env)
    done = subprocess.run(
        ["git", "apply", "--cached", *map(str, patches)],
        cwd=root,
        env=env,
        capture_output=True,
        check=False,
    )
    return _git(root, "write-tree", env=env).strip() if done.returncode == 0 else None


def _rules(tree: dict[str, str]) -> Rules:
    paths = frozenset([*tree, "README"])
    return Rules(
        write_scope=("**",),
        token_paths=("**",),
        readonly=(),
        creates=("**",),
        cited=paths,
        manifests=DEFAULT_MANIFESTS,
        no_new_deps=False,
        tree=paths,
    )


def _section(section: dict[str, Any]) -> str:
    """A section's patch: its file, or the `part`-th file of a commit's patch, which a worker
    would give as an entry of its own."""
    text = (HERE / section["patch"]).read_bytes().decode("utf-8")
    if "part" not in section:
        return text
    starts = [0] + [found.start() + 1 for found in re.finditer("\ndiff --git ", text)]
    bounds = [*starts, len(text)]
    return text[bounds[section["part"]] : bounds[section["part"] + 1]]


def _harness(root: Path, base: str, case: dict[str, Any]) -> tuple[str, str | None]:
    """harness's verdict ("accept" or why not) and the tree it would commit."""
    sections = [{"file": s["file"], "patch": _section(s)} for s in case["sections"]]
    try:
        changes = check(sections, _rules(case["tree"]))
    except DiffRefused as refused:
        return refused.reason, None
    staged = root.parent / "staged"
    staged.mkdir()
    written = []
    for n, change in enumerate(apply_order(changes)):
        (staged / f"{n}.patch").write_text(change.patch, "utf-8")
        written.append((change.path, staged / f"{n}.patch"))
    tree, problem = repo.Repo(root).apply_tree(base, written, root.parent / "harness.index")
    return ("accept", tree) if tree is not None else (problem, None)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_git_and_harness_verdicts(tmp_path: Path, case: dict[str, Any]) -> None:
    root, base = _base(tmp_path, case["tree"])
    patches = list(dict.fromkeys(HERE / s["patch"] for s in case["sections"]))
    git_tree = _git_tree(root, base, patches)
    assert ("accept" if git_tree else "refuse") == case["git"]
    verdict, tree = _harness(root, base, case)
    if case["harness"] == "accept":
        assert verdict == "accept", verdict
        assert tree == git_tree  # the very tree git makes
    else:
        assert case["harness"] in verdict
        assert any(reason in verdict for reason in NAMED), verdict
    if verdict != "accept" and case["git"] == "accept":
        assert "apply refused" not in verdict  # git applies it: only the gate may say no


def test_the_suite_holds_each_class() -> None:
    names = " ".join(c["name"] for c in CASES)
    for origin in ("t4101", "t4109", "t4127", "t4132", "t4135", "417f3357e5", "2d6da44be2"):
        assert origin in names
    # git applies these and harness does not, each for the reason its case names
    refused = [
        c["name"]
        for c in CASES
        if c["git"] == "accept" and c["harness"] != "accept" and c["harness"] not in UNSAFE
    ]
    assert refused == [
        *(f"t4135 {kind}-with {what}" for what in ("tab", "backslash") for kind in KINDS),
        "t4109 git apply (2)",  # a shell line before the patch
        "t4102 copy",
    ]
    assert {c["harness"] for c in CASES if c["name"].startswith("unsafe")} == set(UNSAFE)
    assert sum(c["harness"] == "accept" for c in CASES) >= 40


KINDS = ("git", "diff", "add")


UPSTREAM = [c for c in CASES if c["name"].startswith("upstream")]


@pytest.mark.parametrize("case", UPSTREAM, ids=[c["name"] for c in UPSTREAM])
def test_upstream_commit_lands_through_the_cli(tmp_path: Path, case: dict[str, Any]) -> None:
    """A real commit returned by a worker, a section an entry: `harness next` commits it, and
    the commit holds the tree git makes of it."""
    diffs: list[dict[str, object]] = [
        {"file": s["file"], "patch": _section(s)} for s in case["sections"]
    ]
    rules = _rules(case["tree"])
    overrides = {
        name: getattr(rules, name)
        for name in ("write_scope", "readonly", "creates", "cited", "no_new_deps", "tree")
    }
    as_case = Case(case["name"], diffs, "", overrides=overrides)
    root = build(tmp_path, as_case, {**case["tree"], "README": "conformance\n"})
    base = git(root, "rev-parse", "HEAD").strip()
    res = run_next(root)
    assert res.returncode == 0, res.stderr
    assert tree(root, "HEAD") == applied_by_git(root, base, as_case)
