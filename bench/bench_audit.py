"""Benchmark: `harness audit` of a generated ~200k-event task against `jq -c . FILE`.

The generated task is a valid, complete record, so the audit is clean and checks all of it:
25k subtasks of 8 events each, shaped like the demo's (invoked, succeeded, lint and build,
tests twice, acceptance, diffs applied, step completed), each with its exchange folder
(envelope, answer, patch, meta.json with the files' hashes, three verify/ evidence files)
and its commit (trailers Task, Subtask, Call-Id, Log-Head) on the branch, then the record
commit holding the plan, checklist, log, tokens and exchanges. Commits go through
`git fast-import`, which is asked for each commit's id as the log needs it.

Printed: the audit's time against jq's on the same log (target <= 1.0x), and the audit
process's peak RSS at the full size against a tenth of it (target <= 1.2x); git's child
processes' peak is shown beside it. Generating the full size takes about a minute; --keep
keeps the repositories for the next run. Linux only (the peak is read from /proc).

Usage: python bench/bench_audit.py [--events 200000] [--rounds 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import fresh
from bench_run import open_token

from harness.base import clock, files
from harness.importers import demo
from harness.record.progress import GENESIS, line_hash
from harness.repository.layout import Layout

TASK = "bench"
START = clock.parse("2026-01-01T00:00:00Z")
WHO = "harness <harness@example.invalid>"
EVENTS_PER_SUBTASK = 8
BLOBS = (
    "context.ndjson",
    "prompt.ndjson",
    "stdout.ndjson",
    "stderr.log",
    "patches/000.patch",
    "meta.json",
    "verify/00-lint.json",
    "verify/01-build.json",
    "verify/02-test.json",
)
MARKS = 16  # fast-import marks per subtask: its commit, then its exchange's blobs
# Runs the audit as `python -m harness.cli` does and reports its own peak RSS and its git
# children's (KiB). Its own is VmHWM, not getrusage: a child's ru_maxrss starts at its
# parent's size when forked, which here is the generator's. The children's figure is an
# upper bound for the same reason.
CHILD = (
    "import resource, runpy, sys\n"
    "try:\n"
    "    runpy.run_module('harness.cli', run_name='__main__', alter_sys=True)\n"
    "except SystemExit as done:\n"
    "    code = done.code\n"
    "sys.stdout.flush()\n"
    "own = open('/proc/self/status').read().split('VmHWM:')[1].split()[0]\n"
    "print(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def ts(seq: int) -> str:
    return (START + timedelta(seconds=seq)).strftime(clock.FORMAT)


def sid(i: int) -> str:
    return f"T{i:05d}"


def call_id(i: int) -> str:
    return hashlib.sha256(f"{TASK}/{i}".encode()).hexdigest()


def note(i: int) -> str:
    # A folder per hundred notes: one folder of 25k would make every commit rewrite it.
    return f"notes/{i // 100:03d}/n{i:05d}.txt"


def patch(i: int) -> str:
    path = note(i)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1 @@\n+note {i}\n"
    )


def exchange(i: int, base: str, when: str) -> dict[str, bytes]:
    """The files harness records for subtask i's one call, modelled on the demo's."""
    call = call_id(i)
    context = {
        "payload": {
            "base": base,
            "branch": "main",
            "call_id": call,
            "readonly": [],
            "repo_root": ".",
            "visible": ["**"],
        },
        "task_id": TASK,
        "ts": when,
        "type": "context",
    }
    prompt = {
        "payload": {
            "budgets": {"max_tokens": 8192},
            "constraints": ["ground-in-provided-files-only", "no-new-deps", "no-speculation"],
            "creates": ["notes/**"],
            "expected": {
                "fields": ["plan", "diffs", "artifacts", "risks", "notes", "metrics"],
                "schema": "json",
            },
            "goal": f"Add note {i}",
            "inputs": {"blobs": [], "paths": []},
            "role": "localized-impl",
            "scope": ["notes/**"],
            "subtask": sid(i),
            "timeouts": {"hard_s": 90, "soft_s": 60},
            "write_scope": "token:W1",
        },
        "task_id": TASK,
        "ts": when,
        "type": "prompt",
    }
    answer = {
        "agent_id": "scripted",
        "result": {
            "artifacts": [],
            "diffs": [{"file": note(i), "patch": patch(i)}],
            "metrics": {"files_touched": 1},
            "notes": [f"{sid(i)}: the goal asks for a note"],
            "plan": [{"step": f"create {note(i)}", "why": "the goal asks for it"}],
            "risks": [],
        },
        "status": "ok",
        "task_id": TASK,
        "ts": when,
    }
    found = {
        "context.ndjson": files.dumps(context) + b"\n",
        "prompt.ndjson": files.dumps(prompt) + b"\n",
        "stdout.ndjson": files.dumps(answer) + b"\n",
        "stderr.log": b"",
        "patches/000.patch": patch(i).encode(),
    }
    meta = {
        "agent": "scripted",
        "agent_version": "0.1.0",
        "argv": ["agents/scripted-cli", "--script", "agents/script.json"],
        "call_id": call,
        "exit_code": 0,
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(found.items())},
        "harness_version": "0.1.0",
        "outcome": {"status": "ok"},
        "subtask": sid(i),
        "task_id": TASK,
        "timed_out": None,
    }
    found["meta.json"] = files.pretty(meta)
    for n, (check, command, codes) in enumerate(CHECKS):
        runs = [
            {"duration_s": 0.1, "exit_code": 0, "leaked": False, "tail": "", "timed_out": False}
            for _ in codes
        ]
        evidence = {
            "check": check,
            "command": command,
            "exit_codes": codes,
            "network": "isolated",
            "runs": runs,
        }
        found[f"verify/{n:02d}-{check}.json"] = files.pretty(evidence)
    return found


CHECKS = (
    ("lint", "ruff check .", [0]),
    ("build", "python -m compileall -q src", [0]),
    ("test", "python -m pytest -q", [0, 0]),
)


class Writer:
    """The log as harness writes it: canonical lines, seq from 0, each chained to the last."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self.seq, self.head = out, 0, GENESIS

    def event(self, name: str, status: str, step: str | None, details: dict[str, Any]) -> str:
        record: dict[str, Any] = {
            "agent": "harness",
            "event": name,
            "prev": self.head,
            "seq": self.seq,
            "status": status,
            "task_id": TASK,
            "ts": ts(self.seq),
        }
        if step is not None:
            record["step"] = step
        if details:
            record["details"] = details
        line = files.dumps(record)
        self.out.write(line + b"\n")
        self.seq += 1
        self.head = line_hash(line)
        return str(record["ts"])


