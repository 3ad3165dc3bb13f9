"""What a command says when a library of an optional extra (`pip install 'harness[X]'`) is
not installed: one line naming the extra, exit 2."""

from __future__ import annotations

from harness.base.errors import InvalidInput

SIGN = ("securesystemslib", "cryptography")


def missing(
    exc: ModuleNotFoundError, extra: str, libraries: tuple[str, ...], what: str
) -> Exception:
    """The one-line error for `exc` when it names one of the extra's `libraries`; otherwise
    `exc` itself, to be raised again (a module of harness missing is a bug, not a choice)."""
    if exc.name is None or exc.name.split(".")[0] not in libraries:
        return exc
    return InvalidInput(f"{what} needs {exc.name}: pip install 'harness[{extra}]'")
