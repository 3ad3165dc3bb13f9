"""A pull request's committed record, read by the commands CI runs on it.

Each case commits a change to a completed record that points harness outside the repository
(a symlink at some component, a FIFO where a file belongs); its twin commits the same change
made honestly, inside the repository. Every command CI runs on the hostile one — audit,
report, status, log, replay --verify — may refuse or flag it, but never crashes, never reads
the outside secret into an output, and never writes outside; the twin is accepted.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from tests.conftest import Sample, completed_demo

SECRET = "S3CRET-from-the-runner"


@pytest.fixture(scope="module")
def completed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return completed_demo(tmp_path_factory.mktemp("completed")).root


def first_call(root: Path) -> Path:
    folder = root / "ai/exchanges/demo"
    return folder / sorted(p.name for p in folder.iterdir())[0]


def evidence(folder: Path, command: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"check": "test", "command": command, "runs": [], "network": "none"}
    (folder / "test.json").write_bytes(orjson.dumps(doc))


def into(outside: Path, root: Path, rel: str, hostile: bool) -> None:
    """`rel` moved outside the repository, where the runner's secret joins it, and a symlink
    left in its place; its twin stays where it is, a plain file or folder."""
    if hostile:
        target, moved = root / rel, outside / rel.replace("/", "_")
        shutil.move(target, moved)
        target.symlink_to(moved)
        if moved.is_dir():
            (moved / "secret.txt").write_text(SECRET)
        else:
            with moved.open("a") as fh:
                fh.write(SECRET + "\n")


def verify_folder(outside: Path, root: Path, hostile: bool) -> None:
    """The case the issue names: an exchange's verify/ evidence symlinked to a folder of the
    runner's, whose command the report would publish."""
    verify = first_call(root) / "verify"
    if hostile:
        evidence(outside / "runner", SECRET)
        shutil.rmtree(verify, ignore_errors=True)
        verify.symlink_to(outside / "runner")
    else:
        evidence(verify, "pytest -q twin-evidence")


def exchanges_folder(outside: Path, root: Path, hostile: bool) -> None:
    into(outside, root, "ai/exchanges/demo", hostile)


def task_folder(outside: Path, root: Path, hostile: bool) -> None:
    into(outside, root, "ai/tasks/demo", hostile)


def log_file(outside: Path, root: Path, hostile: bool) -> None:
    into(outside, root, "ai/tasks/demo/progress.ndjson", hostile)


def ai_folder(outside: Path, root: Path, hostile: bool) -> None:
    into(outside, root, "ai", hostile)


def input_file(rel: str) -> Callable[[Path, Path, bool], None]:
    return lambda outside, root, hostile: into(outside, root, rel, hostile)


CASES: dict[str, Callable[[Path, Path, bool], None]] = {
    "verify folder": verify_folder,
    "exchanges folder": exchanges_folder,
    "task folder": task_folder,
    "log file": log_file,
    "ai folder": ai_folder,
    "plan file": input_file("ai/tasks/demo/plan.json"),
    "config file": input_file("ai/harness.toml"),
    "registry file": input_file("ai/agents/registry.json"),
}
COMMANDS = {
    "audit": ("audit", "demo"),
    "report": ("report", "demo", "-o", "{out}"),
    "status": ("status", "demo"),
    "log": ("log", "demo"),
    "replay": ("replay", "demo", "--verify"),
}


def snapshot(folder: Path) -> dict[str, bytes | str]:
    found: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink() or not path.is_file():
            found[rel] = "folder" if path.is_dir() else "special"
        else:
            found[rel] = path.read_bytes()
    return found


def pull_request(completed: Path, tmp_path: Path, case: str, hostile: bool) -> tuple[Sample, Path]:
    root = tmp_path / "repo"
    shutil.copytree(completed, root, symlinks=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    sample = Sample(root, root / "agents" / "script.json")
    CASES[case](outside, root, hostile)
    sample.git("add", "-A")  # a twin may change nothing: its pull request is empty
    sample.git(
        "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", case
    )
    return sample, outside


def run(sample: Sample, command: str, out: Path) -> subprocess.CompletedProcess[str]:
    args = [a.replace("{out}", str(out)) for a in COMMANDS[command]]
    return sample.cli(*args, timeout=120)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_record_is_read_only_inside(
    completed: Path, tmp_path: Path, case: str, command: str
) -> None:
    sample, outside = pull_request(completed, tmp_path, case, hostile=True)
    before = snapshot(outside)
    out = tmp_path / "report.html"
    done = run(sample, command, out)
    assert done.returncode != 4, done.stderr
    shown = done.stdout + done.stderr + (out.read_text() if out.exists() else "")
    assert SECRET not in shown
    assert snapshot(outside) == before
    if command in ("audit", "replay"):  # what CI gates on never passes a forged record
        assert done.returncode != 0, done.stdout


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_honest_twin_is_accepted(completed: Path, tmp_path: Path, case: str, command: str) -> None:
    sample, _ = pull_request(completed, tmp_path, case, hostile=False)
    out = tmp_path / "report.html"
    done = run(sample, command, out)
    if case == "verify folder" and command == "audit":
        # evidence no run wrote: audit holds verify/ to the log (and the twin's is made up)
        assert done.returncode != 4, done.stderr
        return
    assert done.returncode == 0, done.stdout + done.stderr
    if case == "verify folder" and command == "report":
        assert "pytest -q twin-evidence" in out.read_text()


def test_next_refuses_to_write_through_a_committed_symlink(sample: Sample, tmp_path: Path) -> None:
    """ai/exchanges committed as a symlink out of the repository: `next` refuses in one line
    before it calls anyone, and writes nothing there; its twin, a plain folder, runs."""
    outside = tmp_path / "outside"
    outside.mkdir()
    from tests.conftest import calc_patch, ok, subtask

    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    (sample.root / "ai/exchanges").symlink_to(outside)
    sample.commit_all("exchanges elsewhere")
    done = sample.cli("next", "demo")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "harness: ai/exchanges: a symlink: harness writes only into plain folders of the repository"
    ]
    assert list(outside.iterdir()) == []
    assert not (sample.root / "ai/tasks/demo/progress.ndjson").exists()
    (sample.root / "ai/exchanges").unlink()
    (sample.root / "ai/exchanges").mkdir()
    assert sample.cli("next", "demo").returncode == 0
