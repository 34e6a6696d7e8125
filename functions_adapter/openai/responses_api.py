"""OpenAI Responses-compatible routes: ``/api/responses`` for any OpenAI SDK.

A response is a run. ``POST /api/responses`` is translated (``openai_request``) into the
body the runs routes take and handed to the one turn call (``turn_call.call_turn``), as
every protocol's turn is: the same turn factory, run owner, Idempotency-Key claim and
background accept as ``POST /api/runs`` (the signature is checked here, at the edge);
``previous_response_id`` resumes from that response's checkpoint (a fork, nothing
moves), ``conversation`` is a turn on that thread (its head moved by CAS). Its ID is
``resp_<run_id>``: a background response's run record, or (``store``, the default) a
synchronous one's, written once it committed. The shapes are in ``openai_objects``, the
stream in ``openai_events``; errors are rendered in OpenAI's shape.
"""

from __future__ import annotations

import json
import logging
import time

from fastapi import Request, Response

from functions_adapter import background_submit, keyed_call, thread_access
from functions_adapter.body import fingerprint_of, read_body, require_json, verify_signature
from functions_adapter.callers import caller_of, origin_of
from functions_adapter.http_responses import JSON_MEDIA_TYPE, json_response, render_json
from functions_adapter.openai.events import ResponseEvents, logged_run, run_frames
from functions_adapter.openai.objects import (
    STATUS,
    ResponseInProgress,
    ResponseNotFound,
    from_record,
    input_items,
    is_response,
    items_page,
    openai_error,
    response_id,
    run_id_of,
    skeleton,
    with_param,
)
from functions_adapter.openai.request import CreateRequest, bad, parse_create
from functions_adapter.openai.response_records import PendingRecord, resolved
from functions_adapter.openai.sync import ResponseCommit, event_stream, live_frames, replayed
from functions_adapter.params import one_of, whole_number
from functions_adapter.request_trace import traced
from functions_adapter.settings import Settings
from functions_adapter.turn_call import Queued, Replayed, TurnCall, call_turn
from functions_adapter.turns import Turn
from functions_adapter.wiring import build_service, container_for, hosts, load_settings
from resumable.background import Accepted, EventReader, RunRecord, RunRecords, delete_finished_run, owned_record
from resumable.background import records as rr
from resumable.base import InvalidRequest
from resumable.core.held_claim import HeldClaim
from resumable.storage.record_store import Stored
from resumable.threads import Caller

logger = logging.getLogger(__name__)
# How long a cancel waits for a running response to stop, so the answer says "cancelled".
CANCEL_WAIT_SECONDS = 5.0
MAX_PAGE, DEFAULT_PAGE = 100, 20
MAX_SEQUENCE = 2**53  # a stream's sequence numbers (JSON's exact integers)


async def handle_create(request: Request) -> Response:
    return await traced(request, "responses", lambda: _create(request), openai_error)


async def handle_get(request: Request, response_id: str) -> Response:
    return await traced(request, "responses/{response_id}", lambda: _get(request, response_id), openai_error)


async def handle_cancel(request: Request, response_id: str) -> Response:
    return await traced(request, "responses/{response_id}/cancel", lambda: _cancel(request, response_id), openai_error)


async def handle_delete(request: Request, response_id: str) -> Response:
    return await traced(request, "responses/{response_id}", lambda: _delete(request, response_id), openai_error)


async def handle_input_items(request: Request, response_id: str) -> Response:
    route = "responses/{response_id}/input_items"
    return await traced(request, route, lambda: _input_items(request, response_id), openai_error)


# -- POST /api/responses ------------------------------------------------------------------


async def _create(request: Request) -> Response:
    """Parse the OpenAI body at the edge, then hand the turn, as plain values, to ``call_turn``."""
    settings = load_settings()
    body = await read_body(request, settings.max_request_bytes)
    verify_signature(request.headers, body, settings)
    require_json(request.headers.get("content-type"))
    parsed = parse_create(body, model=settings.workflow, limits=settings.limits, hosted=hosts(settings))
    if parsed.conversation is not None:  # before the previous response is read
        await thread_access.gate(request.headers, settings, "responses", parsed.conversation)
    runs_body = parsed.runs_body(await _continued_from(request, settings, parsed))
    origin = origin_of(request)
    run_id, created_at = rr.new_run_id(), time.time()
    base = _base(parsed, run_id, created_at)

    def claim_for(turn: Turn, key_claim: HeldClaim | None) -> ResponseCommit:
        """Render and store the response at the commit point, around the key's claim."""
        record = RunRecord(
            run_id=run_id,
            body=runs_body,
            fingerprint=fingerprint,
            accepted=render_json(base),
            created_at=created_at,
            thread_id=turn.thread_id,
            checkpoint_id=turn.request.checkpoint_id,
            origin=turn.request.origin,
        )
        pending = PendingRecord(RunRecords(container_for(settings)), record) if parsed.store else None
        return ResponseCommit(base, key_claim, pending)

    fingerprint = fingerprint_of(request, body)  # of the bytes the caller sent, not the runs body
    call = TurnCall(
        thread_id=parsed.conversation,
        origin=origin,
        body=runs_body,
        route="responses",
        authorizer_headers=None,  # gated above
        dedupe=keyed_call.dedupe_key(request.headers, origin, settings, always_key=True),
        fingerprint=fingerprint,
        async_preferred=parsed.background,  # the runs body carries no background flag
        render_accepted=lambda run_id, created_at: render_json(_base(parsed, run_id, created_at)),
        claim_for=claim_for,
    )
    outcome = await call_turn(call, settings)
    if isinstance(outcome, Replayed):
        return replayed(outcome.stored, stream=parsed.stream)
    if isinstance(outcome, Queued):
        return await _queued(request, settings, parsed, outcome.accepted)
    commit = outcome.claim
    assert isinstance(commit, ResponseCommit)
    if outcome.events is not None:
        return event_stream(live_frames(ResponseEvents(base), outcome.events, commit, base))
    return Response(commit.final, media_type=JSON_MEDIA_TYPE)  # a failure after the commit point is resolved there


