"""OpenTelemetry traces (harness/step/tracing.py, spans.py): when the variables turn them on,
the span tree and attributes of a run (in process, with the SDK's in-memory exporter), and,
through the real CLI, spans sent to an OTLP receiver, a dead collector costing a run nothing,
and no OTEL_* variable reaching a worker."""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from harness.base.errors import Halted
from harness.repository.layout import Layout
from harness.step import orchestrator, tracing

from .conftest import Sample, calc_patch, ok, scripted, subtask
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


# -- through the real CLI, to an OTLP/HTTP receiver -------------------------------------------


class Receiver(http.server.ThreadingHTTPServer):
    """A collector on 127.0.0.1: POST /v1/traces decoded as OTLP protobuf, answered 200."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        super().__init__(("127.0.0.1", 0), _Traces)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def spans(self) -> list[tuple[str, dict[str, Any], str]]:
        """Each span received: its name, attributes and service."""
        found = []
        for request in self.requests:
            for rs in request.resource_spans:
                service = next(
                    a.value.string_value for a in rs.resource.attributes if a.key == "service.name"
                )
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        attributes = {a.key: _value(a.value) for a in span.attributes}
                        found.append((span.name, attributes, service))
        return found


class _Traces(http.server.BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.requests.append(request)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _value(v: Any) -> Any:
    return getattr(v, v.WhichOneof("value"))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def traced_env(endpoint: str, **more: str) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SDK_DISABLED": "false", **more}


UNTRACED = {"OTEL_SDK_DISABLED": "true"}  # whatever the developer's shell has set
# The demo's record commit, the same with tracing on as without (README, test_cli.py).
DEMO_RECORD = "8f1fff8dd94c6ef67c222abad4a6d349ab494ff9"


@pytest.mark.e2e
def test_a_run_sends_its_spans_to_the_collector(tmp_path: Path, receiver: Receiver) -> None:
    s = scripted(tmp_path)
    s.write_plan([subtask("T1")])
    s.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    res = s.cli("run", "demo", env=traced_env(receiver.endpoint, OTEL_SERVICE_NAME="ci"))
    assert res.returncode == 0, res.stderr
    assert "traces" not in res.stderr  # nothing lost
    spans = receiver.spans()
    names = sorted(name for name, _, _ in spans)
    assert "invoke_workflow harness" in names and "subtask T1" in names
    assert "invoke_agent scripted" in names
    assert {"gate", "apply", "commit"} <= set(names)
    (call,) = [attrs for name, attrs, _ in spans if name == "invoke_agent scripted"]
    assert call["gen_ai.operation.name"] == "invoke_agent"
    assert call["gen_ai.agent.name"] == "scripted"
    assert call["harness.subtask.id"] == "T1" and call["harness.status"] == "ok"
    assert {service for _, _, service in spans} == {"ci"}


@pytest.mark.e2e
def test_the_demo_with_tracing_on_records_the_same_commits(
    tmp_path: Path, receiver: Receiver
) -> None:
    where = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_CLOCK"}
    res = subprocess.run(
        [sys.executable, "-m", "harness.cli", "demo", "--dir", str(where)],
        capture_output=True,
        text=True,
        env=env | traced_env(receiver.endpoint),
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    head = subprocess.run(
        ["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    assert head.stdout.strip() == DEMO_RECORD
    names = [name for name, _, _ in receiver.spans()]
    assert names.count("invoke_workflow harness") >= 1
    assert {"subtask T1", "subtask T2", "subtask T3"} <= set(names)


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.e2e
def test_a_collector_down_or_silent_fails_no_run_nor_moves_its_commits(
    tmp_path: Path,
) -> None:
    # Listening, never accepting: connections are made and never answered.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    endpoints = {
        "untraced": None,
        "closed port": closed_port(),
        "silent": f"http://127.0.0.1:{silent.getsockname()[1]}",
    }
    # How much it slows a run is measured in bench/bench_tracing.py, never here.
    heads = {}
    try:
        for name, endpoint in endpoints.items():
            # The same folder each time: the script's path is in the registry, hence in
            # every call id and commit.
            shutil.rmtree(tmp_path / "run", ignore_errors=True)
            (tmp_path / "run").mkdir()
            s = scripted(tmp_path / "run")
            s.write_plan([subtask("T1")])
            s.write_script([ok("T1", ("src/calc.py", calc_patch()))])
            env = UNTRACED if endpoint is None else traced_env(endpoint)
            res = s.cli("run", "demo", env=env)
            assert res.returncode == 0, res.stderr
            heads[name] = s.head()
            if endpoint is not None:
                assert "harness: traces:" in res.stderr and "spans not exported" in res.stderr
    finally:
        silent.close()
    assert len(set(heads.values())) == 1, heads


# A worker that answers with the names of the variables it was given, as an artifact.
ENV_WORKER = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "envdump 1.0.0"; exit 0; fi
exec "$HARNESS_PYTHON" -c '
import json, os, sys
context, prompt = (json.loads(line) for line in sys.stdin.read().splitlines())
names = " ".join(sorted(os.environ))
result = {"diffs": [], "artifacts": [{"name": "env.txt", "content": names}], "notes": []}
head = {"ts": prompt["ts"], "task_id": prompt["task_id"], "agent_id": "envdump"}
print(json.dumps({**head, "status": "ok", "result": result}))
'
"""


