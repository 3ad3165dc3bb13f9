"""Tampering with a recorded task is detected, over many generated mutations.

One task is recorded through the real CLI (two subtasks stepped one `next` at a time, so
subtask and record commits alternate); each mutation is applied to a copy of it. Audit runs
first (in-process, it is the cheap check); replay runs only when audit finds nothing, so a
mutation counts as detected when either one refuses it — as CI runs both.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.base.errors import HarnessError
from harness.readers import audit, replay
from harness.repository.layout import Layout
from tests.conftest import calc_patch, new_file_patch, ok, scripted, subtask

SEED = 20261122
LOG = "ai/tasks/demo/progress.ndjson"

Mutation = Callable[[Path], None]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A completed, committed task recorded through the real CLI."""
    sample = scripted(tmp_path_factory.mktemp("recorded"))
    sample.write_plan(
        [
            subtask("T1"),
            subtask("T2", depends_on=["T1"], creates=["src/extra.py"], inputs=[]),
        ]
    )
    sample.write_script(
        [
            ok("T1", ("src/calc.py", calc_patch())),
            ok("T2", ("src/extra.py", new_file_patch("src/extra.py", ["EXTRA = 2"]))),
        ]
    )
    for _ in range(3):
        assert sample.cli("next", "demo").returncode == 0
    assert sample.names()[-1] == "task_completed"
    assert audit.audit(Layout(sample.root), "demo").ok
    yield sample.root


def detected(root: Path) -> str | None:
    """Why audit or replay refuses the task in `root`, or None if neither does."""
    layout = Layout(root)
    try:
        found = audit.audit(layout, "demo")
    except HarnessError as exc:
        return f"audit: {exc}"
    if not found.ok:
        return f"audit: {found.findings[0].reason}"
    try:
        replay.replay(layout, "demo", verify=False)
    except HarnessError as exc:
        return f"replay: {exc}"
    return None


def check(recorded: Path, tmp_path: Path, mutations: list[tuple[str, Mutation]]) -> None:
    missed = []
    for n, (name, mutate) in enumerate(mutations):
        copy = tmp_path / f"m{n}"
        shutil.copytree(recorded, copy, symlinks=True)
        mutate(copy)
        if detected(copy) is None:
            missed.append(name)
        shutil.rmtree(copy)
    assert not missed, f"{len(missed)} of {len(mutations)} mutations went unnoticed: {missed[:10]}"


def flip(rel: str, offset: int, mask: int) -> tuple[str, Mutation]:
    def mutate(root: Path) -> None:
        path = root / rel
        data = bytearray(path.read_bytes())
        data[offset] ^= mask
        path.write_bytes(bytes(data))

    return f"flip {rel}@{offset}^{mask:#x}", mutate


def lines_edit(name: str, edit: Callable[[list[bytes]], list[bytes]]) -> tuple[str, Mutation]:
    def mutate(root: Path) -> None:
        path = root / LOG
        path.write_bytes(b"".join(edit(path.read_bytes().splitlines(keepends=True))))

    return name, mutate


def test_every_log_byte_flip_sample_is_detected(recorded: Path, tmp_path: Path) -> None:
    size = (recorded / LOG).stat().st_size
    rng = random.Random(SEED)
    offsets = [*sorted(rng.sample(range(size), 100)), 0, size - 2, size - 1]
    check(recorded, tmp_path, [flip(LOG, o, rng.randrange(1, 256)) for o in offsets])


def test_exchange_byte_flips_are_detected(recorded: Path, tmp_path: Path) -> None:
    paths = sorted(
        p.relative_to(recorded).as_posix()
        for p in (recorded / "ai/exchanges/demo").rglob("*")
        if p.is_file() and p.stat().st_size > 0
    )
    rng = random.Random(SEED + 1)
    mutations = []
    for rel in paths:  # every file of every exchange, meta.json and verify/ evidence included
        size = (recorded / rel).stat().st_size
        for offset in rng.sample(range(size), min(3, size)):
            mutations.append(flip(rel, offset, rng.randrange(1, 256)))
    assert len(mutations) >= 20
    check(recorded, tmp_path, mutations)


def test_deleting_any_line_is_detected(recorded: Path, tmp_path: Path) -> None:
    count = len((recorded / LOG).read_bytes().splitlines())
    mutations = [
        lines_edit(f"delete line {i}", lambda ls, i=i: ls[:i] + ls[i + 1 :]) for i in range(count)
    ]
    check(recorded, tmp_path, mutations)


def test_reordering_lines_is_detected(recorded: Path, tmp_path: Path) -> None:
    count = len((recorded / LOG).read_bytes().splitlines())
    rng = random.Random(SEED + 2)
    pairs = sorted({tuple(sorted(rng.sample(range(count), 2))) for _ in range(30)})

    def swap(lines: list[bytes], i: int, j: int) -> list[bytes]:
        out = list(lines)
        out[i], out[j] = out[j], out[i]
        return out

    mutations = [
        lines_edit(f"swap {i}<->{j}", lambda ls, i=i, j=j: swap(ls, i, j)) for i, j in pairs
    ]
    mutations.append(lines_edit("reverse", lambda ls: ls[::-1]))
    check(recorded, tmp_path, mutations)


def test_truncating_the_log_anywhere_is_detected(recorded: Path, tmp_path: Path) -> None:
    data = (recorded / LOG).read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")][:-1]  # at each line end
    rng = random.Random(SEED + 3)
    cuts = sorted(set(ends) | set(rng.sample(range(1, len(data)), 15)) | {0})

    def cut_at(at: int) -> tuple[str, Mutation]:
        def mutate(root: Path) -> None:
            (root / LOG).write_bytes(data[:at])

        return f"truncate at {at}", mutate

    check(recorded, tmp_path, [cut_at(at) for at in cuts])


def test_replay_on_its_own_refuses_a_damaged_record(recorded: Path, tmp_path: Path) -> None:
    """Replay does not lean on audit: the chain and the exchanges' hashes are its own checks."""
    size = (recorded / LOG).stat().st_size
    patches = sorted(recorded.glob("ai/exchanges/demo/*/patches/000.patch"))
    rng = random.Random(SEED + 4)
    mutations = [flip(LOG, o, 0x20) for o in rng.sample(range(size // 2), 5)]
    mutations += [flip(p.relative_to(recorded).as_posix(), 0, 0x01) for p in patches]
    mutations.append(lines_edit("delete line 3", lambda ls: ls[:3] + ls[4:]))
    missed = []
    for n, (name, mutate) in enumerate(mutations):
        copy = tmp_path / f"r{n}"
        shutil.copytree(recorded, copy, symlinks=True)
        mutate(copy)
        try:
            replay.replay(Layout(copy), "demo", verify=False)
        except HarnessError:
            continue
        missed.append(name)
    assert not missed


def test_the_untouched_record_passes_both(recorded: Path, tmp_path: Path) -> None:
    """The control: a copy nobody touched is clean, so the detections above are real."""
    copy = tmp_path / "same"
    shutil.copytree(recorded, copy, symlinks=True)
    assert detected(copy) is None
