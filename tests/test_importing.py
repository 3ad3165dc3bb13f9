"""`harness plan import` end to end: an Agentfile or a Glee workflow written as plan.json, run
with the scripted worker, and every refusal leaving nothing written."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import orjson
import pytest

from .conftest import Sample, ok
from .test_glee import SERVE_CUSTOMERS  # seed 000's own example

GREET = """NAME greet
INPUT who DEFAULT world
AGENT critic FROM agents/critic.md
GOAL hello "Say hello to $who"
GOAL check "Review the greeting" USING critic
RUN main USING hello, check
"""


def plan_of(s: Sample, task: str) -> dict[str, object]:
    doc: dict[str, object] = orjson.loads((s.root / f"ai/tasks/{task}/plan.json").read_bytes())
    return doc


def import_(s: Sample, source: Path, task: str, *extra: str) -> tuple[int, str, str]:
    res = s.cli("plan", "import", str(source), "--task", task, *extra)
    return res.returncode, res.stdout, res.stderr


@pytest.fixture
def agentfile(sample: Sample) -> Path:
    (sample.root / "workflows/agents").mkdir(parents=True)
    (sample.root / "workflows/agents/critic.md").write_text("You are a careful critic.\n")
    path = sample.root / "workflows/Agentfile"
    path.write_text(GREET)
    return path


def test_an_agentfile_imports_validates_and_runs(sample: Sample, agentfile: Path) -> None:
    code, out, err = import_(sample, agentfile, "greet", "--input", "who=harness")
    assert code == 0, err
    assert out == "wrote ai/tasks/greet/plan.json\n"
    subtasks = plan_of(sample, "greet")["subtasks"]
    assert isinstance(subtasks, list)
    hello, check = subtasks
    assert (hello["id"], hello["goal"], hello["write_scope"]) == (
        "hello",
        "Say hello to harness",
        "none",
    )
    assert check["depends_on"] == ["hello"]
    assert check["inputs"] == ["workflows/agents/critic.md"]  # the persona, as an input
    assert sample.cli("plan", "validate", "greet").returncode == 0
    sample.write_script([ok("hello"), ok("check")])
    sample.commit_all("the workflow and its persona")  # inputs are read at the base
    res = sample.cli("run", "greet")
    assert res.returncode == 0, res.stderr
    assert sample.names("greet")[-1] == "task_completed"
    assert sample.cli("audit", "greet").returncode == 0
    assert sample.cli("replay", "greet").returncode == 0


def test_an_existing_plan_is_replaced_only_with_force(sample: Sample, agentfile: Path) -> None:
    assert import_(sample, agentfile, "greet")[0] == 0
    first = (sample.root / "ai/tasks/greet/plan.json").read_bytes()
    code, _, err = import_(sample, agentfile, "greet", "--input", "who=you")
    assert code == 2 and "ai/tasks/greet/plan.json exists: give --force" in err
    assert (sample.root / "ai/tasks/greet/plan.json").read_bytes() == first
    code, _, err = import_(sample, agentfile, "greet", "--input", "who=you", "--force")
    assert code == 0, err
    assert "Say hello to you" in (sample.root / "ai/tasks/greet/plan.json").read_text()


def test_a_started_task_is_never_replaced(sample: Sample, agentfile: Path) -> None:
    assert import_(sample, agentfile, "greet")[0] == 0
    sample.write_script([ok("hello"), ok("check")])
    assert sample.cli("next", "greet").returncode == 0
    before = (sample.root / "ai/tasks/greet/plan.json").read_bytes()
    code, _, err = import_(sample, agentfile, "greet", "--force")
    assert code == 2 and "task greet has started" in err
    assert (sample.root / "ai/tasks/greet/plan.json").read_bytes() == before


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (GREET.replace("GOAL hello", "GOAL hello hello"), "workflows/Agentfile:4:"),
        (GREET.replace("agents/critic.md", "../../outside.md"), "outside"),
        (GREET.replace("agents/critic.md", "agents/missing.md"), "agents/missing.md"),
    ],
    ids=["syntax", "escape", "missing-persona"],
)
def test_a_refused_agentfile_writes_nothing(
    sample: Sample, agentfile: Path, text: str, found: str
) -> None:
    (sample.root.parent / "outside.md").write_text("a secret\n")
    agentfile.write_text(text)
    code, out, err = import_(sample, agentfile, "greet")
    assert code == 2 and found in err, err
    assert err.count("\n") == 1 and out == ""
    assert not (sample.root / "ai/tasks/greet").exists()


def test_a_file_outside_the_repository_is_not_read(sample: Sample, tmp_path: Path) -> None:
    outside = tmp_path / "Agentfile"
    outside.write_text('GOAL hello "Say hello"\n')
    code, _, err = import_(sample, outside, "greet")
    assert code == 2 and "outside the repository" in err
    assert not (sample.root / "ai/tasks/greet").exists()


def test_a_malformed_input_is_a_usage_error(sample: Sample, agentfile: Path) -> None:
    code, _, err = import_(sample, agentfile, "greet", "--input", "who")
    assert code == 2 and "--input 'who': give it as NAME=VALUE" in err
    assert not (sample.root / "ai/tasks/greet").exists()


RESTAURANT = """\
name: run-restaurant
steps:
  - workflow: accounting
  - workflow: serve-customers
