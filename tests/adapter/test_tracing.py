"""One trace per request: server span, checkpoint load/save, exactly one workflow run span."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from devtools.function_host import FunctionHost
from resumable.base.tracing import is_workflow_run_span

ROOT = Path(__file__).resolve().parents[2]
TRACE_ID = "4bf92f3577b34da6a3ce929e0e4736aa"
PARENT_ID = "00f067aa0ba902b7"


def by_name(spans: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    grouped: dict[str, list[ReadableSpan]] = {}
    for span in spans.get_finished_spans():
        grouped.setdefault(span.name, []).append(span)
    return grouped


def run_spans(spans: InMemorySpanExporter) -> list[ReadableSpan]:
    """The framework's workflow run spans, under whichever name the installed version gives them."""
    return [span for span in spans.get_finished_spans() if is_workflow_run_span(span.name)]


def assert_resume_tree(spans: InMemorySpanExporter, checkpoint_id: str, new_id: str) -> None:
    grouped = by_name(spans)
    [server] = grouped["POST /api/runs"]
    [load] = grouped["checkpoint.load"]
    [save] = grouped["checkpoint.save"]
    [run] = run_spans(spans)
    assert server.kind is SpanKind.SERVER
    for child in (load, save, run):
        assert child.context.trace_id == server.context.trace_id
        assert child.parent is not None
        assert child.parent.span_id == server.context.span_id
    assert load.attributes["checkpoint.id"] == checkpoint_id
    assert load.attributes["checkpoint.size_bytes"] > 0
    assert load.attributes["checkpoint.decode_ms"] >= 0
    assert save.attributes["checkpoint.id"] == new_id
    assert save.attributes["checkpoint.previous_id"] == checkpoint_id
    assert save.attributes["checkpoint.encode_ms"] >= 0
    assert load.end_time <= run.start_time and run.end_time <= save.start_time
    assert server.attributes["http.response.status_code"] == 200
    # Every span of the request belongs to this one trace.
    assert {s.context.trace_id for s in spans.get_finished_spans()} == {server.context.trace_id}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_resume_is_one_trace_with_one_workflow_run(
    host: FunctionHost, spans: InMemorySpanExporter, stream: bool
) -> None:
    first = await (await host.request("POST", "/api/runs", json_body={"messages": "one"})).json()
    spans.clear()
    response = await host.request(
        "POST", "/api/runs", json_body={"checkpoint_id": first["checkpoint_id"], "messages": "two", "stream": stream}
    )
    if stream:
        events = [e async for e in response.events()]
        body = events[-1][1]
    else:
        body = await response.json()
    assert_resume_tree(spans, first["checkpoint_id"], body["checkpoint_id"])


async def test_the_callers_traceparent_is_continued(host: FunctionHost, spans: InMemorySpanExporter) -> None:
    response = await host.request(
        "POST", "/api/runs", json_body={"messages": "hi"}, headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
    )
    assert response.status == 200
    assert response.headers["x-request-id"] == TRACE_ID
    [server] = by_name(spans)["POST /api/runs"]
    assert format(server.context.trace_id, "032x") == TRACE_ID
    assert format(server.parent.span_id, "016x") == PARENT_ID


async def test_a_refused_resume_has_no_workflow_or_save_span(host: FunctionHost, spans: InMemorySpanExporter) -> None:
    response = await host.request("POST", "/api/runs", json_body={"checkpoint_id": "nope", "messages": "x"})
    assert response.status == 404
    grouped = by_name(spans)
    assert run_spans(spans) == []
    assert "checkpoint.save" not in grouped
    [server] = grouped["POST /api/runs"]
    assert server.attributes["error.type"] == "checkpoint_not_found"
    assert server.attributes["http.response.status_code"] == 404
    [load] = grouped["checkpoint.load"]
    assert load.status.status_code is StatusCode.ERROR


async def test_a_stream_that_fails_marks_its_server_span(recording: FunctionHost, spans: InMemorySpanExporter) -> None:
    response = await recording.request("POST", "/api/runs", json_body={"messages": "fail", "stream": True})
    assert [name async for name, _ in response.events()][-1] == "error"
    [server] = by_name(spans)["POST /api/runs"]
    assert server.status.status_code is StatusCode.ERROR
    assert server.attributes["error.type"] == "workflow_failed"
    assert "checkpoint.save" not in by_name(spans)


async def test_logs_are_structured_and_never_carry_message_content(
    host: FunctionHost, caplog: pytest.LogCaptureFixture
) -> None:
    secret_text = "my card number is 4111 1111 1111 1111"
    with caplog.at_level(logging.DEBUG):
        response = await host.request("POST", "/api/threads/t-9/runs", json_body={"messages": secret_text})
        body = await response.json()
    assert all(secret_text not in r.getMessage() and secret_text not in str(r.__dict__) for r in caplog.records)
    saved = [r for r in caplog.records if r.getMessage() == "checkpoint saved"]
    done = [r for r in caplog.records if r.getMessage().startswith("request completed: POST threads/{thread_id}/runs")]
    assert saved[0].checkpoint_id == body["checkpoint_id"]
    assert saved[0].thread_id == "t-9"
    assert saved[0].request_id == done[0].request_id == response.headers["x-request-id"]
    assert done[0].status == 200


def test_azure_monitor_is_configured_only_with_a_connection_string() -> None:
    code = (
        "import sys, function_app\n"
        "from opentelemetry import trace\n"
        "print('azure.monitor.opentelemetry' in sys.modules, type(trace.get_tracer_provider()).__name__)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "APPLICATIONINSIGHTS_CONNECTION_STRING": ""}
    off = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert off.stdout.split() == ["False", "ProxyTracerProvider"]
    env["APPLICATIONINSIGHTS_CONNECTION_STRING"] = (
        "InstrumentationKey=00000000-0000-0000-0000-000000000000;IngestionEndpoint=http://127.0.0.1:9/"
    )
    on = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert on.stdout.split() == ["True", "TracerProvider"]
