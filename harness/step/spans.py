"""The spans of a traced run, made with the OpenTelemetry SDK: a private TracerProvider
(never the global one, which libraries in this process may use), a BatchSpanProcessor
sending over OTLP/HTTP (protobuf) in its own thread, and the bounded end of it all.

Only tracing.traced imports this module, once the variables ask for traces. Every span is
made with its parent's context passed explicitly and an explicit time, never through the
SDK's current context: calls end in pool threads, phases are told after they ended, and a
nested plan's subtasks hang under the subtask that runs it.

A collector that is down, refuses or never answers costs the run at most SHUTDOWN_S at its
end: exports run in the processor's thread, each bounded by EXPORT_TIMEOUT_S, their errors
are counted rather than logged, and the run says once on stderr how many spans were lost.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from harness import __version__
from harness.boundary import worker
from harness.boundary.registry import Agent
from harness.step import genai
from harness.step.live import tell

# One export, retries included (the exporter's own deadline). Under the exporter's first
# backoff (1 s, less 20 % jitter), so a refused connection is given up at once rather than
# retried while the run's end waits: traces are best effort.
EXPORT_TIMEOUT_S = 0.75
SHUTDOWN_S = 1.0  # the most the run's end waits for the last spans to leave


class Counted(SpanExporter):
    """An exporter whose failures are counted, never raised nor logged."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.delivered = 0
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter's bug must not reach the run either
            result = SpanExportResult.FAILURE
        if result == SpanExportResult.SUCCESS:
            with self.lock:
                self.delivered += len(spans)
        return result

    def shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@dataclass
class _State:
    """What every view of one run's trace shares, keyed by subtask as `live` names it
    (a nested plan's prefixed with its task id and "/")."""

    tracer: trace.Tracer
    lock: threading.Lock = field(default_factory=threading.Lock)
    subtasks: dict[str, tuple[Span, bool]] = field(default_factory=dict)  # span, top-level
    calls: dict[str, Span] = field(default_factory=dict)
    marks: dict[str, int] = field(default_factory=dict)  # when its last phase ended
    returned: dict[str, int] = field(default_factory=dict)  # when its call's process ended
    ended: int = 0  # spans ended: those delivered are counted by the exporter


class Spans:
    """The trace of one task's plan (tracing.Trace), its subtasks under `parent`."""

    def __init__(self, state: _State, task_id: str, parent: Context, prefix: str) -> None:
        self.state, self.task_id, self.parent, self.prefix = state, task_id, parent, prefix

    def under(self, subtask: str, task_id: str) -> Spans:
        with self.state.lock:
            span = self._subtask(subtask, time.time_ns())
        parent = trace.set_span_in_context(span)
        return Spans(self.state, task_id, parent, f"{self.prefix}{task_id}/")

    def called(self, subtask: str, agent: Agent, call_id: str, retry: bool) -> None:
        now = time.time_ns()
        attributes = genai.call_attributes(self.task_id, subtask, agent, call_id)
        attributes["harness.retry"] = retry
        with self.state.lock:
            key = self.prefix + subtask
            self.state.marks[key] = now
            self.state.calls[key] = self.state.tracer.start_span(
                f"invoke_agent {agent.id}",
                trace.set_span_in_context(self._subtask(subtask, now)),
                SpanKind.CLIENT,
                attributes,
                start_time=now,
            )

    def returning(self, subtask: str, told: Callable[[], None] | None) -> Callable[[], None] | None:
        key = self.prefix + subtask

        def ended() -> None:
            with self.state.lock:
                self.state.returned[key] = time.time_ns()
            if told is not None:
                told()

        return ended

    def answered(self, subtask: str, outcome: worker.Outcome) -> None:
        key = self.prefix + subtask
        with self.state.lock:
            span = self.state.calls.pop(key, None)
            ended = self.state.returned.pop(key, None)
            if span is None:  # its answer was recorded by an earlier run: no call made now
                return
            span.set_attributes(genai.outcome_attributes(outcome))
            if outcome.status != "ok":
                span.set_status(Status(StatusCode.ERROR, outcome.kind))
            self._end(span, ended or time.time_ns())

    def phase(self, subtask: str, name: str, ok: bool, outcome: str | None) -> None:
        now = time.time_ns()
        key = self.prefix + subtask
        with self.state.lock:
            parent = trace.set_span_in_context(self._subtask(subtask, now))
            began = self.state.marks.get(key, now)
            self.state.marks[key] = now
            if name == "call":  # its span is the agent call's, ended as it was answered
                return
            attributes = genai.phase_attributes(self.task_id, subtask, name, ok, outcome)
            span = self.state.tracer.start_span(
                name,
                parent,
                attributes=attributes,
                start_time=began,
            )
            if not ok:
                span.set_status(Status(StatusCode.ERROR, outcome or "failed"))
            self._end(span, now)

    def finished(self, subtask: str, status: str) -> None:
        with self.state.lock:
            found = self.state.subtasks.pop(self.prefix + subtask, None)
            if found is not None:
                self._close(found[0], status)

    # -- under the lock --------------------------------------------------------------------

    def _subtask(self, subtask: str, now: int) -> Span:
        """The subtask's span, begun `now` if it is not yet."""
        key = self.prefix + subtask
        found = self.state.subtasks.get(key)
        if found is None:
            attributes = {"harness.task.id": self.task_id, "harness.subtask.id": subtask}
            span = self.state.tracer.start_span(
                f"subtask {subtask}", self.parent, attributes=attributes, start_time=now
            )
            found = self.state.subtasks[key] = (span, not self.prefix)
            self.state.marks.setdefault(key, now)
        return found[0]

    def _close(self, span: Span, status: str) -> None:
        span.set_attribute("harness.status", status)
        if status in ("failed", "blocked"):
            span.set_status(Status(StatusCode.ERROR, status))
        self._end(span, time.time_ns())

    def _end(self, span: Span, when: int) -> None:
        span.end(end_time=when)
        self.state.ended += 1


