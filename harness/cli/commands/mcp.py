"""`harness mcp`: harness's commands as tools of an MCP server on stdin and stdout."""

from __future__ import annotations

import argparse

from harness.cli import extras, located


def serve(args: argparse.Namespace) -> int:
    root = located.repository(args).root
    try:
        from harness.cli import mcpserver
    except ModuleNotFoundError as exc:
        # The SDK is an extra: without it, say how to get it, not a crash log.
        raise extras.missing(exc, "mcp", "harness mcp") from None
    mcpserver.server(root).run()
    return 0
