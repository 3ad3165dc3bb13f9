"""One harness per task and one per repository: a second holder is busy at once."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.base.errors import Busy
from harness.repository.layout import Layout
from harness.repository.locks import locked


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return Layout(tmp_path)


def test_a_second_holder_of_the_task_is_busy_with_exit_3(layout: Layout) -> None:
    held, second = locked(layout, "demo", wait=False), locked(layout, "demo", wait=False)
    with held, pytest.raises(Busy) as busy, second:
        pass
    assert busy.value.exit_code == 3
    path = layout.state / "locks" / "demo.lock"
    assert str(busy.value) == f"task demo is busy: another harness holds {path}"
    with locked(layout, "demo", wait=False):  # both locks given back
        pass


def test_another_task_in_the_same_repository_is_busy_too(layout: Layout) -> None:
    held, other = locked(layout, "demo", wait=False), locked(layout, "other", wait=False)
    with held, pytest.raises(Busy, match=r"^the repository is busy: "), other:
        pass
    # The busy one gave back its task's lock, taken before the repository's.
    with locked(layout, "other", wait=False):
        pass
