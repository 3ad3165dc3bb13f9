"""Worker programs that speak the harness protocol, started through launchers in agents/."""

from __future__ import annotations


def launcher(module: str) -> str:
    """The text of a launcher script: runs `module` with the Python that runs harness."""
    return (
        "#!/bin/sh\n"
        "# Launcher: harness sets HARNESS_PYTHON to its own interpreter.\n"
        f'exec "${{HARNESS_PYTHON:-python3}}" -m harness.workers.{module} "$@"\n'
    )
