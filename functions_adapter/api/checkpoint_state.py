"""A thread checkpoint's state (``GET .../checkpoints/{id}/state``) and a fork from an edit of
it (``POST .../checkpoints/{id}/fork``): the console's debugger, open to any client.

Both pass the thread's gate (``thread_access.gate``, the authorizer) and the owner check of the
thread's other routes. The state is read through the store's restricted codec and answered as
JSON. The edited fork is a thread turn like any fork (``from_checkpoint_id``), built by the one
turn factory, with the edited executor states put in place of the saved ones before the
restore (``resumable.core.checkpoint_state``).
"""

from __future__ import annotations

import dataclasses

from fastapi import Request, Response

from functions_adapter import thread_access
from functions_adapter.body import read_body, require_json, verify_signature
from functions_adapter.callers import caller_of, origin_of
from functions_adapter.http_responses import JSON_MEDIA_TYPE, event_stream, json_response
from functions_adapter.params import json_object
from functions_adapter.request_trace import traced
from functions_adapter.turns import build_turn
from functions_adapter.wiring import build_service, load_settings
from resumable.base import CheckpointNotInThread, InvalidRequest, strict_json, validate_id
from resumable.core.checkpoint_state import parse_edit, state_view
from resumable.core.run_owner import RunOwner

STATE_ROUTE = "threads/{thread_id}/checkpoints/{checkpoint_id}/state"
FORK_ROUTE = "threads/{thread_id}/checkpoints/{checkpoint_id}/fork"
# What an edited fork's body may hold besides the edit: a turn's input and how to answer it.
_TURN_FIELDS = frozenset({"messages", "responses", "stream", "events"})


async def handle_state(request: Request, thread_id: str, checkpoint_id: str) -> Response:
    """Each executor's state and the shared state of one of the thread's checkpoints."""
    return await traced(request, STATE_ROUTE, lambda: _state(request, thread_id, checkpoint_id))


async def _state(request: Request, thread_id: str, checkpoint_id: str) -> Response:
    settings = load_settings()
    await thread_access.gate(request.headers, settings, STATE_ROUTE, thread_id)
    validate_id(checkpoint_id, kind="checkpoint_id")
    service = build_service(settings)
    await thread_access.owned_head(caller_of(request), service, thread_id)
    # Any checkpoint the thread wrote, a replaced branch's too (the console shows those).
    checkpoint, info = await service.store.load_described(checkpoint_id)
    if info.thread_id != thread_id:
        raise CheckpointNotInThread(f"Checkpoint '{checkpoint_id}' is not a checkpoint of thread '{thread_id}'.")
    return json_response({"thread_id": thread_id, **state_view(checkpoint)})


async def handle_fork(request: Request, thread_id: str, checkpoint_id: str) -> Response:
    """A turn forked from ``checkpoint_id`` with ``executor_states`` in place of the saved ones."""
    return await traced(request, FORK_ROUTE, lambda: _fork(request, thread_id, checkpoint_id))


async def _fork(request: Request, thread_id: str, checkpoint_id: str) -> Response:
    settings = load_settings()
    body = await read_body(request, settings.max_request_bytes)
    verify_signature(request.headers, body, settings)
    require_json(request.headers.get("content-type"))
    await thread_access.gate(request.headers, settings, FORK_ROUTE, thread_id)
    validate_id(checkpoint_id, kind="checkpoint_id")
    data = json_object(body)
    unknown = sorted(set(data) - _TURN_FIELDS - {"executor_states"})
    if unknown:
        allowed = sorted(_TURN_FIELDS | {"executor_states"})
        raise InvalidRequest(f"Unknown field(s): {', '.join(unknown)}.", details={"allowed": allowed})
    edit = parse_edit(data.pop("executor_states", None))
    turn_body = strict_json.dumps({**data, "from_checkpoint_id": checkpoint_id})
    service = build_service(settings)
    accept = request.headers.get("accept")
    turn = build_turn(settings, service, turn_body, thread_id=thread_id, origin=origin_of(request), accept=accept)
    owner = RunOwner(turn.runner, dataclasses.replace(turn.request, state_edit=edit))
    if turn.request.stream:
        return event_stream(await owner.stream(keepalive_seconds=settings.sse_keepalive_seconds))
    return Response(await owner.result(), media_type=JSON_MEDIA_TYPE)
