"""What a command says when a library of an optional extra (`pip install 'harness[X]'`) is
not installed: one line naming the extra, exit 2."""

from __future__ import annotations

from harness.base.errors import InvalidInput


def missing(exc: ModuleNotFoundError, extra: str, what: str) -> Exception:
    """The one-line error for `exc`, raised importing what the extra brings; `exc` itself,
    to be raised again, when the module missing is harness's own (a bug, not a choice).

    Any other module counts as the extra's: an extra brings libraries of its own and theirs
    (the MCP SDK needs anyio, pydantic, httpx...), and a plain install lacks all of them."""
    if exc.name is None or exc.name.split(".")[0] == "harness":
        return exc
    return InvalidInput(f"{what} needs {exc.name}: pip install 'harness[{extra}]'")
