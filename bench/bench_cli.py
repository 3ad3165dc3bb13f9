"""Benchmark: one real agent CLI call through harness against the same CLI run bare.

For each of claude, codex and gemini (the pinned CLIs of tests/clis), both sides play the
same script on the scripted model API of tests/modelapi.py (edit src/calc.py, then answer),
on 127.0.0.1, so the model costs nothing and the difference is what harness adds:

- harness: `harness run demo --json` in the demo's sample repository after
  `harness init --gemini`, with a plan of one writing subtask given to the CLI, exactly as
  tests/test_real_clis.py runs it. The step is the wall time of the whole command (start-up,
  the agent's version probe, the call, gate, apply, build, tests twice, acceptance, commit);
  the call is its `phase_ended` `call` line: bubblewrap, envelope, shim (a git sandbox of the
  visible files, the diffs), the CLI, and the answer checked and recorded.
- bare: the same CLI started directly (no harness, no bubblewrap, no shim), with the argv the
  shim gave it (the exchange's meta.json `cli_argv`, /sandbox/home mapped to a fresh HOME),
  the prompt it gave it (the answer's `result.prompt`) on stdin, the same environment (the
  registry entry's names, the shim's own additions) and, in HOME, what the shim writes
  there: codex's output schema, gemini's settings.json. Its cwd is HOME/work, a git
  repository of the same visible files at the same base commit, made before the clock starts.

Every run must play the whole script (the same number of model turns on both sides) and
leave the edit in place; a run that does not is a failure (exit 1). Each CLI gets one untimed
warm-up run through harness first (disk caches; its argv and prompt are the ones the bare
runs use), then `--runs` rounds of one harness and one bare run, their order alternating.
Medians are printed. Target: harness's call at most 1.30x the bare CLI (the step is printed
beside it, for what the checks cost). The ratio is reported, never enforced: exit 0 whatever
it is.

First, without any agent CLI, the start-up of a few commands that do little else (`--version`,
`status`, `log`, `plan show` on the demo's sample repository): the median wall time of
STARTUP_RUNS runs each, what any command pays before its work.

Usage: python bench/bench_cli.py [--cli claude|codex|gemini]... [--runs 3]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fresh
import orjson

from harness.base import scope
from harness.importers import demo
from harness.workers import claude as claude_shim
from harness.workers import codex as codex_shim
from harness.workers import gemini as gemini_shim
from harness.workers import shim

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests/modelapi.py: the scripted model API, standard library only
from tests.modelapi import ModelAPI, Step, answer, edit  # noqa: E402
from tests.test_real_clis import (  # noqa: E402
    ANSWER,
    CLIS,
    CLOCK,
    EDIT,
    NAMES,
    make_user_home,
    user_env,
)

TARGET = 1.30
SANDBOX_HOME = "/sandbox/home"  # harness.sandbox.HOME, as the CLI's argv names it
REDACTED = "[REDACTED]"  # what harness.worker.redact records for a value the agent may see
HARNESS_TIMEOUT_S = 300.0
BARE_TIMEOUT_S = 180.0
GIT_TIMEOUT_S = 60.0

EDITED = "return a + b + 0"


class Failed(Exception):
    """A run that did not do what the benchmark times: its message says what went wrong."""


def script() -> list[Step]:
    return [edit(*EDIT), answer(ANSWER)]


# -- running things, bounded ----------------------------------------------------------------------


@dataclass
class Ran:
    code: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    seconds: float


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float, stdin: str = "") -> Ran:
    """Run to the end or to the timeout, timed; a timeout kills the whole process group (the
    node launchers start native children that a plain kill would leave running)."""
    start = time.perf_counter()
    child = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(stdin, timeout=timeout)
        code: int | None = child.returncode
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        code = None
    return Ran(code, out, err, time.perf_counter() - start)


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=GIT_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise Failed(f"git {args[0]} in {root}: {done.stderr.strip()[-300:]}")
    return done.stdout


def harness(root: Path, env: dict[str, str], *args: str) -> Ran:
    argv = [sys.executable, "-m", "harness.cli", *args, "--repo", str(root)]
    return run(argv, root, env, HARNESS_TIMEOUT_S)


def tail(ran: Ran) -> str:
    what = "timed out" if ran.code is None else f"exit {ran.code}"
    return f"{what}: {(ran.stderr.strip() or ran.stdout.strip())[-800:]}"


# -- start-up ------------------------------------------------------------------------------------

STARTUP = (("--version",), ("status", "demo"), ("log", "demo"), ("plan", "show", "demo"))
STARTUP_RUNS = 9


def startup(tmp: Path) -> None:
    """Each STARTUP command's median wall time in the demo's sample repository (made first)."""
    root = tmp / "startup"
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_CLOCK"}
    made = run([sys.executable, "-m", "harness.cli", "demo", "--dir", str(root)], tmp, env, 300)
    if made.code != 0:
        raise Failed(f"harness demo: {tail(made)}")
    print(f"start-up (median of {STARTUP_RUNS} runs, the demo's sample repository):")
    for args in STARTUP:
        argv = [sys.executable, "-m", "harness.cli", *args]
        took = []
        for _ in range(STARTUP_RUNS):
            ran = run(argv, root, env, HARNESS_TIMEOUT_S)
            if ran.code != 0:
                raise Failed(f"harness {' '.join(args)}: {tail(ran)}")
            took.append(ran.seconds)
        print(f"  harness {' '.join(args):<16} {statistics.median(took):6.3f} s")


# -- through harness ------------------------------------------------------------------------------


def new_repository(where: Path, cli: str, env: dict[str, str]) -> Path:
    """The demo's sample as a new user sets it up (`harness init --gemini`, its registry as
    written) and a plan of one writing subtask for `cli`, committed."""
    root = where / "repo"
    root.mkdir(parents=True)
    demo.build(root)
    (root / "ai" / "agents" / "registry.json").unlink()
    shutil.rmtree(root / "agents")
    done = harness(root, env, "init", "--gemini")
    if done.code != 0 or "not on PATH" in done.stderr:
        raise Failed(f"harness init --gemini: {tail(done)}")
    commit(root, "harness init")
    subtask = {
        "id": "T1",
        "role": "localized-impl",
        "agent": cli,
        "goal": "Make add return the sum plus zero, spelled out",
        "inputs": ["src/calc.py"],
        "acceptance": [],
        "write_scope": "src/**",
        "token": "W1",
    }
    plan = root / "ai" / "tasks" / "demo" / "plan.json"
    plan.write_bytes(
        orjson.dumps(
            {"task_id": "demo", "created": CLOCK, "subtasks": [subtask]},
            option=orjson.OPT_INDENT_2,
        )
    )
    commit(root, "plan")
    return root


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", message)


@dataclass
class Call:
    """What the shim gave the CLI in a harness run, for the bare run to repeat."""

    root: Path  # the repository
    base: str  # the commit the call was made on
    argv: list[str]
    prompt: str
    env_names: list[str]  # the registry entry's `env`
    visible: list[str]
    readonly: list[str]
    payload: dict[str, Any]  # the prompt envelope's


@dataclass
class HarnessRun:
    step_s: float
    phases: dict[str, float]
    turns: int
    call: Call


def run_harness(cli: str, home: Path, where: Path) -> HarnessRun:
    with ModelAPI(script()) as api:
        env = user_env(home, api.url)
        root = new_repository(where, cli, env)
        base = git(root, "rev-parse", "HEAD").strip()
        done = harness(root, env, "run", "demo", "--json")
        turns = len(api.main_requests())
        left, problems = api.remaining(), list(api.problems)
    if done.code != 0:
        raise Failed(f"{cli}: harness run demo: {tail(done)}")
    if left or problems:
        raise Failed(f"{cli}: harness run left {len(left)} model steps unplayed: {problems}")
    if EDITED not in (root / "src" / "calc.py").read_text():
        raise Failed(f"{cli}: harness run committed no edit of src/calc.py")
    lines = [orjson.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    phases = {
        str(e["phase"]): float(e["elapsed_s"]) for e in lines if e.get("event") == "phase_ended"
    }
    finished = [e for e in lines if e.get("event") == "subtask_done"]
    if "call" not in phases or len(finished) != 1:
        raise Failed(f"{cli}: harness run --json printed no call phase or no subtask_done")
    return HarnessRun(
        done.seconds, phases, turns, recorded(root, cli, base, str(finished[0]["call_id"]))
    )


def recorded(root: Path, cli: str, base: str, call_id: str) -> Call:
    """The call as its exchange recorded it: the CLI's argv, the prompt on its stdin."""
    folder = root / "ai" / "exchanges" / "demo" / call_id
    meta = orjson.loads((folder / "meta.json").read_bytes())
    line = (folder / "stdout.ndjson").read_bytes().splitlines()[-1]
    prompt = orjson.loads(line)["result"]["prompt"]
    context = orjson.loads((folder / "context.ndjson").read_bytes().splitlines()[0])
    prompt_env = orjson.loads((folder / "prompt.ndjson").read_bytes().splitlines()[0])
    registry = orjson.loads((root / "ai" / "agents" / "registry.json").read_bytes())
    entry = next(a for a in registry["agents"] if a["id"] == cli)
    return Call(
        root=root,
        base=base,
        argv=[str(a) for a in meta["cli_argv"]],
        prompt=str(prompt),
        env_names=[str(n) for n in entry.get("env", [])],
        visible=list(context["payload"]["visible"]),
        readonly=list(context["payload"]["readonly"]),
        payload=dict(prompt_env["payload"]),
    )


