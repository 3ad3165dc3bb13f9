"""Scratch-tree helpers: what untrusted code may leave in a copy never blocks or escapes harness."""

from __future__ import annotations

import os
from pathlib import Path

from harness import files


def test_copy_skips_specials_and_opens_locked_folders(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "locked").mkdir(parents=True)
    (src / "locked" / "f").write_text("x")
    (src / "link").symlink_to("/etc/passwd")
    os.mkfifo(src / "pipe")
    (src / "locked").chmod(0)
    files.copy_tree(src, tmp_path / "copy")
    copy = tmp_path / "copy"
    assert (copy / "locked" / "f").read_text() == "x"
    assert (copy / "link").is_symlink() and os.readlink(copy / "link") == "/etc/passwd"
    assert not (copy / "pipe").exists()
    files.wipe(src)
    assert not src.exists()


def test_untrusted_reads_refuse_links_fifos_and_cap_size(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"a" * 100)
    (tmp_path / "link").symlink_to(tmp_path / "big")
    os.mkfifo(tmp_path / "pipe")
    assert files.read_untrusted(tmp_path / "big", 10) == b"a" * 10
    assert files.read_untrusted(tmp_path / "link", 10) is None
    assert files.read_untrusted(tmp_path / "pipe", 10) is None
    assert files.read_untrusted(tmp_path / "missing", 10) is None
