"""Background runs over HTTP and the run queue: parse, authorize and render.

The protocol is the library's: ``resumable.background.accept`` (202 now, or refused exactly as a
synchronous call would be, or a retry's replay), ``resumable.background.control`` (status,
cancel), ``resumable.background`` (execution). Run routes are authorized on the run's
thread, as the thread's own routes are.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from fastapi import Request, Response
from fastapi.responses import StreamingResponse

from functions_adapter.background_submit import authorized_run, run_control, status_json
from functions_adapter.callers import caller_of
from functions_adapter.headers import last_event_id as _last_event_id
from functions_adapter.headers import wait_seconds as _wait_seconds
from functions_adapter.http_responses import json_response
from functions_adapter.settings import Settings
from functions_adapter.sse import KEEPALIVE, MEDIA_TYPE, sse_event
from functions_adapter.wiring import container_for, load_settings
from resumable.background import EventReader, LoggedEvent, RunRecord, RunRecords
from resumable.background.follow import follow
from resumable.core.event_pump import IdleTick
from resumable.storage.record_store import Stored

logger = logging.getLogger(__name__)
_STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


# -- GET /api/runs/{id}, GET /api/runs/{id}/stream, POST /api/runs/{id}/cancel -------------


async def _authorized(request: Request, settings: Settings, route: str, run_id: str) -> Stored[RunRecord]:
    return await authorized_run(settings, run_id, caller_of(request), request.headers, route)


async def get_status(request: Request, run_id: str) -> Response:
    """The run's status; ``Prefer: wait=N`` holds the answer until it finishes or N s pass."""
    settings = load_settings()
    found = await _authorized(request, settings, "runs/{run_id}", run_id)
    record = await run_control(settings).wait(found, _wait_seconds(request.headers.get("prefer")))
    headers = None if record.terminal else {"Retry-After": "1"}
    return json_response(await status_json(settings, record), headers=headers)


async def cancel(request: Request, run_id: str) -> Response:
    """Cancel: a queued run never starts; a running one is stopped by its watcher."""
    settings = load_settings()
    found = await _authorized(request, settings, "runs/{run_id}/cancel", run_id)
    return json_response(await status_json(settings, await run_control(settings).cancel(found)))


async def join(request: Request, run_id: str) -> Response:
    """SSE: the run's events from the start (or after ``Last-Event-ID``), then live."""
    settings = load_settings()
    await _authorized(request, settings, "runs/{run_id}/stream", run_id)
    container = container_for(settings)
    events = follow(
        RunRecords(container),
        EventReader(container, run_id),
        run_id,
        _last_event_id(request.headers.get("last-event-id")),
        idle_seconds=settings.sse_keepalive_seconds,
    )
    return StreamingResponse(_frames(events), media_type=MEDIA_TYPE, headers=_STREAM_HEADERS)


async def _frames(events: AsyncIterator[LoggedEvent | IdleTick]) -> AsyncIterator[bytes]:
    async for item in events:
        yield KEEPALIVE if isinstance(item, IdleTick) else sse_event(item.name, item.data, event_id=item.event_id)
