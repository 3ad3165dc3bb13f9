"""OpenTelemetry traces (harness/step/tracing.py, spans.py): when the variables turn them on,
the span tree and attributes of a run (in process, with the SDK's in-memory exporter), and,
through the real CLI, spans sent to an OTLP receiver, a dead collector costing a run nothing,
and no OTEL_* variable reaching a worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from harness.base.errors import Halted
from harness.step import orchestrator, tracing

from .conftest import subtask
from .scripted import DIFF, Scripted, load, repository

ON = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        (ON, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
        (ON | {"OTEL_SDK_DISABLED": "TRUE"}, False),
        (ON | {"OTEL_SDK_DISABLED": "false"}, True),
        (ON | {"OTEL_TRACES_EXPORTER": "none"}, False),
        (ON | {"OTEL_TRACES_EXPORTER": "otlp"}, True),
    ],
)
def test_traces_are_on_only_when_the_standard_variables_say_so(
    environ: dict[str, str], on: bool
) -> None:
    assert tracing.enabled(environ) is on


def test_the_service_is_harness_unless_named() -> None:
    assert tracing.service_name({}) == "harness"
    assert tracing.service_name({"OTEL_SERVICE_NAME": "ci-agents"}) == "ci-agents"


def test_off_the_run_gets_a_trace_that_does_nothing_and_no_sdk_is_loaded() -> None:
    with tracing.traced("demo", lambda sid: "done", lambda: True, environ={}) as trace:
        assert isinstance(trace, tracing.Off)
        told: list[str] = []
        assert trace.returning("T1", lambda: told.append("x")) is not None
        assert trace.under("T1", "sub") is trace


# -- a run, in process ----------------------------------------------------------------------


def traced_run(root: Path, worker: Scripted, slots: int = 1) -> list[ReadableSpan]:
    """Run task demo in process, traced into memory; its spans once the run ended."""
    exporter = InMemorySpanExporter()
    task = load(root, worker)
    try:
        completed = lambda: task.model.completed is not None  # noqa: E731
        with tracing.traced("demo", task.model.status, completed, {}, exporter) as trace:
            task.trace = trace
            list(orchestrator.steps(task, once=False, slots=slots))
    finally:
        task.git.close()
    return list(exporter.get_finished_spans())


def tree(spans: list[ReadableSpan]) -> dict[str, Any]:
    """Each span's name -> its parent's name (None for the root), names made unique by
    a count when repeated."""
    names: dict[int, str] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        assert span.context is not None
        name = span.name
        n = sum(1 for v in names.values() if v.split("#")[0] == name)
        names[span.context.span_id] = f"{name}#{n + 1}" if n else name
    return {
        names[s.context.span_id]: (names[s.parent.span_id] if s.parent else None)
        for s in spans
        if s.context is not None
    }


def by_name(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def plan(*ids: str) -> list[dict[str, object]]:
    return [subtask(sid, creates=["src/made_*.py"]) for sid in ids]


def test_a_run_is_a_tree_of_subtasks_calls_and_phases(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("T1", "T2"))
    worker = Scripted({"T1": ["retryable", DIFF], "T2": [DIFF]})
    spans = traced_run(root, worker)
    worker.assert_used()
    assert tree(spans) == {
        "invoke_workflow harness": None,
        "subtask T1": "invoke_workflow harness",
        "invoke_agent scripted": "subtask T1",
        "invoke_agent scripted#2": "subtask T1",
        "gate": "subtask T1",
        "apply": "subtask T1",
        "acceptance": "subtask T1",
        "commit": "subtask T1",
        "subtask T2": "invoke_workflow harness",
        "invoke_agent scripted#3": "subtask T2",
        "gate#2": "subtask T2",
        "apply#2": "subtask T2",
        "acceptance#2": "subtask T2",
        "commit#2": "subtask T2",
    }
    (run,) = by_name(spans, "invoke_workflow harness")
    assert run.attributes is not None and dict(run.attributes) == {
        "gen_ai.operation.name": "invoke_workflow",
        "harness.task.id": "demo",
        "harness.status": "complete",
    }
    assert run.resource.attributes["service.name"] == "harness"
    calls = sorted(
        (s for s in spans if s.name.startswith("invoke_agent")), key=lambda s: s.start_time or 0
    )
    assert all(s.kind is SpanKind.CLIENT for s in calls)
    first, retry, t2 = (dict(s.attributes or {}) for s in calls)
    assert first["error.type"] == "retryable" and calls[0].status.status_code is StatusCode.ERROR
    assert (first["harness.retry"], retry["harness.retry"]) == (False, True)
    assert first["harness.call.id"] != retry["harness.call.id"]
    assert t2 == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "scripted",
        "gen_ai.agent.name": "scripted",
        "harness.task.id": "demo",
        "harness.subtask.id": "T2",
        "harness.call.id": t2["harness.call.id"],
        "harness.retry": False,
        "harness.status": "ok",
    }
    subtasks = {s.name: dict(s.attributes or {}) for s in by_name(spans, "subtask T1")}
    assert subtasks["subtask T1"]["harness.status"] == "done"
    for phase in by_name(spans, "gate"):
        assert dict(phase.attributes or {})["harness.verdict"] == "ok"
    # Each span within its parent's time.
    ids = {s.context.span_id: s for s in spans if s.context is not None}
    for span in spans:
        if span.parent is not None:
            up = ids[span.parent.span_id]
            assert up.start_time is not None and span.start_time is not None
            assert up.start_time <= span.start_time
            assert span.end_time is not None and up.end_time is not None
            assert span.end_time <= up.end_time


def test_calls_in_pool_threads_hang_under_their_own_subtask(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("P1", "P2", "P3"))
    worker = Scripted({"P1": [DIFF], "P2": [DIFF], "P3": [DIFF]}, {"P1": 0.3, "P2": 0.1})
    spans = traced_run(root, worker, slots=3)
    ids = {s.context.span_id: s for s in spans if s.context is not None}
    calls = [s for s in spans if s.name.startswith("invoke_agent")]
    assert len(calls) == 3
    for call in calls:
        assert call.parent is not None
        parent = ids[call.parent.span_id]
        assert parent.name == f"subtask {dict(call.attributes or {})['harness.subtask.id']}"
    # A call's span ends when its process did, not when its answer was taken in plan order.
    p1 = next(c for c in calls if dict(c.attributes or {})["harness.subtask.id"] == "P1")
    p2 = next(c for c in calls if dict(c.attributes or {})["harness.subtask.id"] == "P2")
    assert p2.end_time is not None and p1.end_time is not None and p2.end_time < p1.end_time


def test_a_halted_run_ends_every_span_and_says_why(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("T1", "T2"))
    worker = Scripted({"T1": ["hard"]})
    exporter = InMemorySpanExporter()
    task = load(root, worker)
    try:
        traced = tracing.traced("demo", task.model.status, lambda: False, {}, exporter)
        with pytest.raises(Halted), traced as trace:
            task.trace = trace
            list(orchestrator.steps(task, once=False))
    finally:
        task.git.close()
    spans = exporter.get_finished_spans()
    (run,) = by_name(list(spans), "invoke_workflow harness")
    assert dict(run.attributes or {})["harness.status"] == "halted"
    assert dict(run.attributes or {})["error.type"] == "Halted"
    (t1,) = by_name(list(spans), "subtask T1")
    assert dict(t1.attributes or {})["harness.status"] == "failed"
    assert t1.status.status_code is StatusCode.ERROR
    assert not by_name(list(spans), "subtask T2")


def test_the_usage_an_answer_reports_reaches_its_call_span(tmp_path: Path) -> None:
    root = repository(tmp_path, plan("T1"))
    path = "src/made_t1_1.py"
    patch = (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        "@@ -0,0 +1 @@\n+VALUE = 1\n"
    )
    metrics = {"cost_usd": 0.5, "tokens": 7, "input_tokens": 3, "output_tokens": 4}
    answer = {"diffs": [{"file": path, "patch": patch}], "artifacts": [], "notes": []}
    worker = Scripted({"T1": [answer | {"metrics": metrics}]})
    spans = traced_run(root, worker)
    (call,) = [s for s in spans if s.name.startswith("invoke_agent")]
    found = dict(call.attributes or {})
    assert found["harness.cost_usd"] == 0.5
    assert (found["gen_ai.usage.input_tokens"], found["gen_ai.usage.output_tokens"]) == (3, 4)
