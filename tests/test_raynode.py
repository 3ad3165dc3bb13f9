"""What a Ray node is sent and sends back, as bytes (harness/step/raynode.py), and the pack of
a commit's or tree's objects it builds its throw-away repository from (Trees.objects,
repo.holding). The node's runs themselves are proven on a real cluster (test_rayexec.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.errors import HarnessError
from harness.repository import repo
from harness.step import raynode


def test_a_pack_holds_a_commit_and_a_tree_without_history_and_writes_no_ref(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    git = ["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    for i in range(2):
        (src / "a.txt").write_text(f"version {i}\n")
        (src / "run.sh").write_text("#!/bin/sh\n")
        (src / "run.sh").chmod(0o755)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", f"c{i}"], check=True)
    refs = subprocess.run([*git, "show-ref"], capture_output=True, text=True).stdout
    made = repo.Repo(src)
    head = made.head()
    tree = made.tree_of(f"{head}^")
    pack = made.objects([head, tree])
    with pytest.raises(HarnessError, match="could not pack"):
        made.objects(["0" * 40])  # an object it does not hold: no empty pack sent on
    made.close()
    assert subprocess.run([*git, "show-ref"], capture_output=True, text=True).stdout == refs
    node = repo.holding(tmp_path / "node", pack)
    try:
        assert node.tree_of(head) == repo.Repo(src).tree_of(head)
        assert node.show(head, "a.txt") == "version 1\n"
        assert node.show(tree, "a.txt") == "version 0\n"
        assert not node.exists(f"{head}^")  # the history stays behind
        node.export(tree, tmp_path / "out")
        assert (tmp_path / "out" / "run.sh").stat().st_mode & 0o111
    finally:
        node.close()


names = st.lists(
    st.text(st.characters(codec="ascii", exclude_characters="/\0"), min_size=1, max_size=8).filter(
        lambda p: p not in (".", "..")
    ),
    min_size=1,
    max_size=3,
).map("/".join)


@given(st.dictionaries(names, st.binary(max_size=64), max_size=6))
def test_files_read_back_as_they_were_put(
    tmp_path_factory: pytest.TempPathFactory, found: dict[str, bytes]
) -> None:
    folder = tmp_path_factory.mktemp("put") / "f"
    # A name that is also another's folder cannot be both: keep the files that fit.
    kept = {k: v for k, v in found.items() if not any(o.startswith(k + "/") for o in found)}
    raynode.put(folder, kept)
    assert raynode.taken(folder) == kept


@pytest.mark.parametrize("bad", ["../x", "/etc/passwd", "a/../../x", ""])
def test_a_name_out_of_its_folder_is_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="not a path below a folder"):
        raynode.put(tmp_path / "f", {bad: b"x"})
    assert not (tmp_path / "x").exists()
    assert raynode.checked("a/b.json") == "a/b.json"  # the twin: a name below it
