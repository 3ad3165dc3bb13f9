"""`harness init`: the ai/ files a repository needs, those missing only."""

from __future__ import annotations

import argparse
import sys

from harness.cli import located
from harness.importers import scaffold


def init(args: argparse.Namespace) -> int:
    made = scaffold.init(located.repository(args), args.gemini, args.opencode, args.copilot)
    print("created " + ", ".join(made) if made else "nothing to do: ai/ is already set up")
    for note in scaffold.missing(args.gemini, args.opencode, args.copilot):
        print(note, file=sys.stderr)
    return 0
