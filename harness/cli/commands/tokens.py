"""`harness tokens issue|list|revoke`: the write tokens."""

from __future__ import annotations

import argparse

from harness.base import clock
from harness.cli import located
from harness.cli.output import print_json
from harness.record import tokens


def issue(args: argparse.Namespace) -> int:
    layout = located.repository(args)
    token_id = tokens.issue(
        layout.tokens, layout.root, args.paths, args.ttl, args.one_shot, clock.from_env().now(0)
    )
    print(token_id)
    return 0


def listing(args: argparse.Namespace) -> int:
    layout = located.repository(args)
    now = clock.from_env().now(0)
    known = tokens.load(layout.tokens, layout.root)
    if args.json:
        print_json({"tokens": [t.row(now) for t in known]})
        return 0
    for token in known:
        why = token.usable_at(now)
        shot = "one-shot" if token.one_shot else "reusable"
        print(f"{token.id}\t{' '.join(token.paths)}\t{token.expires}\t{shot}\t{why or 'usable'}")
    return 0


def revoke(args: argparse.Namespace) -> int:
    layout = located.repository(args)
    tokens.revoke(layout.tokens, layout.root, args.token_id)
    print(f"revoked {args.token_id}")
    return 0