# -- bare ------------------------------------------------------------------------------------------


@dataclass
class BareRun:
    seconds: float
    turns: int


def worker_copy(call: Call, folder: Path) -> Path:
    """The files of the call's base that harness shows a worker (the visible ones; of ai/
    only the role briefs), as harness's contain.Containment.view exports them."""
    data = subprocess.run(
        ["git", "archive", "--format=tar", call.base],
        cwd=call.root,
        capture_output=True,
        check=True,
        timeout=GIT_TIMEOUT_S,
    ).stdout
    folder.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        kept = [
            m
            for m in tar.getmembers()
            if not m.isdir()
            and (not m.name.startswith("ai/") or m.name.startswith("ai/roles/"))
            and scope.matches(m.name, call.visible)
        ]
        tar.extractall(folder, members=kept, filter="data")
    return folder


def bare_setup(
    cli: str, call: Call, where: Path, url: str, user: Path
) -> tuple[list[str], dict[str, str], Path]:
    """The argv, environment and cwd for the CLI run bare, with HOME holding what the shim's
    home held: the work folder (a git sandbox of the visible files, as the shim makes it) and
    codex's schema or gemini's settings."""
    home = where / "home"
    tmp = where / "tmp"  # not above HOME: codex refuses a CODEX_HOME under the temp folder
    home.mkdir(parents=True)
    tmp.mkdir()
    box = shim.Sandbox.create(worker_copy(call, where / "view"), call.visible, call.readonly, home)
    argv = [a.replace(SANDBOX_HOME, str(home)) for a in call.argv]
    if any("/sandbox/" in a for a in argv):
        raise Failed(f"{cli}: the recorded argv names a sandbox path not under {SANDBOX_HOME}")
    # What harness lets the agent see (proc.base_env: the small base plus the registry
    # entry's names), what the shim adds for its CLI, and a temp folder of its own.
    env = user_env(user, url)
    child = {
        "PATH": env["PATH"],
        "HOME": str(home),
        "TZ": "UTC",
        "LC_ALL": "C",
        "HARNESS_PYTHON": sys.executable,
        "TMPDIR": str(tmp),
        **{n: env[n] for n in call.env_names if n in env and not n.startswith("GIT_")},
    }
    argv = unredacted(cli, argv, child, call.env_names)
    if cli == "claude":
        child |= claude_shim.OWN_ENV
    elif cli == "codex":
        schema = Path(argv[argv.index("--output-schema") + 1])
        schema.parent.mkdir(parents=True, exist_ok=True)
        schema.write_bytes(orjson.dumps(codex_shim.ANSWER_SCHEMA))
    elif cli == "gemini":
        writable = str(call.payload["write_scope"]) != "none"
        turns = (call.payload.get("budgets") or {}).get("max_turns")
        doc = gemini_shim.settings(writable, shim.Launch(), child, turns, {})
        (home / ".gemini").mkdir()
        (home / ".gemini" / "settings.json").write_bytes(orjson.dumps(doc))
    return argv, child, box.root


