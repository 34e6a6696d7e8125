"""HTTP handlers: request in, response out. ``function_app`` only routes to these.

Handlers take and return Starlette (FastAPI) objects because the Functions HTTP
streaming extension, which live SSE needs, uses them for every HTTP trigger.

Order of checks on a POST, cheapest and least revealing first: body size →
webhook signature → media type here, then the turn call's (``turn_call``): authorizer →
body shape → idempotency record → checkpoint → run.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response

from functions_adapter import keyed_call, thread_access
from functions_adapter.api import thread_api
from functions_adapter.body import fingerprint_of, read_body, require_json, verify_signature
from functions_adapter.callers import caller_of, origin_of
from functions_adapter.headers import preferences
from functions_adapter.http_responses import json_response
from functions_adapter.request_trace import traced
from functions_adapter.turn_call import TurnCall, call_turn
from functions_adapter.turn_response import render_outcome
from functions_adapter.wiring import build_service, load_settings
from resumable.base import validate_id
from resumable.threads import checkpoint_info

# -- POST /api/runs and POST /api/threads/{thread_id}/runs -------------------------------


async def handle_run(request: Request) -> Response:
    """``POST /api/runs``: HTTP → parse → load → resume → save → respond."""
    return await traced(request, "runs", lambda: _post_run(request, thread_id=None))


async def handle_thread_run(request: Request, thread_id: str) -> Response:
    """``POST /api/threads/{thread_id}/runs``: the same, resuming from the thread's head."""
    return await traced(request, "threads/{thread_id}/runs", lambda: _post_run(request, thread_id=thread_id))


async def _post_run(request: Request, *, thread_id: str | None) -> Response:
    settings = load_settings()
    body = await read_body(request, settings.max_request_bytes)
    verify_signature(request.headers, body, settings)
    require_json(request.headers.get("content-type"))
    origin = origin_of(request)
    call = TurnCall(
        thread_id=thread_id,
        origin=origin,
        body=body,
        route="threads/{thread_id}/runs",
        authorizer_headers=request.headers,
        dedupe=keyed_call.dedupe_key(request.headers, origin, settings),
        fingerprint=fingerprint_of(request, body),
        accept=request.headers.get("accept"),
        async_preferred="respond-async" in preferences(request.headers.get("prefer")),
    )
    return render_outcome(await call_turn(call, settings), async_preferred=call.async_preferred)


def _background() -> Any:
    """The background-run routes' module, imported on first use (cold start: the synchronous
    path never loads the run records, the event log or the queue client)."""
    from functions_adapter.api import background_api  # noqa: PLC0415

    return background_api


# -- GET routes ---------------------------------------------------------------------------


async def handle_get_checkpoint(request: Request, checkpoint_id: str) -> Response:
    """``GET /api/checkpoints/{id}``: metadata from blob properties; the state is not read.
    A thread's checkpoint answers its thread's origin only (``ownership.checkpoint_info``)."""

    async def get() -> Response:
        validate_id(checkpoint_id)
        settings = load_settings()
        service = build_service(settings)
        info = await checkpoint_info(service.pointers, service.store, checkpoint_id, caller_of(request))
        if info.thread_id is not None:  # its thread's authorizer decides too, as on the thread's routes
            await thread_access.gate(request.headers, settings, "checkpoints/{checkpoint_id}", info.thread_id)
        return json_response(info.to_json())

    return await traced(request, "checkpoints/{checkpoint_id}", get)


async def handle_get_thread(request: Request, thread_id: str) -> Response:
    """``GET /api/threads/{id}``: the pointer, its recent lineage and its metadata."""
    return await traced(request, "threads/{thread_id}", lambda: thread_api.get_thread(request, thread_id))


async def handle_thread_history(request: Request, thread_id: str) -> Response:
    """``GET /api/threads/{id}/history``: the lineage, newest first, a page at a time."""
    return await traced(request, "threads/{thread_id}/history", lambda: thread_api.get_history(request, thread_id))


async def handle_delete_thread(request: Request, thread_id: str) -> Response:
    """``DELETE /api/threads/{id}``: the pointer, every checkpoint and every record of the thread."""
    return await traced(request, "threads/{thread_id}", lambda: thread_api.delete(request, thread_id))


async def handle_put_thread_metadata(request: Request, thread_id: str) -> Response:
    """``PUT /api/threads/{id}/metadata``: a small JSON object of strings, ``If-Match`` honoured."""

    async def put() -> Response:
        body = await read_body(request, load_settings().max_request_bytes)
        require_json(request.headers.get("content-type"))
        return await thread_api.put_metadata(request, thread_id, body)

    return await traced(request, "threads/{thread_id}/metadata", put)


async def handle_get_run(request: Request, run_id: str) -> Response:
    """``GET /api/runs/{id}``: a background run's status (long-polls with ``Prefer: wait=N``)."""
    return await traced(request, "runs/{run_id}", lambda: _background().get_status(request, run_id))


async def handle_join_run(request: Request, run_id: str) -> Response:
    """``GET /api/runs/{id}/stream``: a background run's events, from the start or ``Last-Event-ID``."""
    return await traced(request, "runs/{run_id}/stream", lambda: _background().join(request, run_id))


async def handle_cancel_run(request: Request, run_id: str) -> Response:
    """``POST /api/runs/{id}/cancel``: stop a queued or running background run."""
    return await traced(request, "runs/{run_id}/cancel", lambda: _background().cancel(request, run_id))
