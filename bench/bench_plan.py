"""Benchmark: validating and ordering a plan must grow linearly with its size.

A random DAG of N subtasks (each depending on up to three earlier-created ones), written with
dependants before what they depend on, goes through `harness plan validate` and
`harness plan show` on the demo repository, and through plan.load + plan.order in process.
Printed: each time for 1,000 and 10,000 subtasks, and the ratio. Target: time(10k) /
time(1k) <= 12 (linear is 10).

Usage: python bench/bench_plan.py [--small 1000] [--large 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fresh

from harness.base import files
from harness.importers import demo
from harness.repository.layout import Layout
from harness.spec import plan

CLOCK = "2026-01-01T00:00:00Z"


def write_plan(layout: Layout, n: int, seed: int) -> None:
    rng = random.Random(seed)
    made = []
    for i in range(n):
        deps = sorted({f"T{rng.randrange(i)}" for _ in range(rng.randint(0, 3))}) if i else []
        made.append(
            {
                "id": f"T{i}",
                "role": "localized-impl",
                "goal": f"Step {i}",
                "inputs": [],
                "acceptance": [],
                "write_scope": "src/**",
                "depends_on": deps,
            }
        )
    made.reverse()  # dependants first: the order must be computed, not read off
    doc = {"task_id": "big", "created": CLOCK, "subtasks": made}
    files.atomic_write(layout.plan("big"), files.pretty(doc))


def timed(root: Path) -> dict[str, float]:
    layout = Layout(root)
    found = {}
    start = time.perf_counter()
    plan.order(plan.load(layout.plan("big"), root, "big"))
    found["load+order"] = time.perf_counter() - start
    env = {**os.environ, "HARNESS_CLOCK": CLOCK}
    for command in ("validate", "show"):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "harness.cli", "plan", command, "big", "--repo", str(root)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        found[f"plan {command}"] = time.perf_counter() - start
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    fresh.bytecode()
    best: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
        for n in (args.small, args.large):
            root = Path(tmp) / f"r{n}"
            root.mkdir()
            demo.build(root)
            write_plan(Layout(root), n, seed=n)
            for _ in range(args.rounds):
                for name, secs in timed(root).items():
                    best.setdefault(n, {})[name] = min(best.get(n, {}).get(name, 1e9), secs)
    worst = 0.0
    for name in best[args.small]:
        small, large = best[args.small][name], best[args.large][name]
        ratio = large / small
        worst = max(worst, ratio)
        print(f"{name:14} {args.small}: {small:.3f} s  {args.large}: {large:.3f} s  ({ratio:.1f}x)")
    print(f"worst ratio: {worst:.1f}x (target <= 12x for 10x the subtasks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