def unredacted(cli: str, argv: list[str], env: dict[str, str], names: list[str]) -> list[str]:
    """The recorded argv with what harness blanked out of the record put back. It blanks the
    values of the variables the agent may see; of those, only codex's argv holds one: the
    model provider its shim defines from OPENAI_BASE_URL. So the shim's own overrides for this
    run's environment go in place of the recorded ones, which they must match once blanked
    the same way (worker.redact)."""
    if cli == "codex":
        ours = codex_shim.provider_overrides(env, {})
        secrets = sorted((env[n] for n in names if len(env.get(n, "")) >= 6), key=len)
        blank = list(ours)
        for secret in reversed(secrets):  # the longest first, as worker.redact goes
            blank = [a.replace(secret, REDACTED) for a in blank]
        at = next((i for i in range(len(argv)) if argv[i : i + len(blank)] == blank), None)
        if at is None:
            raise Failed("codex: the recorded argv holds no provider overrides like the shim's")
        argv = [*argv[:at], *ours, *argv[at + len(blank) :]]
    if any(REDACTED in a for a in argv):
        raise Failed(f"{cli}: the recorded argv holds a blanked value the bench cannot restore")
    return argv


def run_bare(cli: str, call: Call, user: Path, where: Path) -> BareRun:
    with ModelAPI(script()) as api:
        argv, env, cwd = bare_setup(cli, call, where, api.url, user)
        done = run(argv, cwd, env, BARE_TIMEOUT_S, stdin=call.prompt)
        turns = len(api.main_requests())
        left, problems = api.remaining(), list(api.problems)
    if done.code != 0:
        raise Failed(f"{cli}: bare run: {tail(done)}")
    if left or problems:
        raise Failed(f"{cli}: bare run left {len(left)} model steps unplayed: {problems}")
    if EDITED not in (cwd / "src" / "calc.py").read_text():
        raise Failed(f"{cli}: bare run made no edit of src/calc.py: {tail(done)}")
    return BareRun(done.seconds, turns)


