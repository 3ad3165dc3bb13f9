"""The scripted worker's sleep_s: the seconds from its start to its answer."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from harness.importers import demo
from harness.repository.layout import Layout
from harness.workers import scripted


@pytest.fixture(scope="module")
def envelope(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A two-line envelope for T1 as harness sends it, read from a demo run's exchange."""
    root = tmp_path_factory.mktemp("demo") / "repo"
    demo.build(root)
    subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "demo", "--repo", str(root)],
        check=True,
        capture_output=True,
        env={"HARNESS_CLOCK": "2026-01-01T00:00:00Z", "PATH": os.defpath},
    )
    for folder in sorted(Layout(root).exchanges("demo").iterdir()):
        prompt = (folder / "prompt.ndjson").read_bytes()
        if orjson.loads(prompt)["payload"]["subtask"] == "T1":
            return (folder / "context.ndjson").read_bytes() + prompt
    raise AssertionError("the demo made no call for T1")


def _play(
    tmp_path: Path, envelope: bytes, sleep_s: float, wait_first: float
) -> tuple[float, dict[str, object]]:
    """Run the worker on a call for T1 answering after `sleep_s`, its own imports started
    `wait_first` seconds after its process did; (wall time, its answer)."""
    script = tmp_path / "script.json"
    script.write_bytes(orjson.dumps({"answers": [{"subtask": "T1", "sleep_s": sleep_s}]}))
    code = (
        f"import time, runpy, sys; time.sleep({wait_first}); "
        f"sys.argv = ['scripted-cli', '--script', {str(script)!r}]; "
        "runpy.run_module('harness.workers.scripted', run_name='__main__')"
    )
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code], input=envelope, capture_output=True, check=False
    )
    took = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    return took, orjson.loads(done.stdout)


@pytest.mark.parametrize(("sleep_s", "age", "slept"), [(1.0, 1.0, 0.0), (1.5, 1.0, 0.5), (1, 3, 0)])
def test_sleep_s_counts_from_the_process_start_not_from_the_answer(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sleep_s: float,
    age: float,
    slept: float,
) -> None:
    waits: list[float] = []
    monkeypatch.setattr(scripted, "_age", lambda: age)
    monkeypatch.setattr(scripted.time, "sleep", waits.append)
    assert scripted._play({"subtask": "T1", "sleep_s": sleep_s}, "a", "demo", "ts") == 0
    assert waits == [slept]
    assert orjson.loads(capsys.readouterr().out)["status"] == "ok"


def test_a_process_age_counts_from_its_fork(tmp_path: Path) -> None:
    code = (
        "import time; time.sleep(0.5); from harness.workers import scripted; print(scripted._age())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(done.stdout) >= 0.5


def test_sleep_s_is_never_shorter_than_asked(tmp_path: Path, envelope: bytes) -> None:
    took, answer = _play(tmp_path, envelope, 0.6, wait_first=0.0)
    assert answer["status"] == "ok" and took >= 0.6


def test_a_negative_sleep_s_answers_at_once(tmp_path: Path, envelope: bytes) -> None:
    _, answer = _play(tmp_path, envelope, -5, wait_first=0.0)
    assert answer["status"] == "ok"
