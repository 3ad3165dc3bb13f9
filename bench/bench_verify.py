"""Benchmark the verification gate.

1. Overhead: `harness run` of N trivial subtasks with `[verify] build = "true"` and
   `test = "true"`, against the same run with no verify commands plus the three commands run
   directly (one build, two tests) per subtask. Target: <= 1.5x.
2. Concurrency: the two test runs of a ~2 s suite, side by side (`parallel_runs = true`)
   against one after the other.

Usage: python bench/bench_verify.py [--subtasks 20]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fresh
from bench_run import prepare, run_harness

from harness.checks.verify import Runner
from harness.repository.layout import Layout

SUITE = "python3 -c 'import time; time.sleep(2)'"


def direct(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n * 3):
        subprocess.run(["/bin/sh", "-c", "true"], check=True)
    return time.perf_counter() - start


def gate_overhead(n: int) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
        plain = Path(tmp) / "plain" / "repo"
        prepare(plain, n)
        bare = run_harness(plain)
        gated = Path(tmp) / "gated" / "repo"
        prepare(gated, n)
        config = Layout(gated).config
        config.write_text(config.read_text() + '\n[verify]\nbuild = "true"\ntest = "true"\n')
        with_gate = run_harness(gated)
    return with_gate, bare, direct(n)


def concurrency() -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
        dirs = [Path(tmp) / "a", Path(tmp) / "b"]
        for d in dirs:
            d.mkdir()
        runner = Runner(Path(tmp) / "runs", 60, isolate_network=True)
        timings = []
        for parallel in (True, False):
            start = time.perf_counter()
            check = runner.twice("test", SUITE, dirs, parallel)
            timings.append(time.perf_counter() - start)
            assert check.passed, check.summary()
    return timings[0], timings[1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subtasks", type=int, default=20)
    args = parser.parse_args()
    fresh.bytecode()
    with_gate, bare, commands = gate_overhead(args.subtasks)
    baseline = bare + commands
    print(f"subtasks: {args.subtasks}")
    print(f"harness run with build+test=true:     {with_gate:.2f} s")
    print(f"harness run without verify commands: {bare:.2f} s")
    print(f"the 3 commands run directly:          {commands:.2f} s")
    print(f"gate ratio: {with_gate / baseline:.2f}x (target <= 1.5x)")
    par, seq = concurrency()
    print(
        f"two runs of a 2 s suite: concurrent {par:.2f} s, sequential {seq:.2f} s "
        f"({seq / par:.2f}x faster side by side)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
