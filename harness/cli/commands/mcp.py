"""`harness mcp`: harness's commands as tools of an MCP server on stdin and stdout."""

from __future__ import annotations

import argparse

from harness.cli import located, mcpserver


def serve(args: argparse.Namespace) -> int:
    mcpserver.server(located.repository(args).root).run()
    return 0
