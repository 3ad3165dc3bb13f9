"""`harness policy show`: the flags an agent's CLI gets under ai/policy.toml."""

from __future__ import annotations

import argparse
import shlex

from harness.base.printable import printable
from harness.cli import located
from harness.cli.output import print_json
from harness.workers import preview


def show(args: argparse.Namespace) -> int:
    shown = preview.show(located.repository(args), args.agent)
    if args.json:
        print_json(shown)
        return 0
    where = shown["policy"] or "none (no ai/policy.toml: flags as without one)"
    print(f"agent: {printable(shown['agent'])}\ncli: {shown['cli'] or '-'}\npolicy: {where}")
    if shown["tools"] is not None:
        print(f"tools: {', '.join(shown['tools']) or 'none'} (its registry entry's: no other)")
    if shown["model"] is not None:
        print(f"model: {printable(shown['model'])}")
    print(f"launch: {printable(shlex.join(shown['launch']))}")
    if shown["cli"] is None:
        print("(no harness shim of an agent CLI: of the policy it gets the commands it keeps)")
        return 0
    for key, label in (("writable", "writable"), ("read_only", "read-only")):
        print(f"{label}: {printable(shlex.join(shown[key]))}")
    copy, home = shown["workspace"], shown["home"]
    print(f"($WORKSPACE is each call's throw-away copy, shown as {copy}; ~ is {home})")
    return 0
