"""The agent CLI as a process: run in the sandbox on the prompt, stopped at the call's
timeouts, and asked for its version."""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import suppress
from dataclasses import dataclass

from harness.base import errors, folders
from harness.boundary import proc, registry
from harness.workers.shim import Envelope, Sandbox, ShimError, fresh_folder

# The CLI must stop before harness stops the shim, so the shim can still report.
MARGIN = 0.8


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: bytes
    stderr: bytes

    def stderr_tail(self, size: int = 500) -> str:
        """The end of what the CLI said on stderr, as `: <text>`, or "" when it said nothing."""
        tail = self.stderr.decode("utf-8", "replace").strip()[-size:]
        return f": {tail}" if tail else ""


def run_cli(
    argv: list[str],
    env: Envelope,
    box: Sandbox,
    prompt: str,
    extra_env: dict[str, str] | None = None,
    streams: bool = False,
) -> Ran:
    """The CLI in the sandbox: prompt on stdin then EOF, output to files, group-killed on time.
    `extra_env` is what the shim sets for the CLI on top of its own environment (the caps on
    the CLI's own retries). A CLI that `streams` its events as they happen, and prints none
    for the call's idle_s, is stuck: stopped then, not at the soft timeout.

    A CLI missing from PATH is hard; one that had to be stopped is retryable.
    """
    box.argv = list(argv)
    work = fresh_folder(box.root.parent, "cli")
    try:
        (work / "prompt.txt").write_text(prompt, "utf-8")
        child_env = {k: v for k, v in os.environ.items() if k not in ("CLAUDECODE",)}
        child_env |= extra_env or {}
        # A CLI that takes its project from PWD (opencode does) would find the shim's own
        # working copy, which holds the files the sandbox withholds.
        child_env["PWD"] = str(box.root)
        limits = env.payload["timeouts"]
        try:
            result = proc.run(
                argv,
                cwd=box.root,
                env=child_env,
                stdin=work / "prompt.txt",
                stdout=work / "out",
                stderr=work / "err",
                soft_s=limits["soft_s"] * MARGIN,
                hard_s=limits["hard_s"] * MARGIN,
                idle_s=limits.get("idle_s") if streams else None,
            )
        except errors.HarnessError:
            raise ShimError(f"{argv[0]} is not installed or not on PATH") from None
        if result.timed_out == "idle":
            raise ShimError(
                f"{argv[0]} printed nothing for {limits['idle_s']:g}s: stuck", "retryable"
            )
        if result.timed_out is not None:
            raise ShimError(
                f"{argv[0]} was killed after the {result.timed_out} timeout", "retryable"
            )
        return Ran(result.code, (work / "out").read_bytes(), (work / "err").read_bytes())
    finally:
        with suppress(OSError):
            folders.remove(work)


def cli_version(program: str, shim_version: str) -> str:
    """`<program> <its version> via <shim> <version>`, the CLI's version first: a registry
    range is about the agent CLI the shim drives (seed 004's claude `">=2.0.34"`), so the
    probe holds the first version it reads against it. A CLI missing from PATH, failing,
    or naming no version is a ShimError, which fails the probe whatever the range."""
    found = shutil.which(program)
    if found is None:
        raise ShimError(f"{program} not found on PATH")
    try:
        done = subprocess.run(
            [found, "--version"],
            capture_output=True,
            text=True,
            timeout=20,  # below the probe's own 30 s, so the shim still says what hung
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ShimError(f"{program} --version: {exc.__class__.__name__}") from None
    first = (done.stdout.strip().splitlines() or [""])[0]
    version = registry.version_in(first)
    if done.returncode != 0 or version is None:
        # A CLI that cannot start says why on stderr (a runtime too old, a missing library).
        said = first or (done.stderr.strip().splitlines() or [""])[0]
        raise ShimError(
            f"{program} --version gave no version (exit {done.returncode}): {said[:160]!r}"
        )
    return f"{program} {version} via {shim_version}"