async def _continued_from(request: Request, settings: Settings, parsed: CreateRequest) -> str | None:
    """The checkpoint ``previous_response_id`` saved (404 if no such response)."""
    if parsed.previous_run_id is None:
        return None
    caller = caller_of(request)
    record = (await _response(settings, parsed.previous_run_id, caller, param="previous_response_id")).value
    if record.thread_id is not None:
        await thread_access.gate(request.headers, settings, "responses", record.thread_id)
    if not record.terminal:
        error = ResponseInProgress("The previous response has not finished; continue from it once it completed.")
        raise with_param(error, "previous_response_id")
    if record.status != rr.SUCCEEDED or record.result is None:
        why = f"The previous response is {STATUS[record.status]}: it saved nothing to continue from."
        raise bad(why, "previous_response_id")
    return str(json.loads(record.result)["checkpoint_id"])


def _base(parsed: CreateRequest, run_id: str, created_at: float) -> dict[str, object]:
    return skeleton(
        run_id=run_id,
        created_at=created_at,
        model=parsed.model,
        background=parsed.background,
        previous_response_id=parsed.previous_response_id,
        conversation=parsed.conversation,
        metadata=parsed.metadata,
    )


async def _queued(request: Request, settings: Settings, parsed: CreateRequest, accepted: Accepted) -> Response:
    """A background accept (as ``/api/runs``'s): the queued response, or its stream."""
    if accepted.run_id is None:  # the key's earlier synchronous answer
        return Response(accepted.body, status_code=accepted.status, media_type=JSON_MEDIA_TYPE)
    if parsed.stream:
        return _follow(settings, (await _response(settings, accepted.run_id, caller_of(request))).value, after=-1)
    return Response(accepted.body, media_type=JSON_MEDIA_TYPE)


# -- the other routes --------------------------------------------------------------------


async def _response(settings: Settings, run_id: str, caller: Caller, *, param: str | None = None) -> Stored[RunRecord]:
    """The response's record, if ``caller`` made it (else 403 before anything is settled or
    shown); one whose commit was never settled is settled first."""
    records = RunRecords(container_for(settings))
    found = await owned_record(records, run_id, caller)
    if found is not None and is_response(found.value):
        found = await resolved(records, build_service(settings), found)
    if found is None or not is_response(found.value):
        error = ResponseNotFound(f"No response has the ID '{response_id(run_id)}'.")
        raise error if param is None else with_param(error, param)
    return found


async def _authorized(request: Request, settings: Settings, route: str, response_id: str) -> Stored[RunRecord]:
    """The response's record, once its origin (``run_access.owned_record``) and the thread
    authorizer allowed this caller its conversation."""
    found = await _response(settings, run_id_of(response_id), caller_of(request))
    if found.value.thread_id is not None:
        await thread_access.gate(request.headers, settings, route, found.value.thread_id)
    return found


def _follow(settings: Settings, record: RunRecord, *, after: int) -> Response:
    """The response's events from its run's log (numbered from the start), then live."""
    container = container_for(settings)
    reader = EventReader(container, record.run_id)
    source = logged_run(RunRecords(container), reader, record, settings.sse_keepalive_seconds)
    return event_stream(run_frames(ResponseEvents(json.loads(record.accepted)), source), after=after)


async def _get(request: Request, response_id: str) -> Response:
    """The response; with ``?stream=true``, its events after ``starting_after``, then live."""
    settings, query = load_settings(), request.query_params
    stream = one_of(query.get("stream"), "stream", ("true", "false"), default="false") == "true"
    after = whole_number(query.get("starting_after"), "starting_after", low=0, high=MAX_SEQUENCE, default=-1)
    found = await _authorized(request, settings, "responses/{response_id}", response_id)
    if stream:
        return _follow(settings, found.value, after=after)
    return json_response(from_record(found.value))


async def _cancel(request: Request, response_id: str) -> Response:
    """Stop a background response (idempotent); waits briefly for a running one to stop."""
    settings = load_settings()
    found = await _authorized(request, settings, "responses/{response_id}/cancel", response_id)
    if not json.loads(found.value.accepted).get("background"):
        raise InvalidRequest("Only a background response can be cancelled; this one ran synchronously.")
    control = background_submit.run_control(settings)
    record = await control.cancel(found)
    record = await control.wait(Stored(record, ""), CANCEL_WAIT_SECONDS)
    return json_response(from_record(record))


async def _delete(request: Request, response_id: str) -> Response:
    """Delete a finished response (its record and event logs); its checkpoint stays."""
    settings = load_settings()
    found = await _authorized(request, settings, "responses/{response_id}", response_id)
    if not await delete_finished_run(container_for(settings), found):
        raise ResponseInProgress("The response is still running: cancel it first, then delete it.")
    return json_response({"id": response_id, "object": "response", "deleted": True})


async def _input_items(request: Request, response_id: str) -> Response:
    """What the response was created with, a page at a time (``order``, ``after``, ``limit``)."""
    settings, query = load_settings(), request.query_params
    limit = whole_number(query.get("limit"), "limit", low=1, high=MAX_PAGE, default=DEFAULT_PAGE)
    order = one_of(query.get("order"), "order", ("asc", "desc"), default="desc")
    found = await _authorized(request, settings, "responses/{response_id}/input_items", response_id)
    return json_response(items_page(input_items(found.value), order=order, after=query.get("after"), limit=limit))
