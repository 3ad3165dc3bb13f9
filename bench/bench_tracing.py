"""Benchmark: what a collector that is down, or listening and never answering, costs a run.

The demo's `harness run` three ways in one process tree: untraced, traced to a closed port,
and traced to a port that accepts connections and never answers. README says a collector
that is down or never answers costs a run a second at most (each export gives up after
0.75 s, the run's end waits 1 s at most for the last spans). Printed: each median and its
excess over the untraced run, in seconds and as a ratio. Target: excess <= 1.5 s.

Usage: python bench/bench_tracing.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fresh

from harness.importers import demo

CLOCK = "2026-01-01T00:00:00Z"


def once(env: dict[str, str]) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-tracing-") as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        demo.build(root)
        argv = [sys.executable, "-m", "harness.cli", "run", "demo", "--quiet", "--repo", str(root)]
        began = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        took = time.perf_counter() - began
        if done.returncode != 0:
            raise SystemExit(f"harness run failed: {done.stderr}")
        return took


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    fresh.bytecode()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        closed_url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    base = {**os.environ, "HARNESS_CLOCK": CLOCK}
    ways = {
        "untraced": {**base, "OTEL_SDK_DISABLED": "true"},
        "closed port": {**base, "OTEL_EXPORTER_OTLP_ENDPOINT": closed_url},
        "silent": {
            **base,
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{silent.getsockname()[1]}",
        },
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for _ in range(args.rounds):  # interleaved: a busy moment costs each way alike
            for name, env in ways.items():
                times[name].append(once(env))
    finally:
        silent.close()
    plain = statistics.median(times["untraced"])
    print(f"untraced     median {plain:.2f}s over {args.rounds} rounds")
    for name in ("closed port", "silent"):
        found = statistics.median(times[name])
        print(f"{name:12} median {found:.2f}s  +{found - plain:.2f}s  {found / plain:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
