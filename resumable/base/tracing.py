"""OpenTelemetry spans for one request: the server span, and checkpoint load and save.

The request is one trace: a SERVER span per HTTP call (continuing an inbound W3C
``traceparent``), ``checkpoint.load`` and ``checkpoint.save`` beneath it, and the
framework's own workflow run span, which starts while the server span is current.
Spans go to whatever tracer provider is configured (``telemetry.configure``); with
none, they cost next to nothing.

The framework names its run span after its own constant, and that name changed: up to 1.23
``workflow.run``, from 1.26 ``invoke_workflow`` followed by the workflow's name when it has
one. ``is_workflow_run_span`` is how the tests and the demo find it on every supported version.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from agent_framework.observability import OtelAttr
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .version import __version__

tracer = trace.get_tracer("resumable", __version__)
# The installed framework's name for a workflow run's span ("workflow.run" or "invoke_workflow").
WORKFLOW_RUN_SPAN = str(OtelAttr.WORKFLOW_RUN_SPAN.value)
# The span event each run adds when it starts: one per run, on every supported version.
WORKFLOW_STARTED_EVENT = str(OtelAttr.WORKFLOW_STARTED.value)
_request_id: ContextVar[str | None] = ContextVar("request_id", default=None)


def is_workflow_run_span(name: str) -> bool:
    """Whether a span of this name is a workflow run: the framework's constant, alone or
    followed by the workflow's name (1.26 appends it)."""
    return name == WORKFLOW_RUN_SPAN or name.startswith(f"{WORKFLOW_RUN_SPAN} ")


def request_id() -> str | None:
    """The current request's ID (its trace ID when tracing is on), for log records."""
    return _request_id.get()


def new_request_id(span: Span) -> str:
    """Name the request after its trace, so logs and traces join; set it for this context."""
    span_context = span.get_span_context()
    value = format(span_context.trace_id, "032x") if span_context.is_valid else uuid.uuid4().hex
    _request_id.set(value)
    return value


def start_server_span(method: str, route: str, path: str, headers: Mapping[str, str]) -> Span:
    """A SERVER span whose parent is the caller's ``traceparent``, if it sent one."""
    return tracer.start_span(
        f"{method} /api/{route}",
        context=propagate.extract(dict(headers)),
        kind=SpanKind.SERVER,
        attributes={"http.request.method": method, "http.route": f"/api/{route}", "url.path": path},
    )


def end_server_span(span: Span, status: int, error_code: str | None = None) -> None:
    """Close the request: 5xx, or a stream that ended in an ``error`` event, is an error."""
    span.set_attribute("http.response.status_code", status)
    if error_code:
        span.set_attribute("error.type", error_code)
    if status >= 500 or (error_code and status == 200):
        span.set_status(Status(StatusCode.ERROR, error_code))
    span.end()


@contextmanager
def phase(name: str, attributes: dict[str, Any]) -> Iterator[Span]:
    """A child span of whatever is current, for one step (load, save); None values dropped."""
    with tracer.start_as_current_span(name, attributes={k: v for k, v in attributes.items() if v is not None}) as span:
        yield span


@dataclass(frozen=True, slots=True)
class RequestScope:
    """What a stream drained outside its request needs to act as part of it."""

    context: otel_context.Context
    request_id: str | None

    @classmethod
    def capture(cls) -> RequestScope:
        return cls(otel_context.get_current(), _request_id.get())


@contextmanager
def within(scope: RequestScope) -> Iterator[None]:
    """Re-enter a request's scope for a block with no ``yield`` in it (safe in generators)."""
    token = otel_context.attach(scope.context)
    id_token = _request_id.set(scope.request_id)
    try:
        yield
    finally:
        _request_id.reset(id_token)
        otel_context.detach(token)


class Stopwatch:
    def __init__(self) -> None:
        self.started = time.perf_counter()

    @property
    def ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)