def data(payload: bytes) -> bytes:
    return b"data %d\n%s\n" % (len(payload), payload)


def generate(root: Path, subtasks: int) -> None:
    """A repository holding a complete, valid record of `subtasks` subtasks."""
    root.mkdir(parents=True)
    demo.build(root)
    layout = Layout(root)
    layout.config.write_text('[identity]\nname = "harness"\nemail = "harness@example.invalid"\n')
    open_token(layout)
    plan = {
        "task_id": TASK,
        "created": ts(0),
        "subtasks": [
            {
                "id": sid(i),
                "role": "localized-impl",
                "goal": f"Add note {i}",
                "inputs": [],
                "acceptance": ["tests pass twice"],
                "write_scope": "notes/**",
                "creates": ["notes/**"],
            }
            for i in range(subtasks)
        ],
    }
    files.atomic_write(layout.plan(TASK), files.pretty(plan))
    checklist = f"# {TASK}\n\n" + "".join(
        f"- [x] {sid(i)}: Add note {i}\n" for i in range(subtasks)
    )
    layout.checklist(TASK).write_text(checklist)
    base = git(root, "rev-parse", "HEAD").strip()
    importer = subprocess.Popen(
        ["git", "fast-import", "--quiet", "--done"],
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert importer.stdin is not None and importer.stdout is not None
    feed, answers = importer.stdin, importer.stdout
    log_path = layout.log(TASK)
    with log_path.open("wb") as out:
        log = Writer(out)
        log.event("task_started", "ok", None, {"subtasks": subtasks})
        head = base
        for i in range(subtasks):
            head = subtask(i, log, feed, answers, head)
        log.event("task_completed", "ok", None, {})
    last = log.head
    record = (
        f"harness: record {TASK}\n\nHarness-Task: {TASK}\nHarness-Log-Head: {last}\n"
    ).encode()
    when = int(clock.parse(ts(log.seq - 1)).timestamp())
    feed.write(b"commit refs/heads/main\n")
    feed.write(b"committer %s %d +0000\n" % (WHO.encode(), when))
    feed.write(data(record))
    for path in (layout.config, layout.tokens, layout.plan(TASK), layout.checklist(TASK)):
        rel = path.relative_to(root).as_posix()
        feed.write(b"M 100644 inline %s\n" % rel.encode() + data(path.read_bytes()))
    rel = log_path.relative_to(root).as_posix()
    size = log_path.stat().st_size
    feed.write(b"M 100644 inline %s\ndata %d\n" % (rel.encode(), size))
    with log_path.open("rb") as fh:
        shutil.copyfileobj(fh, feed)
    feed.write(b"\n")
    for i in range(subtasks):
        folder = f"ai/exchanges/{TASK}/{call_id(i)}"
        for k, name in enumerate(BLOBS):
            feed.write(
                b"M 100644 :%d %s/%s\n" % (i * MARKS + 2 + k, folder.encode(), name.encode())
            )
    feed.write(b"\ndone\n")
    feed.close()
    if importer.wait() != 0:
        raise SystemExit("git fast-import failed")
    git(root, "reset", "-q", "--hard", "main")


def subtask(i: int, log: Writer, feed: IO[bytes], answers: IO[bytes], base: str) -> str:
    """Log one subtask, emit its exchange and commit; return the commit."""
    step, call = sid(i), call_id(i)
    when = log.event(
        "subagent_invoked",
        "pending",
        step,
        {
            "attempt": 1,
            "base": base,
            "call_id": call,
            "role": "localized-impl",
            "subagent": "scripted",
            "token": "W1",
        },
    )
    for k, (_, payload) in enumerate(sorted(exchange(i, base, when).items(), key=blob_order)):
        feed.write(b"blob\nmark :%d\n" % (i * MARKS + 2 + k) + data(payload))
    log.event(
        "subagent_succeeded",
        "ok",
        step,
        {"artifacts": [], "call_id": call, "diffs": 1, "subagent": "scripted"},
    )
    for check, command, codes in CHECKS:
        name = "test_passed" if check == "test" else "build_succeeded"
        details = {"check": check, "command": command, "exit_codes": codes, "network": "isolated"}
        log.event(name, "ok", step, details)
    log.event(
        "phase_completed",
        "ok",
        step,
        {
            "check": "acceptance",
            "phase": "acceptance",
            "unverified": ["tests pass twice"],
            "verified": [],
        },
    )
    message = (
        f"localized-impl: Add note {i}\n\n"
        f"Harness-Task: {TASK}\nHarness-Subtask: {step}\n"
        f"Harness-Call-Id: {call}\nHarness-Log-Head: {log.head}\n"
    ).encode()
    date = int(clock.parse(when).timestamp())
    mark = i * MARKS + 1
    feed.write(b"commit refs/heads/main\nmark :%d\n" % mark)
    feed.write(b"author %s %d +0000\ncommitter %s %d +0000\n" % ((WHO.encode(), date) * 2))
    feed.write(data(message))
    # An earlier commit of this import is named by its mark: fast-import has not written it.
    feed.write(b"from :%d\n" % (mark - MARKS) if i else b"from %s\n" % base.encode())
    feed.write(b"M 100644 inline %s\n" % note(i).encode() + data(f"note {i}\n".encode()))
    feed.write(b"\nget-mark :%d\n" % mark)
    feed.flush()
    commit = answers.readline().decode().strip()
    log.event(
        "subagent_diffs_applied",
        "ok",
        step,
        {"call_id": call, "commit": commit, "files": [note(i)], "token": "W1"},
    )
    log.event("step_completed", "ok", step, {"call_id": call, "commit": commit})
    return commit


def blob_order(item: tuple[str, bytes]) -> int:
    return BLOBS.index(item[0])


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True
    ).stdout