# -- the benchmark ---------------------------------------------------------------------------------


@dataclass
class Figures:
    step: list[float] = field(default_factory=list)
    call: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)
    phases: dict[str, list[float]] = field(default_factory=dict)
    turns: set[tuple[int, int]] = field(default_factory=set)


def measure(cli: str, runs: int, user: Path, tmp: Path) -> Figures:
    warm = run_harness(cli, user, tmp / f"{cli}-warm")
    figures = Figures()
    for r in range(runs):
        # Alternate which side goes first, so neither always meets the warmer machine.
        order = ("harness", "bare") if r % 2 == 0 else ("bare", "harness")
        took_h: HarnessRun | None = None
        took_b: BareRun | None = None
        for side in order:
            where = tmp / f"{cli}-{r}-{side}"
            if side == "harness":
                took_h = run_harness(cli, user, where)
            else:
                took_b = run_bare(cli, warm.call, user, where)
        assert took_h is not None and took_b is not None
        if (took_h.call.argv, took_h.call.prompt) != (warm.call.argv, warm.call.prompt):
            raise Failed(f"{cli}: harness gave the CLI a different argv or prompt in run {r}")
        figures.step.append(took_h.step_s)
        figures.call.append(took_h.phases["call"])
        figures.bare.append(took_b.seconds)
        for name, secs in took_h.phases.items():
            figures.phases.setdefault(name, []).append(secs)
        figures.turns.add((took_h.turns, took_b.turns))
    return figures


def version(cli: str, user: Path) -> str:
    env = user_env(user, "http://127.0.0.1:9")
    done = run([cli, "--version"], user, env, 60)
    return (done.stdout.strip().splitlines() or ["?"])[0]


def report(cli: str, figures: Figures, runs: int, ver: str) -> bool:
    step, call, bare = (statistics.median(x) for x in (figures.step, figures.call, figures.bare))
    turns = ", ".join(f"{h} via harness / {b} bare" for h, b in sorted(figures.turns))
    phases = ", ".join(f"{n} {statistics.median(v):.2f}" for n, v in figures.phases.items())
    met = call / bare <= TARGET
    print(f"\n{cli} ({ver}), median of {runs}; model turns per run: {turns}")
    print(f"  harness step (whole `harness run`): {step:6.2f} s")
    print(f"  harness call phase:                 {call:6.2f} s")
    print(f"  bare CLI:                           {bare:6.2f} s")
    print(f"  call/bare: {call / bare:.2f}x ({'met' if met else 'MISSED'}: target <= {TARGET}x)")
    print(f"  step/bare: {step / bare:.2f}x (the step also builds and tests twice)")
    rest = step - sum(statistics.median(v) for v in figures.phases.values())
    print(f"  harness phases (median s): {phases}; outside them {rest:.2f} (start-up, probe)")
    print(
        f"  runs (s): step {fmt(figures.step)}; call {fmt(figures.call)}; bare {fmt(figures.bare)}"
    )
    return met


def fmt(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cli", choices=NAMES, action="append", help="default: all three")
    parser.add_argument("--runs", type=int, default=3, help="rounds per CLI; medians")
    args = parser.parse_args()
    fresh.bytecode()
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    with tempfile.TemporaryDirectory(prefix="harness-bench-startup-") as tmp:
        try:
            startup(Path(tmp))
        except (Failed, subprocess.SubprocessError, OSError) as exc:
            print(f"start-up: FAILED: {exc}", file=sys.stderr)
            return 1
    if not (CLIS / ".bin").is_dir():
        print("the agent CLIs are not installed (npm ci --prefix tests/clis)", file=sys.stderr)
        return 1
    names = list(dict.fromkeys(args.cli or NAMES))
    print(
        f"harness run vs the bare CLI, one writing subtask (edit + answer on the scripted "
        f"model API), {args.runs} runs each after a warm-up; target: call/bare <= {TARGET}x"
    )
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="harness-bench-cli-") as tmp:
        user = make_user_home(Path(tmp) / "user")
        for cli in names:
            try:
                figures = measure(cli, args.runs, user, Path(tmp))
            except (Failed, subprocess.SubprocessError, OSError) as exc:
                print(f"\n{cli}: FAILED: {exc}")
                failed.append(cli)
                continue
            report(cli, figures, args.runs, version(cli, user))
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
