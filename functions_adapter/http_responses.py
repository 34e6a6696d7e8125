"""Response bodies: exact JSON bytes, documented errors, SSE streams, idempotent replays."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Response
from fastapi.responses import StreamingResponse

from functions_adapter.sse import KEEPALIVE, MEDIA_TYPE, sse_event
from functions_adapter.status_map import headers_of, status_of
from resumable.base import ResumeError, strict_json
from resumable.core.event_pump import IdleTick
from resumable.core.idempotency import StoredResponse
from resumable.core.runs import Event

JSON_MEDIA_TYPE = "application/json"
_STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def render_json(body: dict[str, Any]) -> bytes:
    """The exact bytes sent, so an idempotent replay can send them again (strict JSON)."""
    return strict_json.dumps(body)


def json_response(body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(render_json(body), status_code=status, media_type=JSON_MEDIA_TYPE, headers=headers)


def error_response(error: ResumeError) -> Response:
    return json_response(error.to_body(), status_of(error), headers_of(error))


def event_stream(events: AsyncIterator[Event | IdleTick]) -> StreamingResponse:
    """Server-sent events, flushed as they come (no proxy buffering).

    Each event has an ``id:`` (1, 2, ...) so later work can resume a stream; each
    ``IdleTick`` (the run was silent for a while) becomes a keep-alive comment line.
    """

    async def frames() -> AsyncIterator[bytes]:
        sequence = 0
        async for item in events:
            if isinstance(item, IdleTick):
                yield KEEPALIVE
                continue
            sequence += 1
            name, data = item
            yield sse_event(name, data, event_id=sequence)

    return StreamingResponse(frames(), media_type=MEDIA_TYPE, headers=_STREAM_HEADERS)


def replay(stored: StoredResponse, *, stream: bool) -> Response:
    """The first response again: the same bytes, or its body as a one-event stream."""
    if not stream:
        return Response(stored.body, status_code=stored.status, media_type=JSON_MEDIA_TYPE)

    async def done() -> AsyncIterator[Event]:
        yield "done", json.loads(stored.body)

    return event_stream(done())
