"""OpenTelemetry traces of `run` and `next`: whether the standard OTEL_* variables ask for
them, what the step tells a trace (a call made, answered, a phase ended, a subtask ended),
and the GenAI and harness attributes of an agent call.

Off (no OTLP endpoint, OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER other than otlp),
`Off` stands in and the SDK is never imported; on, `traced` loads spans.py, which holds
every use of the SDK (genai.py the attributes it gives spans). A trace is for people
watching a run: nothing here writes the log, an exchange or a commit, and its times are
the host's, so it changes no recorded byte.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from harness.base.errors import Halted
from harness.boundary import worker
from harness.boundary.registry import Agent
from harness.step.live import tell


class Trace(Protocol):
    """What the step tells a trace; each subtask named as in its own plan."""

    def under(self, subtask: str, task_id: str) -> Trace:
        """The trace of the plan `task_id` that `subtask` runs, its spans under that
        subtask's."""

    def called(self, subtask: str, agent: Agent, call_id: str, retry: bool) -> None:
        """A worker process is about to start for `subtask`'s call `call_id`."""

    def returning(self, subtask: str, told: Callable[[], None] | None) -> Callable[[], None] | None:
        """What a pool thread runs once the call's process ended: `told`, and the time."""

    def answered(self, subtask: str, outcome: worker.Outcome) -> None:
        """The call's answer was judged: `outcome`."""

    def phase(self, subtask: str, name: str, ok: bool, outcome: str | None) -> None:
        """A phase of the subtask ended (as live.Live.ended is told)."""

    def finished(self, subtask: str, status: str) -> None:
        """The subtask ended in this run: `status` as the log says (done, failed, ...)."""


class Off:
    """No trace: what a step tells it goes nowhere."""

    def under(self, subtask: str, task_id: str) -> Trace:
        return self

    def called(self, subtask: str, agent: Agent, call_id: str, retry: bool) -> None:
        pass

    def returning(self, subtask: str, told: Callable[[], None] | None) -> Callable[[], None] | None:
        return told

    def answered(self, subtask: str, outcome: worker.Outcome) -> None:
        pass

    def phase(self, subtask: str, name: str, ok: bool, outcome: str | None) -> None:
        pass

    def finished(self, subtask: str, status: str) -> None:
        pass


def enabled(environ: Mapping[str, str]) -> bool:
    """Whether the standard variables ask for traces: an OTLP endpoint (for traces, or for
    every signal), the SDK not disabled, and no exporter other than OTLP named."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() != "otlp":
        return False  # "none", or one harness does not speak ("console", "zipkin")
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    return bool(endpoint or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip())


def service_name(environ: Mapping[str, str]) -> str:
    return environ.get("OTEL_SERVICE_NAME", "").strip() or "harness"


@contextmanager
def traced(
    task_id: str,
    status: Callable[[str], str],
    completed: Callable[[], bool],
    environ: Mapping[str, str] | None = None,
    exporter: Any = None,
) -> Iterator[Trace]:
    """The trace of one command's run of `task_id`: a span for the run around the `with`,
    exported when `environ` (os.environ by default) asks for it, or to `exporter` (an SDK
    SpanExporter: a test's); `Off` otherwise. `status` names a subtask's status when the
    run ends with its span open; `completed` says whether the task is complete then.
    Leaving, the spans are sent within a bounded time, whatever the collector does."""
    env = os.environ if environ is None else environ
    if exporter is None and not enabled(env):
        yield Off()
        return
    try:
        from harness.step import spans  # the SDK: only now

        run = spans.Run(task_id, service_name(env), exporter)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] == "harness":
            raise
        # OTEL_* set machine-wide, harness installed without the extra: the run is the point.
        tell(
            f"traces off: the OTEL_* variables ask for traces, and they need {exc.name}: "
            "pip install 'harness[otel]'"
        )
        yield Off()
        return
    except Exception as exc:  # an OTEL_* value the SDK refuses: the run goes on untraced
        tell(f"traces off: {' '.join(str(exc).split())}")
        yield Off()
        return
    try:
        yield run.root
    except BaseException as exc:
        run.close(status, _ending(exc), type(exc).__name__)
        raise
    else:
        run.close(status, "complete" if completed() else "ok", None)


def _ending(exc: BaseException) -> str:
    if isinstance(exc, Halted):
        return "halted"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return "error"
