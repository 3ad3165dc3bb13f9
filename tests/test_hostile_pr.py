"""A pull request's committed record, read by the commands CI runs on it.

Each case commits a change to a completed record that points harness outside the repository
(a symlink at some component, a FIFO where a file belongs); its twin commits the same change
made honestly, inside the repository. Every command CI runs on the hostile one — audit,
report, status, log, replay --verify — may refuse or flag it, but never crashes, never reads
the outside secret into an output, and never writes outside; the twin is accepted.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


# -- forged records: what the schemas take and harness never writes ----------------------------


def resealed(root: Path, change: Callable[[list[dict[str, object]]], None]) -> None:
    """The log with `change` made to its events and the hash chain made whole after it, as a
    forger would write it: canonical and chained."""
    path = root / "ai/tasks/demo/progress.ndjson"
    events = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    change(events)
    prev, out = "0" * 64, b""
    for event in events:
        event["prev"] = prev
        line = orjson.dumps(event, option=orjson.OPT_SORT_KEYS)
        out, prev = out + line + b"\n", hashlib.sha256(line).hexdigest()
    path.write_bytes(out)


def _set(at: int, key: str, value: object, inside: str | None = None) -> Callable[..., None]:
    def change(events: list[dict[str, Any]]) -> None:
        (events[at][inside] if inside else events[at])[key] = value

    return change


def binary_artifact(root: Path) -> None:
    """On T1's call, whose artifacts T2 (which depends on it) is given."""
    log = (root / "ai/tasks/demo/progress.ndjson").read_bytes().splitlines()
    invoked = [orjson.loads(line) for line in log if b'"subagent_invoked"' in line]
    t1 = next(e for e in invoked if e["step"] == "T1")["details"]["call_id"]
    folder = root / "ai/exchanges/demo" / t1
    (folder / "artifacts").mkdir(exist_ok=True)
    (folder / "artifacts/x.txt").write_bytes(b"\xff\xfe")
    meta = orjson.loads((folder / "meta.json").read_bytes())
    meta["files"]["artifacts/x.txt"] = hashlib.sha256(b"\xff\xfe").hexdigest()
    (folder / "meta.json").write_bytes(orjson.dumps(meta))


def replace_in(rel: str, old: str, new: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        path = root / rel
        path.write_text(path.read_text().replace(old, new, 1))

    return change


FORGED: dict[str, Callable[[Path], None]] = {
    "seq 1.0": lambda root: resealed(root, _set(1, "seq", 1.0)),
    "30 February": lambda root: resealed(root, _set(3, "ts", "2026-02-30T00:00:00Z")),
    "unverified 5": lambda root: resealed(root, _set(5, "unverified", 5, "details")),
    "binary artifact": binary_artifact,
    "a 13th month": replace_in("ai/agents/write_tokens.json", "2026-01-02", "2026-13-02"),
    "no regex": replace_in(
        "ai/harness.toml", "[verify]", '[verify]\nlicense = { header = "[", paths = ["**"] }'
    ),
    "deep plan": replace_in(
        "ai/tasks/demo/plan.json", '"created"', '"x": ' + "[" * 5000 + "]" * 5000 + ', "created"'
    ),
}


@pytest.mark.parametrize("case", sorted(FORGED))
def test_a_forged_record_is_refused_or_flagged_never_a_crash(
    completed: Path, tmp_path: Path, case: str
) -> None:
    """Each of these, put into the record commit as a forged pull request would, crashed a
    command CI runs on it (exit 4). Replay, which derives the record again, refuses each."""
    root = tmp_path / "repo"
    shutil.copytree(completed, root, symlinks=True)
    sample = Sample(root, root / "agents" / "script.json")
    FORGED[case](root)
    sample.git("add", "-A")
    sample.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--amend", "--no-edit")
    for command in sorted(COMMANDS):
        done = run(sample, command, tmp_path / "report.html")
        assert done.returncode != 4, (command, done.stderr)
        if command != "audit":  # the audit's findings are a line each
            assert len(done.stderr.splitlines()) <= 1, (command, done.stderr)
        if command == "replay" or (command == "audit" and case != "no regex"):
            assert done.returncode != 0, (command, done.stdout)  # audit judges no config
        if command == "audit" and case == "binary artifact":
            assert "artifacts/x.txt is not UTF-8 text" in done.stdout
