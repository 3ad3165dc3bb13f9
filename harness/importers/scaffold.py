"""`harness init`: the files a repository needs before its first task, each written only
where none is, so a person's own is never overwritten."""

from __future__ import annotations

import os
import shutil

from harness.base import files
from harness.boundary import installed, registry
from harness.boundary.launchers import launcher
from harness.record import tokens
from harness.repository.layout import Layout
from harness.spec import config


def shims(gemini: bool, opencode: bool = False, copilot: bool = False) -> list[str]:
    """The shims `init` registers: claude and codex always, the others when asked for."""
    asked = {"gemini": gemini, "opencode": opencode, "copilot": copilot}
    return ["claude", "codex", *(name for name, wanted in asked.items() if wanted)]


def init(layout: Layout, gemini: bool, opencode: bool = False, copilot: bool = False) -> list[str]:
    """Write the config, the registry, the token store and the agents' launchers that are
    missing; the repository paths written, in that order."""
    names = shims(gemini, opencode, copilot)
    wanted = [
        (layout.config, config.DEFAULT_TEXT.encode()),
        (layout.registry, files.pretty(registry.default(names))),
        (layout.tokens, files.pretty(tokens.DEFAULT)),
    ]
    wanted += [
        (layout.ai / "agents" / "bin" / f"{name}-cli", launcher(name).encode()) for name in names
    ]
    for path, _ in wanted:
        files.check_folders(layout.root, path)  # all refused before any is written
    made = []
    for path, data in wanted:
        if not path.exists():
            files.atomic_write(path, data)
            if path.parent.name == "bin":
                path.chmod(0o755)
            made.append(path.relative_to(layout.root).as_posix())
    return made


def missing(gemini: bool, opencode: bool = False, copilot: bool = False) -> list[str]:
    """One line for each CLI the registry `init` writes names that is not on PATH."""
    path = os.environ.get("PATH", os.defpath)
    return [
        f"note: {name} is not on PATH: the {name} agent cannot run until it is "
        f"(npm install -g {installed.PACKAGES[name]})"
        for name in shims(gemini, opencode, copilot)
        if shutil.which(name, path=path) is None
    ]
