"""Benchmark: checks run ahead, as a merge queue runs them, against checks one at a time.

Eight independent subtasks (each creates a file of its own) whose [verify] test takes
`--check` seconds a run, run twice per landing, with `--max-parallel 4`. The worker answers
at once, so the wall time is the checks': all check work divided by the slots is the ideal
(8 landings x 2 runs x 2 s / 4 = 8 s). The same plan is run in the same run with
`--serial-checks` (each landing checked only at its turn: ~8 x 4 s = 32 s). Each run is a
fresh `harness run` process, so its start-up and each call's sandboxed worker count too.
Both runs' commits are compared: the same trees must land either way.

Target: wall / ideal <= 1.3x.

Usage: python bench/bench_ahead.py [--subtasks 8] [--check 2] [--slots 4] [--rounds 1]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import bench_parallel as parallel
import fresh

from harness.repository.layout import Layout

TARGET = 1.3


def prepare(root: Path, n: int, check_s: float) -> None:
    """bench_parallel's plan of n independent subtasks, answered at once, in the demo
    sample whose only check is a test taking `check_s`."""
    parallel.prepare(root, n, 0.0, checks=False)
    Layout(root).config.write_text(
        '[identity]\nname = "bench"\nemail = "bench@example.invalid"\n\n'
        f'[verify]\ntest = "sleep {check_s:g}"\n'
    )


def run_harness(root: Path, slots: int, serial: bool) -> tuple[float, str]:
    """Wall time of one `harness run`, and the trees its subtasks' commits hold."""
    took = parallel.run_harness(root, slots, *(["--serial-checks"] if serial else []))
    trees = subprocess.run(
        ["git", "-C", str(root), "log", "--format=%T %s", "--grep=^Harness-Subtask:"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return took, trees


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subtasks", type=int, default=8)
    parser.add_argument("--check", type=float, default=2.0, help="seconds per test run")
    parser.add_argument("--slots", type=int, default=4, help="--max-parallel of the run")
    parser.add_argument("--rounds", type=int, default=1, help="best of")
    args = parser.parse_args()
    fresh.bytecode()
    if min(args.subtasks, args.slots, args.rounds) < 1 or args.check <= 0:
        parser.error("--subtasks, --slots and --rounds must be >= 1, --check > 0")
    n, slots = args.subtasks, args.slots
    work = n * 2 * args.check
    ideal = work / slots
    print(
        f"subtasks: {n}, test run: {args.check:g} s (twice per landing), slots: {slots}, "
        f"best of {args.rounds}; check work {work:g} s, ideal {ideal:g} s"
    )
    walls, trees = {}, {}
    for serial in (False, True):
        best = float("inf")
        for r in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
                root = Path(tmp) / f"r{r}" / "repo"
                prepare(root, n, args.check)
                took, trees[serial] = run_harness(root, slots, serial)
                best = min(best, took)
        walls[serial] = best
    ahead, serial = walls[False], walls[True]
    ratio = ahead / ideal
    print(f"checks ahead:   {ahead:.2f} s, wall/ideal {ratio:.3f}x")
    print(f"--serial-checks: {serial:.2f} s, wall/ideal {serial / ideal:.3f}x")
    print(f"ahead / serial: {ahead / serial:.3f}x")
    print(f"same trees landed: {trees[False] == trees[True]}")
    print(f"target <= {TARGET}x the ideal: {'met' if ratio <= TARGET else 'MISSED'}")
    return 0 if trees[False] == trees[True] else 1


if __name__ == "__main__":
    sys.exit(main())
