"""Benchmark: the diff gate on a hostile `diff --git` header against an ordinary diff.

A header like `diff --git a/x b/x b/x b/…` splits into old and new names at every " b/";
trying each split costs the square of its length. Three entries of the same size go
through `diffgate.check` in the same run:

- ordinary: one file, one hunk of short changed lines;
- hostile, named: `a/P b/P` where P is "x b/" repeated, with `---`/`+++` lines naming P;
- hostile, unnamed: `diff --git a/` + "x b/" repeated, with no other header naming a side.

Printed: each one's best time and the hostile ones' ratio to the ordinary one. The gate is
linear when the ratios stay put as --mb grows (a quadratic split multiplies them by it).

Usage: python bench/bench_gate.py [--mb 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from harness.gate.diffgate import DiffRefused, Rules, check

OPEN = Rules(
    write_scope=("**",),
    token_paths=("**",),
    readonly=(),
    creates=("**",),
    cited=frozenset(),
    manifests=(),
    no_new_deps=False,
    max_bytes=1 << 30,
)
HUNK = "@@ -1 +1 @@\n-old\n+new\n"


def ordinary(size: int) -> tuple[str, str]:
    lines = size // 40  # two lines of 20 characters each
    minus = "".join(f"-value_{i:08d} = 1\n" for i in range(lines))
    plus = "".join(f"+value_{i:08d} = 2\n" for i in range(lines))
    head = "diff --git a/src/big.py b/src/big.py\n--- a/src/big.py\n+++ b/src/big.py\n"
    return "src/big.py", f"{head}@@ -1,{lines} +1,{lines} @@\n{minus}{plus}"


def hostile_named(size: int) -> tuple[str, str]:
    # the name appears four times: twice in `diff --git`, once each in ---/+++
    path = "x b/" * (size // 16) + "x"
    return path, f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n{HUNK}"


def hostile_unnamed(size: int) -> tuple[str, str]:
    return "x", "diff --git a/" + "x b/" * (size // 4) + "\n" + HUNK


def best(file: str, patch: str, rounds: int) -> tuple[float, str]:
    rules = dataclasses.replace(OPEN, cited=frozenset({file}))
    timings, outcome = [], "accepted"
    for _ in range(rounds):
        start = time.perf_counter()
        try:
            check([{"file": file, "patch": patch}], rules)
        except DiffRefused as refused:
            outcome = f"refused: {refused.reason}"
        timings.append(time.perf_counter() - start)
    return min(timings), outcome


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    size = int(args.mb * 1_000_000)
    base, outcome = best(*ordinary(size), args.rounds)
    print(f"entry size: {args.mb:g} MB, best of {args.rounds}")
    print(f"ordinary diff:   {base * 1000:7.1f} ms ({outcome})")
    for name, build in (("hostile, named", hostile_named), ("hostile, unnamed", hostile_unnamed)):
        file, patch = build(size)
        took, outcome = best(file, patch, args.rounds)
        print(f"{name + ':':17}{took * 1000:7.1f} ms, {took / base:.2f}x ordinary ({outcome})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