def time_jq(log: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["jq", "-c", ".", str(log)], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def time_audit(root: Path) -> tuple[float, int, int]:
    """Wall time of `harness audit`, its own peak RSS and its git children's (KiB)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "audit", TASK, "--repo", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        said = done.stdout[-2000:] + done.stderr[-2000:]
        raise SystemExit(f"the audit is not clean ({done.returncode}): {said}")
    own, children = done.stderr.split()[-2:]
    return elapsed, int(own), int(children)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", help="generate into this directory, or reuse what is there")
    args = parser.parse_args()
    fresh.bytecode()
    if shutil.which("jq") is None:
        raise SystemExit("jq is not installed: it is the baseline")
    subtasks = max(1, round((args.events - 2) / EVENTS_PER_SUBTASK))
    with tempfile.TemporaryDirectory(prefix="harness-bench-audit-") as tmp:
        where = Path(args.keep) if args.keep else Path(tmp)
        roots = []
        for n in (subtasks, max(1, subtasks // 10)):
            root = where / f"s{n}" / "repo"
            if not root.exists():
                began = time.perf_counter()
                generate(root, n)
                print(f"generated {n} subtasks in {time.perf_counter() - began:.0f} s")
            roots.append(root)
        log = Layout(roots[0]).log(TASK)
        events = sum(1 for _ in log.open("rb"))
        size = log.stat().st_size
        jq = min(time_jq(log) for _ in range(args.rounds))
        runs = [time_audit(roots[0]) for _ in range(args.rounds)]
        tenth = [time_audit(roots[1]) for _ in range(args.rounds)]
    took = min(r[0] for r in runs)
    peak, peak_tenth = max(r[1] for r in runs), max(r[1] for r in tenth)
    git_peak, git_tenth = max(r[2] for r in runs), max(r[2] for r in tenth)
    print(
        f"events: {events} ({subtasks} subtasks), log {size / 2**20:.0f} MiB, best of {args.rounds}"
    )
    print(f"jq -c . FILE:  {jq:.2f} s")
    print(f"harness audit: {took:.2f} s ({took / events * 1e6:.1f} us/event), clean")
    print(f"time ratio: {took / jq:.2f}x (target <= 1.0x)")
    print(
        f"audit peak RSS: {peak / 1024:.1f} MiB at {events} events, "
        f"{peak_tenth / 1024:.1f} MiB at a tenth (git children: {git_peak / 1024:.1f} and "
        f"{git_tenth / 1024:.1f} MiB)"
    )
    print(f"RSS ratio: {peak / peak_tenth:.2f}x (target <= 1.2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
