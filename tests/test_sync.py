"""The user's files after a step, through the real CLI on real repositories: a commit's paths
reach the working tree only where the user left them alone, deletions before additions, and
never through a symlink or over a file of the user's."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from harness.importers import demo

from .conftest import Sample, calc_patch, new_file_patch, ok, subtask

PATCHED = demo.SAMPLE["src/calc.py"] + "VALUE = 1\n"
OLD = "src/old.py"
# What the task's commit holds for each path it changes (None: deleted).
TASK_VERSION = {"src/calc.py": PATCHED, "src/extra.py": "EXTRA = 1\n", OLD: None}


def deleted_file_patch(path: str, lines: list[str]) -> str:
    body = "".join(f"-{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\ndeleted file mode 100644\n--- a/{path}\n+++ /dev/null\n"
        f"@@ -1,{len(lines)} +0,0 @@\n{body}"
    )


def meddle(s: Sample, edit: str) -> None:
    """The scripted worker behind a wrapper that first runs the shell `edit` in the user's
    repository: a person at work while the worker thinks. The worker runs bare, since a
    sandboxed one cannot reach the repository, which is the sandbox's point."""
    s.uncontain()
    wrapper = s.root.parent / "meddling-cli"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = --version ] || (cd {shlex.quote(str(s.root))} && {edit})\n'
        'exec "$HARNESS_PYTHON" -I -m harness.workers.scripted "$@"\n'
    )
    wrapper.chmod(0o755)
    reg = s.read_json("ai/agents/registry.json")
    reg["agents"][0]["cmd"] = str(wrapper)
    s.write_json("ai/agents/registry.json", reg)


def applied_commit(s: Sample) -> str:
    applied = next(e for e in s.events() if e["event"] == "subagent_diffs_applied")
    return str(applied["details"]["commit"])


def text_at(s: Sample, rev: str, path: str) -> str | None:
    if not s.git("ls-tree", "--name-only", rev, "--", path).strip():
        return None
    return s.git("show", f"{rev}:{path}")


def working_text(s: Sample, path: str) -> str | None:
    file = s.root / path
    return file.read_text() if file.is_file() else None


def subtask_commits(s: Sample) -> list[str]:
    return s.git("log", "--format=%H", "-F", "--grep=Harness-Subtask:").split()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))}


# -- a file the user changed while the worker ran --------------------------------------------


@pytest.fixture
def three_changes(sample: Sample) -> Sample:
    """T1's commit modifies src/calc.py, adds src/extra.py and deletes src/old.py."""
    (sample.root / OLD).write_text("OLD = 1\n")
    sample.commit_all("a file the task deletes")
    sample.write_plan([subtask("T1", inputs=["src/calc.py", OLD], creates=["src/*.py"])])
    sample.write_script([
        ok("T1",
           ("src/calc.py", calc_patch()),
           ("src/extra.py", new_file_patch("src/extra.py", ["EXTRA = 1"])),
           (OLD, deleted_file_patch(OLD, ["OLD = 1"]))),
    ])  # fmt: skip
    return sample


@pytest.mark.parametrize("touched", [None, "src/calc.py", "src/extra.py", OLD])
def test_a_file_changed_while_the_worker_ran_is_kept_and_the_commit_stands(
    three_changes: Sample, touched: str | None
) -> None:
    s = three_changes
    target = touched or "notes.txt"  # the twin: the user writes outside the task's paths
    meddle(s, f"printf 'mine\\n' > {target}")
    staged = s.git("ls-files", "-s", "--", target)
    res = s.cli("next", "demo")
    assert res.returncode == 0, res.stderr
    made = applied_commit(s)
    assert {p: text_at(s, made, p) for p in TASK_VERSION} == TASK_VERSION
    assert (s.root / target).read_bytes() == b"mine\n"
    others = {p: v for p, v in TASK_VERSION.items() if p != touched}
    assert {p: working_text(s, p) for p in others} == others
    if touched is None:
        assert res.stderr == ""
        assert s.status_outside_ai() == "?? notes.txt"
    else:
        assert res.stderr.splitlines() == [
            f"harness: kept your change to {touched}; the commit holds the task's version"
        ]
        assert s.git("ls-files", "-s", "--", touched) == staged  # the index as it was too
        assert s.git("status", "--porcelain", "--", *others) == ""


# -- a file that becomes a folder, and a folder that becomes a file ----------------------------


