"""Benchmark: `harness run --max-parallel 4` of eight independent subtasks whose worker takes 2 s.

Each subtask creates a file of its own (src/p<i>.py), so none depends on another and any
order of landing applies. The scripted worker sleeps `--sleep` seconds per call, so the
ideal wall time is ceil(subtasks / slots) x sleep: 8 calls / 4 slots x 2 s = 4 s. The same
plan is run with --max-parallel 1 in the same run as the baseline (ideal 8 x 2 s = 16 s,
so ~4x slower). Target: parallel wall / ideal <= 1.25x.

Changes are committed one at a time in plan order; with several slots their checks run
ahead of their turn (bench_ahead.py measures that), but a landing's own check run still
adds to the wall time. The demo's [verify] runs a build (`compileall src`) and its unittest
suite twice per landing, in a scratch worktree: ~0.3 s per landing on a 2-core machine. So
each plan runs twice: with an empty [verify] (no commands: what the target is about, the
scheduling) and with the demo's checks (what they add, printed per landing as the serial
runs' difference). Each run is a fresh `harness run` process: its start-up (imports, reading
the agent's version probe from the cache `harness plan validate` filled) and each call's
sandboxed worker start count too.

Usage: python bench/bench_parallel.py [--subtasks 8] [--sleep 2] [--slots 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fresh
from bench_run import open_token, use_script

from harness.base import files
from harness.importers import demo
from harness.repository.layout import Layout

CLOCK = "2026-01-01T00:00:00Z"
TARGET = 1.25


def patch(i: int) -> str:
    path = f"src/p{i:03d}.py"
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f'@@ -0,0 +1 @@\n+NAME = "P{i}"\n'
    )


def prepare(root: Path, n: int, sleep: float, checks: bool) -> None:
    """The demo sample (its [verify] kept with `checks`, none without), a plan of n
    independent subtasks and answers that each sleep `sleep` seconds."""
    root.mkdir(parents=True)
    demo.build(root)
    layout = Layout(root)
    if not checks:
        layout.config.write_text(
            '[identity]\nname = "bench"\nemail = "bench@example.invalid"\n\n[verify]\n'
        )
    subtasks = [
        {
            "id": f"P{i}",
            "role": "localized-impl",
            "goal": f"Add module p{i:03d}",
            "inputs": [],
            "acceptance": [],
            "write_scope": "src/**",
            "creates": [f"src/p{i:03d}.py"],
        }
        for i in range(n)
    ]
    files.atomic_write(
        layout.plan("bench"),
        files.pretty({"task_id": "bench", "created": CLOCK, "subtasks": subtasks}),
    )
    open_token(layout, "src/**")
    answers = [
        {
            "subtask": f"P{i}",
            "sleep_s": sleep,
            "result": {"diffs": [{"file": f"src/p{i:03d}.py", "patch": patch(i)}]},
        }
        for i in range(n)
    ]
    use_script(layout, answers)
    # As a user validates a plan before running it: its pre-flight probes the agent's version,
    # which harness keeps (probes.py), so the run measured is one in a repository harness was
    # used in, not its very first command.
    cmd = [sys.executable, "-m", "harness.cli", "plan", "validate", "bench", "--repo", str(root)]
    subprocess.run(cmd, check=True, capture_output=True)


def run_harness(root: Path, slots: int, *more: str) -> float:
    """Wall time of one `harness run --max-parallel slots` (and `more` options)."""
    env = {**os.environ, "HARNESS_CLOCK": CLOCK}
    cmd = [sys.executable, "-m", "harness.cli", "run", "bench", "--repo", str(root)]
    start = time.perf_counter()
    res = subprocess.run(
        [*cmd, "--max-parallel", str(slots), *more], env=env, capture_output=True, text=True
    )
    took = time.perf_counter() - start
    if res.returncode != 0:
        sys.exit(f"harness run failed ({res.returncode}):\n{res.stderr}")
    return took


def measure(args: argparse.Namespace, checks: bool, slots: int) -> float:
    best = float("inf")
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
            root = Path(tmp) / f"r{r}" / "repo"
            prepare(root, args.subtasks, args.sleep, checks)
            best = min(best, run_harness(root, slots))
    return best


def verdict(ratio: float) -> str:
    return f"target <= {TARGET}x: {'met' if ratio <= TARGET else 'MISSED'}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subtasks", type=int, default=8)
    parser.add_argument("--sleep", type=float, default=2.0, help="seconds per worker call")
    parser.add_argument("--slots", type=int, default=4, help="--max-parallel of the run")
    parser.add_argument("--rounds", type=int, default=3, help="best of")
    args = parser.parse_args()
    fresh.bytecode()
    if min(args.subtasks, args.slots, args.rounds) < 1 or args.sleep <= 0:
        parser.error("--subtasks, --slots and --rounds must be >= 1, --sleep > 0")
    n, slots, sleep = args.subtasks, args.slots, args.sleep
    ideal = math.ceil(n / slots) * sleep
    ideal_serial = n * sleep
    print(
        f"subtasks: {n}, worker sleep: {sleep:g} s, slots: {slots}, best of {args.rounds}; "
        f"ideal: {math.ceil(n / slots)} rounds of calls x {sleep:g} s = {ideal:g} s "
        f"(serial {ideal_serial:g} s)"
    )
    walls: dict[tuple[bool, int], float] = {}
    for checks in (False, True):
        for k in (slots, 1):
            walls[checks, k] = measure(args, checks, k)
    for checks in (False, True):
        name = "demo checks (build + tests twice)" if checks else "no verify commands"
        par, ser = walls[checks, slots], walls[checks, 1]
        print(f"\n{name}:")
        print(
            f"  --max-parallel {slots}: {par:.2f} s, wall/ideal {par / ideal:.3f}x "
            f"({verdict(par / ideal)})"
        )
        print(
            f"  --max-parallel 1: {ser:.2f} s, wall/ideal-serial {ser / ideal_serial:.2f}x, "
            f"wall/ideal {ser / ideal:.2f}x, {ser / par:.2f}x the parallel run's time"
        )
    per = (walls[True, 1] - walls[False, 1]) / n
    print(
        f"\ndemo checks per landing: {per:.2f} s (serial runs' difference / {n}): "
        f"~{per * n:.1f} s over {n} landings checked one after another"
    )
    fixed = (walls[False, 1] - ideal_serial) / n
    print(
        f"harness per subtask, no checks: {fixed:.2f} s beyond the sleep (serial wall - "
        f"{ideal_serial:g} s) / {n}: start-up, sandboxed worker start, landing"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