def worker_environment(s: Sample, allow: list[str], env: dict[str, str]) -> set[str]:
    """The variables a worker saw in a traced run, the registry allowing it `allow`."""
    launcher = s.root / "agents" / "envdump"
    launcher.write_text(ENV_WORKER)
    launcher.chmod(0o755)
    reg = s.read_json("ai/agents/registry.json")
    reg["agents"].append(
        {
            "id": "envdump",
            "cmd": "agents/envdump",
            "version": ">=0.1",
            "capabilities": ["review"],
            "args": [],
            "env": allow,
        }
    )
    s.write_json("ai/agents/registry.json", reg)
    s.write_plan([subtask("R1", role="review", write_scope="none", agent="envdump")])
    s.commit_all("an agent that shows its environment")
    res = s.cli("run", "demo", env=env)
    assert res.returncode == 0, res.stderr
    (answer,) = (s.root / "ai" / "exchanges" / "demo").glob("*/stdout.ndjson")
    line = orjson.loads(answer.read_bytes())
    return set(line["result"]["artifacts"][0]["content"].split())


@pytest.mark.e2e
def test_no_otel_variable_reaches_a_worker(tmp_path: Path, receiver: Receiver) -> None:
    s = scripted(tmp_path)
    env = traced_env(receiver.endpoint, OTEL_SERVICE_NAME="ci", OTEL_EXPORTER_OTLP_HEADERS="k=v")
    seen = worker_environment(s, [], env)
    assert "HARNESS_PYTHON" in seen  # it did report its environment
    assert not {name for name in seen if name.startswith("OTEL_")}
    assert any(name == "invoke_agent envdump" for name, _, _ in receiver.spans())


@pytest.mark.e2e
def test_an_otel_variable_the_registry_allows_reaches_the_worker(
    tmp_path: Path, receiver: Receiver
) -> None:
    s = scripted(tmp_path)
    env = traced_env(receiver.endpoint, OTEL_SERVICE_NAME="ci")
    seen = worker_environment(s, ["OTEL_SERVICE_NAME"], env)
    assert {name for name in seen if name.startswith("OTEL_")} == {"OTEL_SERVICE_NAME"}


def test_a_nested_plans_subtasks_hang_under_the_subtask_that_runs_it(tmp_path: Path) -> None:
    root = repository(tmp_path, [*plan("T1"), {"id": "N", "plan": "inner", "depends_on": ["T1"]}])
    inner = {"task_id": "inner", "created": "2026-01-01T00:00:00Z", "subtasks": plan("I1")}
    Layout(root).plan("inner").parent.mkdir(parents=True, exist_ok=True)
    Layout(root).plan("inner").write_bytes(orjson.dumps(inner))
    worker = Scripted({"T1": [DIFF], "I1": [DIFF]})
    spans = traced_run(root, worker)
    worker.assert_used()
    found = tree(spans)
    assert found["subtask N"] == "invoke_workflow harness"
    assert found["subtask I1"] == "subtask N"
    assert found["invoke_agent scripted#2"] == "subtask I1"
    (i1,) = by_name(spans, "subtask I1")
    assert dict(i1.attributes or {}) == {
        "harness.task.id": "inner",
        "harness.subtask.id": "I1",
        "harness.status": "done",
    }
    (n,) = by_name(spans, "subtask N")
    assert dict(n.attributes or {})["harness.status"] == "done"


@pytest.mark.parametrize(
    "bad", [{"OTEL_BSP_SCHEDULE_DELAY": "-5"}, {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "x"}]
)
def test_a_value_the_sdk_refuses_leaves_the_run_untraced_with_one_line(
    bad: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in (ON | bad).items():
        monkeypatch.setenv(name, value)
    with tracing.traced("demo", lambda sid: "done", lambda: True) as trace:
        assert isinstance(trace, tracing.Off)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("harness: traces off: ")
    # Its twin: the same variables well formed, and the run is traced.
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "8")
    exporter = InMemorySpanExporter()
    with tracing.traced("demo", lambda sid: "done", lambda: True, None, exporter) as trace:
        assert not isinstance(trace, tracing.Off)
    assert [s.name for s in exporter.get_finished_spans()] == ["invoke_workflow harness"]
    assert capsys.readouterr().err == ""


def test_a_supervisors_call_is_an_agent_call_of_its_subtask(tmp_path: Path) -> None:
    root = repository(tmp_path, [subtask("T1", creates=["src/made_*.py"], supervised=True)])
    registry = Layout(root).registry
    doc = orjson.loads(registry.read_bytes())
    sup = {"id": "sup", "cmd": "agents/scripted-cli", "version": ">=0.1", "args": []}
    doc["agents"].append(sup | {"capabilities": ["audit"]})
    registry.write_bytes(orjson.dumps(doc))
    verdict = {"action": "CONTINUE", "reason": "on goal"}
    answer = {"diffs": [], "artifacts": [], "notes": [], "verdict": verdict}
    worker = Scripted({"T1": [DIFF, answer]})
    spans = traced_run(root, worker)
    worker.assert_used()
    found = tree(spans)
    assert found["invoke_agent sup"] == "subtask T1"
    assert found["supervise"] == "subtask T1"
    (call,) = by_name(spans, "invoke_agent sup")
    assert dict(call.attributes or {})["gen_ai.agent.name"] == "sup"
    (supervise,) = by_name(spans, "supervise")
    assert dict(supervise.attributes or {})["harness.verdict"] == "ok"
