"""`harness mcp`: harness's commands as tools of an MCP server on stdin and stdout."""

from __future__ import annotations

import argparse

from harness.base.errors import InvalidInput
from harness.cli import located


def serve(args: argparse.Namespace) -> int:
    root = located.repository(args).root
    try:
        from harness.cli import mcpserver
    except ModuleNotFoundError as exc:
        # The SDK is an extra: without it, say how to get it, not a crash log.
        if exc.name is None or exc.name.split(".")[0] not in ("mcp", "mcp_types"):
            raise
        raise InvalidInput("harness mcp needs the MCP SDK: pip install 'harness[mcp]'") from None
    mcpserver.server(root).run()
    return 0