@pytest.mark.parametrize("shape", ["file to folder", "folder to file"])
def test_a_file_becomes_a_folder_and_a_folder_a_file(sample: Sample, shape: str) -> None:
    old, new = ("docs/guide", "docs/guide/index.md")
    if shape == "folder to file":
        old, new = new, old
    (sample.root / old).parent.mkdir(parents=True, exist_ok=True)
    (sample.root / old).write_text("old\n")
    sample.commit_all(f"{old} before the task")
    sample.write_plan([subtask("T1", inputs=[old], write_scope="docs/**", creates=["docs/**"])])
    # The addition first: harness, not the worker, puts deletions first.
    sample.write_script([
        ok("T1", (new, new_file_patch(new, ["new"])), (old, deleted_file_patch(old, ["old"]))),
    ])  # fmt: skip
    res = sample.cli("next", "demo")
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    made = applied_commit(sample)
    assert sample.git("ls-tree", "-r", "--name-only", made, "--", "docs").split() == [new]
    assert working_text(sample, new) == "new\n"
    assert sample.status_outside_ai() == ""
    assert sorted(p.relative_to(sample.root).as_posix()
                  for p in (sample.root / "docs").rglob("*") if p.is_file()) == [new]  # fmt: skip


# -- a folder the commit writes into that is a symlink or a file -------------------------------


def docs_task(s: Sample) -> None:
    s.write_plan([subtask("T1", write_scope="docs/**", creates=["docs/*.md"])])
    s.write_script([ok("T1", ("docs/x.md", new_file_patch("docs/x.md", ["# x"])))])


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A folder outside the repository that a symlink of the user's points to."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "keep.md").write_text("keep\n")
    return folder


@pytest.mark.parametrize("docs", ["symlink", "file", "folder"])
def test_a_commit_is_refused_before_the_branch_moves_if_its_folder_is_not_a_folder(
    sample: Sample, elsewhere: Path, docs: str
) -> None:
    docs_task(sample)
    folder = sample.root / "docs"
    if docs == "symlink":
        folder.symlink_to(elsewhere)
    elif docs == "file":
        folder.write_text("my notes\n")
    else:
        folder.mkdir()  # the twin: a real, empty folder
    before = snapshot(elsewhere)
    res = sample.cli("next", "demo")
    if docs == "folder":
        assert res.returncode == 0, res.stderr
        assert working_text(sample, "docs/x.md") == "# x\n"
        assert sample.status_outside_ai() == ""
        return

    assert res.returncode == 1
    assert res.stderr.splitlines() == [
        f"harness: docs is a {docs} in your working tree, where the commit writes docs/x.md;"
        " harness writes neither through nor over it: move it away, then run again"
    ]
    assert subtask_commits(sample) == []
    assert sample.git("diff", "--name-only", "HEAD~1", "HEAD", "--", ":!ai").strip() == ""
    assert snapshot(elsewhere) == before
    if docs == "symlink":
        assert folder.is_symlink() and folder.readlink() == elsewhere
    else:
        assert folder.read_text() == "my notes\n"
    # Moved away, the task goes on from the recorded answer.
    folder.unlink()
    res = sample.cli("next", "demo")
    assert res.returncode == 0, res.stderr
    assert sample.names().count("subagent_invoked") == 1
    assert working_text(sample, "docs/x.md") == "# x\n"
    assert sample.status_outside_ai() == ""


@pytest.mark.parametrize("docs", ["symlink", "none"])
def test_a_symlink_made_after_the_branch_moved_is_not_written_through(
    sample: Sample, elsewhere: Path, docs: str
) -> None:
    docs_task(sample)
    res = sample.cli("next", "demo", env={"HARNESS_FAULT": "after:advance"})
    assert res.returncode == -9, res.stderr
    folder = sample.root / "docs"
    if docs == "symlink":
        folder.symlink_to(elsewhere)
    before = snapshot(elsewhere)
    res = sample.cli("next", "demo")
    if docs == "none":  # the twin: the next run finishes the step
        assert res.returncode == 0, res.stderr
        assert working_text(sample, "docs/x.md") == "# x\n"
        assert sample.status_outside_ai() == ""
        return

    # The commit stands; its file is not written, and the step waits for the user.
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        "harness: did not write docs/x.md: a symlink, file or folder of yours is in its way;"
        " the commit holds the task's version",
        "harness: uncommitted changes where the task may write: docs/x.md",
    ]
    assert snapshot(elsewhere) == before and folder.readlink() == elsewhere
    folder.unlink()
    res = sample.cli("next", "demo")
    assert res.returncode == 0, res.stderr
    assert working_text(sample, "docs/x.md") == "# x\n"
    assert sample.status_outside_ai() == ""
    assert len(subtask_commits(sample)) == 1