"""

ACCOUNTING = """\
name: accounting
steps:
  - agent: bookkeeper
    description: Reconcile the day's receipts
"""


def test_a_glee_workflow_imports_with_its_nested_workflows_and_runs(sample: Sample) -> None:
    folder = sample.root / ".glee/workflows"
    folder.mkdir(parents=True)
    for name, text in (
        ("run-restaurant", RESTAURANT),
        ("accounting", ACCOUNTING),
        ("serve-customers", SERVE_CUSTOMERS),
    ):
        (folder / f"{name}.yml").write_text(text)
    code, out, err = import_(
        sample, folder / "run-restaurant.yml", "restaurant", "--input", "channel=app"
    )
    assert code == 0, err
    assert out.splitlines() == [
        "wrote ai/tasks/restaurant/plan.json",
        "wrote ai/tasks/accounting/plan.json",
        "wrote ai/tasks/serve-customers/plan.json",
    ]
    top = plan_of(sample, "restaurant")["subtasks"]
    assert isinstance(top, list)
    assert [s.get("plan") for s in top] == ["accounting", "serve-customers"]
    served = plan_of(sample, "serve-customers")["subtasks"]
    assert isinstance(served, list)
    # Sequential (the default): each after the one before, and after what it references.
    edges = [[], ["step-0"], ["step-0", "step-1"], ["step-0", "step-2"]]
    assert [s["depends_on"] for s in served] == edges
    assert "app" in served[0]["goal"]
    assert sample.cli("plan", "validate", "restaurant").returncode == 0
    sample.write_script([ok(f"step-{i}") for i in range(4)])
    res = sample.cli("run", "restaurant", "--max-parallel", "2")
    assert res.returncode == 0, res.stderr
    for task in ("restaurant", "accounting", "serve-customers"):
        assert sample.names(task)[-1] == "task_completed"
        assert sample.cli("audit", task).returncode == 0
    res = sample.cli("replay", "restaurant")
    assert res.returncode == 0, res.stderr


def test_a_glee_workflow_whose_nested_plan_exists_writes_nothing(sample: Sample) -> None:
    folder = sample.root / ".glee/workflows"
    folder.mkdir(parents=True)
    (folder / "run-restaurant.yml").write_text(RESTAURANT.replace("serve-customers", "accounting"))
    (folder / "accounting.yml").write_text(ACCOUNTING)
    sample.write_plan([{"id": "x", "plan": "elsewhere"}], "accounting")
    code, _, err = import_(sample, folder / "run-restaurant.yml", "restaurant")
    assert code == 2 and "ai/tasks/accounting/plan.json exists" in err
    assert not (sample.root / "ai/tasks/restaurant").exists()


def test_a_broken_glee_workflow_names_its_line_and_column(sample: Sample) -> None:
    folder = sample.root / ".glee/workflows"
    folder.mkdir(parents=True)
    (folder / "bad.yml").write_text("name: bad\nsteps:\n  - agent: a\n    workflow: b\n")
    code, _, err = import_(sample, folder / "bad.yml", "bad")
    assert code == 2 and err.startswith("harness: .glee/workflows/bad.yml:3:")
    assert not (sample.root / "ai/tasks/bad").exists()


# -- what an import reads (issue 22, item 4) -------------------------------------------------
# Each hostile case is a file an Agentfile or a Glee workflow names that no person would mean
# to copy into a plan; its twin has the same shape, made honestly. The hostile one is refused
# in one line naming the file, with nothing written anywhere; the twin is imported.

SECRET = "S3CRET-outside-the-repository"
HOSTILE_GOAL = "Fix the bug " + SECRET


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry of the tree but .git's: a file's bytes, a symlink's target, or its kind."""
    found: dict[str, bytes | str] = {}
    for folder, dirs, names in os.walk(root):
        if Path(folder) == root and ".git" in dirs:
            dirs.remove(".git")
        for name in sorted(dirs + names):
            path = Path(folder, name)
            rel = path.relative_to(root).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                found[rel] = f"-> {os.readlink(path)}"
            elif stat.S_ISREG(mode):
                found[rel] = path.read_bytes()
            else:
                found[rel] = "folder" if stat.S_ISDIR(mode) else "special"
    return found


