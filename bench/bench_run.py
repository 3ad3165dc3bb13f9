"""Benchmark: `harness run` of 50 trivial subtasks against a bare shell loop doing the same work.

The loop does, per subtask, what any orchestrator must: start the worker (the same scripted
worker, fed the same two-line envelope) for its canned line, `git apply --check`,
`git apply --index`, `git commit`. Both run in the same process tree on the same machine, so
the printed ratio is harness's overhead. Target: <= 1.5x (issue 24).

harness runs the worker in its sandbox on a copy of the visible files, so `--files N` adds N
committed files to the repository to measure what that copy costs as the tree grows.

Usage: python bench/bench_run.py [--subtasks 50] [--rounds 3] [--files 0]
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fresh
import orjson

from harness.base import files
from harness.importers import demo
from harness.repository.layout import Layout

CLOCK = "2026-01-01T00:00:00Z"


def patch(i: int) -> str:
    path = f"notes/n{i:03d}.txt"
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1 @@\n+note {i}\n"
    )


def open_token(layout: Layout, paths: str = "notes/**") -> None:
    """One reusable token W1 over `paths`, valid well past the benchmarks' clock."""
    tokens = {
        "tokens": [
            {
                "id": "W1",
                "paths": [paths],
                "expires": "2027-01-01T00:00:00Z",
                "one_shot": False,
            }
        ]
    }
    files.atomic_write(layout.tokens, files.pretty(tokens))


def prepare(root: Path, n: int, bulk: int = 0) -> Path:
    """The demo sample with no verify commands, `bulk` more committed files, a plan of n
    subtasks and their answers."""
    root.mkdir(parents=True)
    demo.build(root)
    if bulk:
        for i in range(bulk):
            folder = root / "bulk" / f"d{i // 100:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"f{i}.txt").write_text(f"file {i}\n")
        git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
        subprocess.run([*git, "add", "-A"], cwd=root, check=True)
        subprocess.run([*git, "commit", "-qm", "bulk"], cwd=root, check=True)
    layout = Layout(root)
    layout.config.write_text('[identity]\nname = "bench"\nemail = "bench@example.invalid"\n')
    subtasks = [
        {
            "id": f"T{i}",
            "role": "localized-impl",
            "goal": f"Add note {i}",
            "inputs": [],
            "acceptance": [],
            "write_scope": "notes/**",
            "creates": ["notes/*.txt"],
        }
        for i in range(n)
    ]
    files.atomic_write(
        layout.plan("bench"),
        files.pretty({"task_id": "bench", "created": CLOCK, "subtasks": subtasks}),
    )
    open_token(layout)
    answers = [
        {
            "subtask": f"T{i}",
            "result": {"diffs": [{"file": f"notes/n{i:03d}.txt", "patch": patch(i)}]},
        }
        for i in range(n)
    ]
    return use_script(layout, answers)


def use_script(layout: Layout, answers: list[dict[str, object]]) -> Path:
    """Write the scripted worker's answers beside the repository and point the registry's
    agent at them; the script's path."""
    script = layout.root.parent / "script.json"
    script.write_bytes(orjson.dumps({"answers": answers}))
    reg = orjson.loads(layout.registry.read_bytes())
    reg["agents"][0]["args"] = ["--script", str(script)]
    reg["agents"][0]["read"] = [str(script)]
    files.atomic_write(layout.registry, files.pretty(reg))
    return script


def run_harness(root: Path) -> float:
    env = {**os.environ, "HARNESS_CLOCK": CLOCK}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "bench", "--repo", str(root)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def run_loop(root: Path, script: Path, n: int) -> float:
    work = root.parent / "loop"
    work.mkdir()
    for i in range(n):
        ctx = {
            "ts": CLOCK,
            "task_id": "bench",
            "type": "context",
            "payload": {
                "repo_root": ".",
                "branch": "main",
                "readonly": [],
                "visible": ["**"],
                "call_id": "0" * 64,
            },
        }
        prompt = {
            "ts": CLOCK,
            "task_id": "bench",
            "type": "prompt",
            "payload": {
                "subtask": f"T{i}",
                "role": "localized-impl",
                "goal": f"Add note {i}",
                "constraints": [],
                "inputs": {"paths": [], "blobs": []},
                "expected": {"schema": "json", "fields": []},
                "write_scope": "none",
                "timeouts": {"soft_s": 60, "hard_s": 90},
                "budgets": {},
            },
        }
        (work / f"env{i}").write_bytes(orjson.dumps(ctx) + b"\n" + orjson.dumps(prompt) + b"\n")
        (work / f"p{i}.patch").write_text(patch(i))
    launcher = shlex.quote(str(root / "agents" / "scripted-cli"))
    loop = (
        f"for i in $(seq 0 {n - 1}); do "
        f"{launcher} --script {shlex.quote(str(script))} < {work}/env$i > {work}/out$i || exit 1; "
        f"git apply --check {work}/p$i.patch && git apply --index {work}/p$i.patch && "
        f"git -c user.name=b -c user.email=b@b commit -q -m note$i || exit 1; done"
    )
    env = {**os.environ, "HARNESS_PYTHON": sys.executable}
    start = time.perf_counter()
    subprocess.run(["/bin/sh", "-c", loop], cwd=root, env=env, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subtasks", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=0, help="extra committed files")
    args = parser.parse_args()
    fresh.bytecode()
    best_h, best_l = float("inf"), float("inf")
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
            root = Path(tmp) / f"h{r}" / "repo"
            prepare(root, args.subtasks, args.files)
            best_h = min(best_h, run_harness(root))
            loop_root = Path(tmp) / f"l{r}" / "repo"
            script = prepare(loop_root, args.subtasks, args.files)
            best_l = min(best_l, run_loop(loop_root, script, args.subtasks))
    print(f"subtasks: {args.subtasks}, extra files: {args.files}, best of {args.rounds}")
    print(f"harness run: {best_h:.2f} s ({best_h / args.subtasks * 1000:.0f} ms/subtask)")
    print(f"shell loop:  {best_l:.2f} s ({best_l / args.subtasks * 1000:.0f} ms/subtask)")
    print(f"ratio: {best_h / best_l:.2f}x (target <= 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
