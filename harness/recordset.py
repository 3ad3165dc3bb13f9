"""What a record commit may carry: harness's own files under ai/, and nothing planted there.

Everything is looked at with lstat and never followed: a symlink, FIFO, socket or device is
refused, and so is anything in a task's exchange folder that is not an exchange harness made.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from .layout import Layout

CALL_ID = re.compile(r"[0-9a-f]{64}")


def collect(layout: Layout, task_id: str) -> tuple[list[str], list[str]]:
    """(repository-relative files to commit, one line per entry refused), both sorted."""
    root = layout.root
    kept: list[str] = []
    refused: list[str] = []
    singles = [layout.config, layout.registry, layout.tokens]
    for path in singles:
        _take(path, root, kept, refused)
    for top in (layout.task_dir(task_id), layout.exchanges(task_id)):
        try:
            mode = top.lstat().st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(mode):
            refused.append(f"{_rel(top, root)}: not a folder")
            continue
        for folder, dirs, names in os.walk(top):
            here = Path(folder)
            for name in sorted(dirs):
                if (here / name).is_symlink():
                    refused.append(f"{_rel(here / name, root)}: a symlink")
            dirs[:] = sorted(d for d in dirs if not (here / d).is_symlink())
            if here == layout.exchanges(task_id):
                foreign = [
                    d
                    for d in dirs
                    if not (CALL_ID.fullmatch(d) and (here / d / "meta.json").is_file())
                ]
                refused += [
                    f"{_rel(here / d, root)}: not an exchange harness made" for d in foreign
                ]
                dirs[:] = [d for d in dirs if d not in foreign]
                refused += [
                    f"{_rel(here / n, root)}: not an exchange harness made" for n in sorted(names)
                ]
                continue
            for name in sorted(names):
                _take(here / name, root, kept, refused)
    return sorted(kept), sorted(refused)


def _exchange(folder: Path) -> bool:
    return CALL_ID.fullmatch(folder.name) is not None and (folder / "meta.json").is_file()


def _take(path: Path, root: Path, kept: list[str], refused: list[str]) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode):
        kept.append(_rel(path, root))
    else:
        refused.append(f"{_rel(path, root)}: not a regular file")


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()
