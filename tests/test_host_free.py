"""Nothing of the host in the record: the same run in two folders of this machine, with an
apply refusal and a failing check whose output names its file and its home and says how
long the tests took, records the same bytes and makes the same commits (issue 23)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.boundary import sandbox
from harness.checks import verify
from harness.importers import demo

from .conftest import CLOCK, Sample, calc_patch, ok, subtask

CHECK = "tests/check.py"
# The check the plan's T2 breaks: it names its own file and its home, as tools' output does.
FAILING_CHECK = [
    "import os",
    "import sys",
    "",
    'print(os.path.expanduser("~/.cache"))',
    'sys.exit(os.path.abspath(__file__) + ": subtract is missing")',
]
# A patch whose context src/calc.py lacks: git refuses it.
STALE = (
    "diff --git a/src/calc.py b/src/calc.py\n--- a/src/calc.py\n+++ b/src/calc.py\n"
    "@@ -1,2 +1,2 @@\n-nothing like this\n+VALUE = 1\n context absent\n"
)


def made(where: Path, mode: str) -> Sample:
    """The demo's repository in `where`, its script inside it (the registry names it by a
    relative path), a check after the demo's tests, and a plan of three subtasks: an apply
    refusal, a failing check, a change that lands."""
    root = where / "repo"
    root.mkdir(parents=True)
    demo.build(root)
    s = Sample(root, root / "agents" / "script.json")
    config = s.root / "ai" / "harness.toml"
    text = config.read_text()
    start = text.index("test = ")
    end = text.index("\n", start)
    # The demo's tests, which say how long they took, then the check.
    test = (
        '"\\"$HARNESS_PYTHON\\" -m unittest discover -s tests -t . -q; '
        '\\"$HARNESS_PYTHON\\" tests/check.py"'
    )
    text = text[:start] + f"test = {test}" + text[end:]
    config.write_text(text + f'\n[sandbox]\nmode = "{mode}"\n')
    (s.root / CHECK).write_text('print("ok")\n')
    s.write_plan(
        [
            subtask("T1", on_error="continue"),
            subtask("T2", write_scope="tests/**", inputs=[CHECK], on_error="continue"),
            subtask("T3"),
        ]
    )
    check_patch = (
        f"diff --git a/{CHECK} b/{CHECK}\n--- a/{CHECK}\n+++ b/{CHECK}\n"
        f'@@ -1 +1,{len(FAILING_CHECK)} @@\n-print("ok")\n'
        + "".join(f"+{line}\n" for line in FAILING_CHECK)
    )
    s.write_script(
        [
            ok("T1", ("src/calc.py", STALE)),
            ok("T2", (CHECK, check_patch)),
            ok("T3", ("src/calc.py", calc_patch())),
        ]
    )
    s.git("add", "-A")
    dated = {f"GIT_{who}_DATE": CLOCK for who in ("AUTHOR", "COMMITTER")}
    subprocess.run(
        ["git", "commit", "-qm", "a check and a plan"],
        cwd=root,
        env={**os.environ, **dated},
        check=True,
    )
    return s


def record(s: Sample) -> dict[str, bytes]:
    """Every file of the task's log and exchanges, by its path in the repository."""
    found = {}
    for top in ("ai/tasks/demo", "ai/exchanges/demo"):
        for path in sorted((s.root / top).rglob("*")):
            if path.is_file():
                found[path.relative_to(s.root).as_posix()] = path.read_bytes()
    return found


@pytest.mark.parametrize("mode", ["bwrap", "off"])
def test_the_same_run_in_two_folders_records_the_same_bytes_and_commits(
    tmp_path: Path, mode: str
) -> None:
    """Contained, a check sees the sandbox's paths; uncontained, the scratch copy's."""
    runs = [made(tmp_path / "a", mode), made(tmp_path / "somewhere" / "else" / "b", mode)]
    for s in runs:
        res = s.cli("run", "demo")
        assert res.returncode == 1 and "not complete" in res.stderr, res.stderr
    first, second = runs
    log = first.root / "ai/tasks/demo/progress.ndjson"
    text = log.read_text()
    # The refusal and the failing check are recorded, named as the repository names them.
    assert "git apply refused src/calc.py: error: patch failed: src/calc.py:1" in text
    assert "Ran 1 test in <time> |  | OK | ~/.cache | tests/check.py: subtract is missing" in text
    for s in runs:
        assert str(tmp_path).encode() not in b"".join(record(s).values())
    assert record(first) == record(second)
    commits = [s.git("log", "--format=%H %s") for s in runs]
    assert commits[0] == commits[1] and "Goal of T3" in commits[0]


def test_a_tail_names_the_scratch_copy_and_home_as_the_repository_does(tmp_path: Path) -> None:
    copy, home = tmp_path / "verify", tmp_path / "home-test"
    text = f"{copy}/tests/check.py: failed in {copy} with {home}/.cache, {sandbox.WORK}/x\n"
    said = "tests/check.py: failed in . with ~/.cache, x\n"
    assert verify.hostless(text, copy, home) == said
