"""Start-up imports only what the command given uses: the command line's modules are imported
when their command is dispatched, so `--version`, `status` or `log` never pay for the
orchestrator, the boundary's proxy or the readers they do not run."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from .conftest import CLOCK, Sample, calc_patch, ok, subtask

# Each test starts the command line in a fresh interpreter: what start-up imports.
pytestmark = pytest.mark.e2e

# Imports `harness.cli.main`, runs it on the arguments given, and prints its exit code and
# the modules then loaded as JSON on stderr's last line (stdout is the command's own).
PROBE = """
import io, contextlib, sys, orjson
from harness.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main.main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
print(orjson.dumps([code, sorted(sys.modules)]).decode(), file=sys.stderr)
"""

# What no reading command imports: the step's engine, the boundary's network, the other
# readers, the live board, the MCP SDK (over a second to import: `harness mcp` alone).
NEVER_FOR_READING = {
    "mcp",
    "harness.cli.mcpserver",
    "harness.step.orchestrator",
    "harness.step.live",
    "harness.boundary.proxy",
    "harness.readers.replay",
    "harness.readers.report",
    "harness.readers.attest",
    "harness.importers.glee",
    "harness.importers.agentfile",
}


def loaded(*args: str, env: dict[str, str] | None = None) -> set[str]:
    """The modules loaded once `harness *args` is done (in `env`, else ours); it must have
    exited 0."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True, env=env
    )
    code, modules = orjson.loads(done.stderr.splitlines()[-1])
    assert code == 0, done.stderr
    return set(modules)


def commands(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("harness.cli.commands.")}


def test_version_imports_no_command_and_nothing_below_the_base() -> None:
    modules = loaded("--version")
    assert {m for m in modules if m.startswith("harness")} <= {
        "harness",
        "harness.base",
        "harness.base.errors",
        "harness.base.printable",
        "harness.cli",
        "harness.cli.main",
    }
    assert not {"git", "jsonschema", "jsonschema_rs", "yaml"} & modules


def test_help_of_a_command_imports_its_choices_only() -> None:
    modules = loaded("log", "--help")
    assert "harness.readers.logview" in modules
    assert not commands(modules)
    assert not (NEVER_FOR_READING | {"harness.importers.personas", "git"}) & modules


def test_status_imports_its_own_command_alone(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    modules = loaded("status", "demo", "--repo", str(sample.root))
    assert commands(modules) == {"harness.cli.commands.status"}
    assert not NEVER_FOR_READING & modules


def test_log_imports_its_own_command_alone(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    modules = loaded("log", "demo", "--repo", str(sample.root))
    assert commands(modules) == {"harness.cli.commands.log"}
    assert not (NEVER_FOR_READING | {"harness.boundary.sandbox"}) & modules


def test_plan_show_imports_neither_the_importers_nor_the_pre_flight(sample: Sample) -> None:
    sample.write_plan([subtask("T1")])
    modules = loaded("plan", "show", "demo", "--repo", str(sample.root))
    assert commands(modules) == {"harness.cli.commands.plan_show"}
    assert not NEVER_FOR_READING & modules
    assert not {"harness.step.preflight", "harness.step.drafting", "yaml"} & modules


def test_a_run_imports_opentelemetry_only_when_the_variables_ask_for_traces(
    sample: Sample,
) -> None:
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    untraced = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    untraced["HARNESS_CLOCK"] = CLOCK
    task = ("demo", "--quiet", "--repo", str(sample.root))
    modules = loaded("next", *task, env=untraced)
    assert "harness.step.orchestrator" in modules  # it did run the step
    assert not {m for m in modules if m.partition(".")[0] == "opentelemetry"}
    assert "harness.step.spans" not in modules
    # The twin, asked for traces (of the task's completion; a collector down changes nothing).
    traced = untraced | {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    assert {"harness.step.spans", "opentelemetry.sdk.trace"} <= loaded("run", *task, env=traced)
