"""The record commit carries what harness wrote or read under ai/, and nothing planted there."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.record import recordset
from harness.record.ledger import digest
from harness.repository.layout import Layout

from .builders import FAST, Waiting
from .conftest import Sample, calc_patch, ok, subtask

LOG = "ai/tasks/demo/progress.ndjson"


def layout_with(where: Path, found: Mapping[str, bytes]) -> Layout:
    (where / ".git").mkdir(parents=True)
    for rel, data in found.items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_bytes(data)
    return Layout(where)


def head(tree: Mapping[str, bytes]) -> recordset.Committed:
    return lambda paths: {p: digest(tree[p]) if p in tree else None for p in paths}


def test_a_file_is_taken_only_with_the_bytes_harness_entered(tmp_path: Path) -> None:
    call = "ai/exchanges/demo/" + "c" * 64
    disk = {
        "ai/tasks/demo/plan.json": b"plan",
        "ai/tasks/demo/checklist.md": b"rewritten",
        "ai/tasks/demo/notes.md": b"planted",
        f"{call}/stdout.ndjson": b"as recorded",
        f"{call}/stderr.log": b"rewritten",
        f"{call}/verify/00-test.json": b"planted",
        LOG: b"rewritten",
    }
    layout = layout_with(tmp_path, disk)
    entries = {
        "ai/tasks/demo/plan.json": digest(b"plan"),
        "ai/tasks/demo/checklist.md": digest(b"as written"),
        f"{call}/verify": None,
        f"{call}/meta.json": digest(b"meta"),
        LOG: digest(b"log"),
    }
    recorded = {f"{call}/stdout.ndjson": b"as recorded", f"{call}/stderr.log": b"as recorded"}
    found = recordset.collect(layout, "demo", entries, {LOG: b"log"}, head(recorded))
    assert found.taken == {"ai/tasks/demo/plan.json": b"plan", LOG: b"log"}
    assert found.dropped == [f"{call}/verify"]
    assert found.refused == [
        f"{call}/meta.json: missing",
        f"{call}/stderr.log: not written or read by harness",
        f"{call}/verify/00-test.json: not written by harness",
        "ai/tasks/demo/checklist.md: changed after harness wrote or read it",
        "ai/tasks/demo/notes.md: not written or read by harness",
        f"{LOG}: changed after harness wrote it",
    ]


def test_links_and_fifos_are_refused_never_followed_or_opened(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "meta.json").write_bytes(b"outside")
    layout = layout_with(tmp_path / "repo", {"ai/tasks/demo/plan.json": b"plan"})
    root = layout.root
    (root / "ai/exchanges").mkdir()
    (root / "ai/exchanges/demo").symlink_to(outside)
    (root / "ai/harness.toml").symlink_to(outside / "meta.json")
    pipe = Waiting(root / "ai/tasks/demo/checklist.md")
    entries = {
        "ai/tasks/demo/checklist.md": digest(b""),
        "ai/exchanges/demo/x/meta.json": digest(b"outside"),
    }
    found = recordset.collect(layout, "demo", entries, {}, head({}))
    pipe.assert_unopened()
    assert found.taken == {}
    assert found.refused == [
        "ai/exchanges/demo: a symlink",
        "ai/harness.toml: a symlink",
        "ai/tasks/demo/checklist.md: not a regular file",
        "ai/tasks/demo/plan.json: not written or read by harness",
    ]


CONTENT = st.sampled_from([b"", b"a", b"b"])
NAMES = st.sampled_from(["ai/harness.toml", "ai/tasks/demo/a", "ai/tasks/demo/b/c", LOG])
ENTRY = st.one_of(st.none(), st.just("none"), CONTENT.map(digest))


@FAST
@given(
    st.dictionaries(NAMES, CONTENT),
    st.dictionaries(NAMES, ENTRY),
    st.dictionaries(NAMES, CONTENT),
    st.one_of(st.none(), CONTENT),
)
def test_nothing_is_taken_but_the_bytes_entered_or_held(
    tmp_path: Path,
    disk: dict[str, bytes],
    ledger: dict[str, str | None],
    recorded: dict[str, bytes],
    log: bytes | None,
) -> None:
    entries = {p: None if sha == "none" else sha for p, sha in ledger.items() if sha is not None}
    held = {} if log is None else {LOG: log}
    layout = layout_with(Path(tempfile.mkdtemp(dir=tmp_path)), disk)
    found = recordset.collect(layout, "demo", entries, held, head(recorded))
    refused = {line.split(": ", 1)[0] for line in found.refused}
    for path, data in found.taken.items():
        assert data == held[path] if path in held else digest(data) == entries[path]
        assert path in held or data == disk[path]
    for path, data in disk.items():
        untouched = path not in held and path not in entries and recorded.get(path) == data
        assert (path in refused) != (found.taken.get(path) == data or untouched)
    assert found.dropped == sorted(p for p, sha in entries.items() if sha is None)


# -- through the command line --------------------------------------------------------------


def test_what_is_planted_under_ai_is_refused_and_never_opened(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("run", "demo").returncode == 0
    root = sample.root
    (call,) = [e["details"]["call_id"] for e in sample.events() if e["event"] == "step_completed"]
    exchange = root / "ai/exchanges/demo" / call
    recorded = sample.head()
    (root / "ai/exchanges/demo/planted.txt").write_text("not harness's")
    (root / "ai/exchanges/demo" / ("0" * 64)).mkdir()
    (root / "ai/exchanges/demo" / ("0" * 64) / "meta.json").write_text("{}")
    (root / "ai/tasks/demo/link").symlink_to("/etc/passwd")
    (exchange / "stderr.log").unlink()
    (exchange / "stderr.log").symlink_to(root / "README.md")
    pipes = [Waiting(root / "ai/tasks/demo/pipe"), Waiting(exchange / "artifacts/pipe")]
    res = sample.cli("next", "demo")  # the task is complete: only the record runs
    assert res.returncode == 0, res.stderr
    for pipe in pipes:
        pipe.assert_unopened()
    refused = [line for line in res.stderr.splitlines() if "not recorded" in line]
    assert refused == [
        f"harness: not recorded: ai/exchanges/demo/{'0' * 64}/meta.json: "
        "not written or read by harness",
        f"harness: not recorded: ai/exchanges/demo/{call}/artifacts/pipe: not a regular file",
        f"harness: not recorded: ai/exchanges/demo/{call}/stderr.log: a symlink",
        "harness: not recorded: ai/exchanges/demo/planted.txt: not written or read by harness",
        "harness: not recorded: ai/tasks/demo/link: a symlink",
        "harness: not recorded: ai/tasks/demo/pipe: not a regular file",
    ]
    assert sample.head() == recorded  # nothing harness wrote changed: no record commit


def test_a_clean_tree_is_recorded_whole_and_refuses_nothing(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    for _ in range(2):
        res = sample.cli("next", "demo")
        assert res.returncode == 0 and "not recorded" not in res.stderr, res.stderr
        assert sample.git("status", "--porcelain", "--untracked-files=all", "--", "ai") == ""
    tracked = sample.git("ls-tree", "-r", "--name-only", "HEAD", "--", "ai").split()
    assert {LOG, "ai/tasks/demo/plan.json", "ai/tasks/demo/checklist.md"} <= set(tracked)
    assert sample.git("show", f"HEAD:{LOG}").encode() == (sample.root / LOG).read_bytes()


@pytest.mark.parametrize("name", ["plan.json", "progress.ndjson"])
def test_a_link_in_place_of_a_file_harness_reads_is_refused(sample: Sample, name: str) -> None:
    sample.write_plan([subtask("T1")])
    path = sample.root / "ai/tasks/demo" / name
    if name == "plan.json":
        os.replace(path, sample.root / "plan.json")
    path.symlink_to(sample.root / "plan.json")
    res = sample.cli("next", "demo")
    assert res.returncode == 2
    assert res.stderr == f"harness: ai/tasks/demo/{name}: a symlink\n"
