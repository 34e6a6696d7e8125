"""One HTTP request's lifecycle: a SERVER span, a request ID, a guard, one log line."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request, Response
from fastapi.responses import StreamingResponse
from opentelemetry import trace
from opentelemetry.trace import Span

from functions_adapter.http_responses import error_response
from functions_adapter.settings import SettingsError
from functions_adapter.wiring import MISCONFIGURED
from resumable.base import ResumeError, ServerMisconfigured, tracing
from resumable.storage import operation_count

logger = logging.getLogger(__name__)

Handler = Callable[[], Awaitable[Response]]
# Renders a documented error as a response: ours by default; the OpenAI-compatible
# routes render the same errors in OpenAI's shape.
ErrorRenderer = Callable[[ResumeError], Response]


async def guarded(
    what: str, handler: Handler, render_error: ErrorRenderer = error_response
) -> tuple[Response, str | None]:
    """Every handler's last line of defence: documented errors as such, anything else as 500.

    Returns the response and, for an error, its code.
    """
    try:
        return await handler(), None
    except ResumeError as exc:
        error = exc
    except SettingsError as exc:  # raised late, e.g. by a workflow factory reading its settings
        logger.error("Configuration error: %s", exc)
        error = ServerMisconfigured(MISCONFIGURED)
    except Exception:
        logger.exception("Unhandled error in %s", what)
        error = ResumeError("An internal error occurred.")
    return render_error(error), error.code


@dataclass
class RequestTrace:
    """One request's span, ID and clock; ``finish`` ends the span and logs one line."""

    span: Span
    route: str
    request_id: str
    method: str = ""
    started: float = field(default_factory=time.perf_counter)

    def finish(self, status: int, error: str | None) -> None:
        tracing.end_server_span(self.span, status, error)
        duration_ms = round((time.perf_counter() - self.started) * 1000, 1)
        # The text carries what an operator reads first (a plain console shows no extras);
        # the extras are the same facts as fields (Application Insights' custom dimensions).
        logger.info(
            "request completed: %s %s -> %d%s in %.1f ms",
            self.method,
            self.route,
            status,
            f" {error}" if error else "",
            duration_ms,
            extra={
                "request_id": self.request_id,
                "method": self.method,
                "route": self.route,
                "status": status,
                "error_code": error,
                "duration_ms": duration_ms,
            },
        )

    async def finish_after(self, frames: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Pass a stream through; finish when it ends, noting an ``error`` event."""
        error: str | None = None
        try:
            async for frame in frames:
                if isinstance(frame, bytes) and b"event: error\n" in frame:
                    error = json.loads(frame.split(b"\ndata: ", 1)[1])["error"]["code"]
                yield frame
        finally:
            self.finish(200, error)


async def traced(
    request: Request, route: str, handler: Handler, render_error: ErrorRenderer = error_response
) -> Response:
    """Run a handler as one request: a SERVER span, a request ID, one structured log line.

    A streaming response ends its span and logs when the stream ends, not here.
    """
    span = tracing.start_server_span(request.method, route, request.url.path, request.headers)
    with trace.use_span(span, end_on_exit=False), operation_count.counting() as operations:
        record = RequestTrace(span, route, tracing.new_request_id(span), request.method)
        response, error = await guarded(f"{request.method} {route}", handler, render_error)
    _answer_headers(response, record.request_id, operations.total)
    if isinstance(response, StreamingResponse):
        response.body_iterator = record.finish_after(response.body_iterator)
    else:
        record.finish(response.status_code, error)
    return response


async def untraced(handler: Handler) -> Response:
    """Run a handler probes call every few seconds (``/api/health``): no span and no log
    line, but the headers every answer carries (docs/api.md), its own request ID among them."""
    with operation_count.counting() as operations:
        response, _ = await guarded("untraced request", handler)
    _answer_headers(response, uuid.uuid4().hex, operations.total)
    return response


def _answer_headers(response: Response, request_id: str, operations: int) -> None:
    response.headers["x-request-id"] = request_id
    # No answer is ever cached: each one is about data that changes (docs/console.md).
    response.headers.setdefault("cache-control", "no-store")
    if not isinstance(response, StreamingResponse):  # a stream's headers leave before its work
        response.headers["x-storage-operations"] = str(operations)