class Run:
    """One command's trace: the run's span, `root` the trace of its task's plan."""

    def __init__(self, task_id: str, service: str, exporter: SpanExporter | None) -> None:
        # The exporter's own warnings would print a stack of lines per failed batch:
        # failures are counted instead and told once, at the end.
        otel = logging.getLogger("opentelemetry")
        otel.propagate = False
        if not otel.handlers:
            otel.addHandler(logging.NullHandler())
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            # Endpoint, headers and TLS as the OTEL_EXPORTER_OTLP_* variables say.
            exporter = OTLPSpanExporter(timeout=EXPORT_TIMEOUT_S)
        self.exporter = Counted(exporter)
        resource = Resource.create({"service.name": service, "service.version": __version__})
        self.provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.processor = BatchSpanProcessor(self.exporter)
        self.provider.add_span_processor(self.processor)
        self.state = _State(self.provider.get_tracer("harness", __version__))
        self.span = self.state.tracer.start_span(
            "invoke_workflow harness",
            attributes={"gen_ai.operation.name": "invoke_workflow", "harness.task.id": task_id},
        )
        self.root = Spans(self.state, task_id, trace.set_span_in_context(self.span), "")

    def close(self, status: Callable[[str], str], ending: str, error: str | None) -> None:
        """End every span still open (a call cut short, a subtask halted or awaiting a
        person: its status as `status` says, a nested one's "unfinished"), then the run's,
        and send them, waiting SHUTDOWN_S at most."""
        state = self.state
        with state.lock:
            for span in state.calls.values():
                span.set_attribute("harness.status", "unfinished")
                self.root._end(span, time.time_ns())
            for key, (span, top) in list(state.subtasks.items()):
                self.root._close(span, status(key) if top else "unfinished")
            state.calls.clear()
            state.subtasks.clear()
        self.span.set_attribute("harness.status", ending)
        if error is not None:
            self.span.set_attribute("error.type", error)
            self.span.set_status(Status(StatusCode.ERROR, error))
        self.root._end(self.span, time.time_ns())
        # shutdown() waits for the processor's thread up to 30 s: bounded here instead.
        ending_thread = threading.Thread(target=self.provider.shutdown, daemon=True)
        ending_thread.start()
        ending_thread.join(SHUTDOWN_S)
        lost = state.ended - self.exporter.delivered
        if lost > 0:
            tell(
                f"traces: {lost} of {state.ended} spans not exported "
                "(the OTLP collector is down, refused them or did not answer in time)"
            )