def goal_file(root: Path, outside: Path, hostile: bool, content: bytes) -> None:
    """workflows/goals/g.md: `content` (the twin), or a symlink to a file outside holding it."""
    folder = root / "workflows/goals"
    folder.mkdir(parents=True, exist_ok=True)
    if hostile:
        (outside / "g.md").write_bytes(content)
        (folder / "g.md").symlink_to(outside / "g.md")
    else:
        (folder / "g.md").write_bytes(content)


def agentfile_case(name: str, hostile: bool, root: Path, outside: Path) -> str:
    """Set up the case; the Agentfile's GOAL line (the twin's names a plain file)."""
    goal = "GOAL g FROM goals/g.md\n"
    if name == "git config":
        (root / "config").write_text("[core]\n\tbare = false\n")
        return "GOAL g FROM ../.git/config\n" if hostile else "GOAL g FROM ../config\n"
    if name == "write tokens":
        (root / "notes").mkdir()
        shutil.copy(root / "ai/agents/write_tokens.json", root / "notes/tokens.json")
        where = "../ai/agents/write_tokens.json" if hostile else "../notes/tokens.json"
        return f"GOAL g FROM {where}\n"
    if name == "persona under ai":
        (root / "ai/agents/personas").mkdir(parents=True)
        (root / "notes").mkdir()
        for folder in ("ai/agents/personas", "notes"):
            (root / folder / "p.md").write_text("You are careful.\n")
        where = "../ai/agents/personas/p.md" if hostile else "../notes/p.md"
        return f'AGENT p FROM {where}\nGOAL g "Review" USING p\n'
    if name == "symlink to a file outside":
        goal_file(root, outside, hostile, HOSTILE_GOAL.encode())
    elif name == "symlink to a file inside":
        (root / "workflows/goals").mkdir(parents=True)
        if hostile:
            (root / "workflows/goals/g.md").symlink_to("../../README.md")
        else:
            shutil.copy(root / "README.md", root / "workflows/goals/g.md")
    elif name == "symlinked folder":
        real = outside if hostile else root / "workflows/goals"
        real.mkdir(parents=True, exist_ok=True)
        (real / "g.md").write_text(HOSTILE_GOAL)
        if hostile:
            (root / "workflows/goals").symlink_to(outside)
    elif name == "dev zero":
        (root / "workflows/goals").mkdir(parents=True)
        if hostile:
            (root / "workflows/goals/g.md").symlink_to("/dev/zero")
        else:
            (root / "workflows/goals/g.md").write_bytes(b"0" * 100)
    elif name == "fifo":
        (root / "workflows/goals").mkdir(parents=True)
        if hostile:
            os.mkfifo(root / "workflows/goals/g.md")
        else:
            (root / "workflows/goals/g.md").write_text("Fix it\n")
    elif name == "2 MB":
        size = 2_000_000 if hostile else 900_000
        (root / "workflows/goals").mkdir(parents=True)
        (root / "workflows/goals/g.md").write_bytes(b"word " * (size // 5))
    elif name == "NUL byte":
        (root / "workflows/goals").mkdir(parents=True)
        text = b"Fix\0the bug\n" if hostile else b"Fix the bug\n"
        (root / "workflows/goals/g.md").write_bytes(text)
    elif name == "not UTF-8":
        (root / "workflows/goals").mkdir(parents=True)
        text = "Fix the café bug\n".encode("latin-1" if hostile else "utf-8")
        (root / "workflows/goals/g.md").write_bytes(text)
    return goal


AGENTFILE_CASES = {
    # case: what the one line says, besides the file's repository path
    "git config": (".git/config", "git's files"),
    "write tokens": ("ai/agents/write_tokens.json", "harness's own"),
    "persona under ai": ("ai/agents/personas/p.md", "harness's own"),
    "symlink to a file outside": ("workflows/goals/g.md", "a symlink"),
    "symlink to a file inside": ("workflows/goals/g.md", "a symlink"),
    "symlinked folder": ("workflows/goals/g.md", "workflows/goals is a symlink"),
    "dev zero": ("workflows/goals/g.md", "a symlink"),
    "fifo": ("workflows/goals/g.md", "not a regular file"),
    "2 MB": ("workflows/goals/g.md", "larger than 1000000 bytes"),
    "NUL byte": ("workflows/goals/g.md", "a NUL byte"),
    "not UTF-8": ("workflows/goals/g.md", "not UTF-8"),
}


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
@pytest.mark.parametrize("case", sorted(AGENTFILE_CASES))
def test_an_agentfile_reads_only_what_a_person_means(
    sample: Sample, tmp_path: Path, case: str, hostile: bool
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    source = sample.root / "workflows/Agentfile"
    source.parent.mkdir(exist_ok=True)
    source.write_text(agentfile_case(case, hostile, sample.root, outside))
    before = snapshot(sample.root)
    code, out, err = import_(sample, source, "t")
    if not hostile:
        assert code == 0, err
        assert out == "wrote ai/tasks/t/plan.json\n"
        return
    path, why = AGENTFILE_CASES[case]
    assert code == 2 and err.count("\n") == 1 and out == "", err
    assert err.startswith("harness: workflows/Agentfile:1:") and f"{path}: " in err, err
    assert why in err, err
    assert SECRET not in err
    assert snapshot(sample.root) == before


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
@pytest.mark.parametrize("case", ["symlink", "symlinked folder"])
def test_the_file_named_on_the_command_line_is_read_the_same_way(
    sample: Sample, tmp_path: Path, case: str, hostile: bool
) -> None:
    workflows = sample.root / "workflows"
    real = tmp_path / "outside" if hostile else workflows
    real.mkdir()
    (real / "Agentfile").write_text(f'GOAL g "Fix it {SECRET}"\n')
    if hostile and case == "symlink":
        workflows.mkdir()
        (workflows / "Agentfile").symlink_to(real / "Agentfile")
    elif hostile:
        workflows.symlink_to(real)
    before = snapshot(sample.root)
    code, _, err = import_(sample, workflows / "Agentfile", "t")
    if not hostile:
        assert code == 0, err
        return
    why = "a symlink" if case == "symlink" else "workflows is a symlink"
    assert err == f"harness: workflows/Agentfile: {why}\n"
    assert snapshot(sample.root) == before


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
@pytest.mark.parametrize("name", ["Agentfile", "flow.yml"])
def test_a_nul_byte_is_refused_by_both_importers_alike(
    sample: Sample, name: str, hostile: bool
) -> None:
    text = 'GOAL g "Fix it"\n' if name == "Agentfile" else "steps:\n  - agent: Fixer\n"
    path = sample.root / name
    path.write_text(text.replace("Fix", "Fi\0x") if hostile else text)
    before = snapshot(sample.root)
    code, _, err = import_(sample, path, "t")
    if not hostile:
        assert code == 0, err
        return
    assert err == f"harness: {name}: holds a NUL byte\n"
    assert snapshot(sample.root) == before


@pytest.mark.parametrize("hostile", [True, False], ids=["hostile", "twin"])
def test_a_nested_glee_workflow_is_read_the_same_way(
    sample: Sample, tmp_path: Path, hostile: bool
) -> None:
    folder = sample.root / ".glee/workflows"
    folder.mkdir(parents=True)
    (folder / "run-restaurant.yml").write_text(RESTAURANT.replace("serve-customers", "accounting"))
    if hostile:
        (tmp_path / "accounting.yml").write_text(ACCOUNTING + f"# {SECRET}\n")
        (folder / "accounting.yml").symlink_to(tmp_path / "accounting.yml")
    else:
        (folder / "accounting.yml").write_text(ACCOUNTING)
    before = snapshot(sample.root)
    code, _, err = import_(sample, folder / "run-restaurant.yml", "restaurant")
    if not hostile:
        assert code == 0, err
        return
    assert code == 2 and err == "harness: .glee/workflows/accounting.yml: a symlink\n"
    assert snapshot(sample.root) == before


def test_a_working_folder_reached_through_a_symlink_still_names_the_repository(
    sample: Sample, agentfile: Path, tmp_path: Path
) -> None:
    """Only what lies inside the repository must be free of symlinks: the way to it is the
    person's own."""
    link = tmp_path / "link-to-repo"
    link.symlink_to(sample.root)
    code, out, err = import_(sample, link / "workflows/Agentfile", "greet")
    assert code == 0, err
    assert out == "wrote ai/tasks/greet/plan.json\n"
