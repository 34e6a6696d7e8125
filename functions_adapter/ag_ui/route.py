"""``POST /api/ag-ui``: parse (400 before any event), then always an AG-UI event stream.

Once the body is a ``RunAgentInput``, every answer is ``RUN_STARTED`` … then
``RUN_FINISHED`` or ``RUN_ERROR`` with our error code (a busy thread, a refused caller,
input the turn refuses), except a storage outage or a server fault before the first event:
those keep their HTTP status (503 with ``Retry-After``, 500), as on every route. The turn is
opened here, in the request, through the one turn call (``turn_call.call_turn``), as the
runs routes open theirs: its owner then drains it whatever the client does. A run
with nothing new answers the thread's history (``MESSAGES_SNAPSHOT``) and runs nothing.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator

from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder
from fastapi import Request, Response
from fastapi.responses import StreamingResponse

from functions_adapter import thread_access
from functions_adapter.ag_ui import events
from functions_adapter.ag_ui.history import thread_history
from functions_adapter.ag_ui.input import AgUiRun, parse_input
from functions_adapter.body import read_body, require_json, verify_signature
from functions_adapter.callers import caller_of, origin_of
from functions_adapter.request_trace import traced
from functions_adapter.settings import Settings
from functions_adapter.sse import KEEPALIVE, MEDIA_TYPE
from functions_adapter.status_map import status_of
from functions_adapter.turn_call import Ran, TurnCall, call_turn
from functions_adapter.wiring import load_settings
from resumable.base import NoNewMessages, ResumeError
from resumable.core.event_pump import IdleTick
from resumable.threads import Caller

logger = logging.getLogger(__name__)
ROUTE = "ag-ui"
_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
Source = AsyncIterator[BaseEvent | IdleTick]


async def handle_run(request: Request) -> Response:
    return await traced(request, ROUTE, lambda: _run(request))


async def _run(request: Request) -> Response:
    settings = load_settings()
    body = await read_body(request, settings.max_request_bytes)
    verify_signature(request.headers, body, settings)
    require_json(request.headers.get("content-type"))
    run = parse_input(body, settings.limits)
    try:
        source = await _open(request, settings, run)
    except ResumeError as exc:
        if status_of(exc) >= 500:  # an outage or ours, not the run's: 503 with Retry-After, or 500
            raise
        source = _one(events.failed(exc))
    return StreamingResponse(_frames(run, source), media_type=MEDIA_TYPE, headers=_HEADERS)


async def _open(request: Request, settings: Settings, run: AgUiRun) -> Source:
    """The run's events after ``RUN_STARTED``; a refusal raises (``RUN_ERROR``)."""
    if not run.candidates and not run.answers:  # a reload, or every interrupt cancelled
        await thread_access.gate(request.headers, settings, ROUTE, run.thread_id)
        return await _history(settings, run, caller_of(request))
    checkpoint_id = str(uuid.uuid4())  # chosen now, so the reply's message IDs are known now
    call = TurnCall(
        thread_id=run.thread_id,
        origin=origin_of(request),
        body=run.runs_body(),
        route=ROUTE,
        authorizer_headers=request.headers,
        checkpoint_id=checkpoint_id,
        resent=run.candidates,
    )
    try:
        outcome = await call_turn(call, settings)
    except NoNewMessages:
        return await _history(settings, run, caller_of(request))
    if not isinstance(outcome, Ran) or outcome.events is None:  # unkeyed and streamed: always a run
        raise ResumeError("The turn did not stream.")
    applied = 0 if run.answers else len(run.candidates)
    return events.ReplyStream(run.thread_id, run.run_id, checkpoint_id, applied).events(outcome.events)


async def _history(settings: Settings, run: AgUiRun, caller: Caller) -> Source:
    messages, pending = await thread_history(settings, run.thread_id, caller)

    async def replay() -> Source:
        yield events.snapshot(messages)
        yield events.finished(run.thread_id, run.run_id, pending)

    return replay()


async def _one(event: BaseEvent) -> Source:
    yield event


async def _frames(run: AgUiRun, source: Source) -> AsyncIterator[bytes]:
    encoder = EventEncoder()
    yield encoder.encode(events.started(run.thread_id, run.run_id)).encode()
    try:
        async for item in source:
            yield KEEPALIVE if isinstance(item, IdleTick) else encoder.encode(item).encode()
    except ResumeError as exc:
        yield encoder.encode(events.failed(exc)).encode()
    except Exception:
        logger.exception("AG-UI stream failed")
        yield encoder.encode(events.failed(ResumeError("An internal error occurred."))).encode()
