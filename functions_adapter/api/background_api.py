"""Background runs over HTTP and the run queue: parse, authorize and render.

The protocol is the library's: ``resumable.background.accept`` (202 now, or refused exactly as a
synchronous call would be, or a retry's replay), ``resumable.background.control`` (status,
cancel), ``resumable.background`` (execution). Run routes are authorized on the run's
thread, as the thread's own routes are.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request, Response
from fastapi.responses import StreamingResponse

from functions_adapter import callbacks, thread_access
from functions_adapter.authorization import caller_of
from functions_adapter.background_submit import run_control, submit
from functions_adapter.headers import last_event_id as _last_event_id
from functions_adapter.headers import preferences
from functions_adapter.headers import wait_seconds as _wait_seconds
from functions_adapter.http_responses import JSON_MEDIA_TYPE, json_response, render_json
from functions_adapter.settings import Settings
from functions_adapter.sse import KEEPALIVE, MEDIA_TYPE, sse_event
from functions_adapter.turns import Turn
from functions_adapter.wiring import container_for, load_settings
from resumable.background import follow
from resumable.background import records as rr
from resumable.background.accept import Accepted
from resumable.background.events import EventReader, LoggedEvent
from resumable.background.records import RunRecord, RunRecords
from resumable.background.run_access import owned_run
from resumable.core.event_pump import IdleTick
from resumable.storage.record_store import Stored

logger = logging.getLogger(__name__)
_STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _links(run_id: str) -> dict[str, str]:
    base = f"/api/runs/{run_id}"
    return {"self": base, "stream": f"{base}/stream", "cancel": f"{base}/cancel"}


def accepted_response(accepted: Accepted, *, async_preferred: bool) -> Response:
    """A 202 with its links (first or replayed), or a synchronous call's replayed answer."""
    if accepted.status != 202 or accepted.run_id is None:
        return Response(accepted.body, status_code=accepted.status, media_type=JSON_MEDIA_TYPE)
    headers = {"Location": f"/api/runs/{accepted.run_id}", "Retry-After": "1"}
    if async_preferred:
        headers["Preference-Applied"] = "respond-async"
    return Response(accepted.body, status_code=202, media_type=JSON_MEDIA_TYPE, headers=headers)


async def accept(request: Request, body: bytes, turn: Turn, *, settings: Settings, dedupe: Any) -> Response:
    """Queue the run and answer 202, refuse it as a synchronous call would, or replay."""
    thread_id, checkpoint_id = turn.thread_id, turn.request.checkpoint_id

    def render(run_id: str, created_at: float) -> bytes:
        return render_json(
            {
                "run_id": run_id,
                "status": rr.QUEUED,
                "thread_id": thread_id,
                "checkpoint_id": checkpoint_id,
                "created_at": rr.rfc3339(created_at),
                "links": _links(run_id),
            }
        )

    accepted = await submit(
        request, turn, record_body=body, request_body=body, settings=settings, dedupe=dedupe, render=render
    )
    async_preferred = "respond-async" in preferences(request.headers.get("prefer"))
    return accepted_response(accepted, async_preferred=async_preferred)


# -- GET /api/runs/{id}, GET /api/runs/{id}/stream, POST /api/runs/{id}/cancel -------------


async def _authorized(request: Request, settings: Settings, route: str, run_id: str) -> Stored[RunRecord]:
    """The run's record, once the thread authorizer allowed this caller its thread; a run
    of another origin (``authorization.origin_of``) is 403, as its thread is."""
    found = await owned_run(run_control(settings), run_id, caller_of(request))
    if found.value.thread_id is not None:
        await thread_access.gate(request, settings, route, found.value.thread_id)
    return found


async def get_status(request: Request, run_id: str) -> Response:
    """The run's status; ``Prefer: wait=N`` holds the answer until it finishes or N s pass."""
    settings = load_settings()
    found = await _authorized(request, settings, "runs/{run_id}", run_id)
    record = await run_control(settings).wait(found, _wait_seconds(request.headers.get("prefer")))
    headers = None if record.terminal else {"Retry-After": "1"}
    return json_response(await status_json(settings, record), headers=headers)


async def status_json(settings: Settings, record: RunRecord) -> dict[str, Any]:
    """``GET /api/runs/{id}``'s document, with the callback's delivery (if the run has one)."""
    body = record.status_json()
    callback = await callbacks.status_view(container_for(settings), record)
    if callback is not None:
        body["callback"] = callback
    return body


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
