"""HTTP handlers: request in, response out. ``function_app`` only routes to these.

Handlers take and return Starlette (FastAPI) objects because the Functions HTTP
streaming extension, which live SSE needs, uses them for every HTTP trigger.

Order of checks on a POST, cheapest and least revealing first: body size →
webhook signature → body shape → idempotency record → checkpoint → run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import Request, Response

from . import __version__, webhook_signature
from .af_internals import AGENT_FRAMEWORK_VERSION
from .composition import build_service, load_settings
from .errors import InvalidRequest, PayloadTooLarge, ThreadNotFound
from .http_lifecycle import traced
from .http_responses import JSON_MEDIA_TYPE, event_stream, json_response, render_json, replay
from .idempotency import Claim, IdempotencyStore, StoredResponse, fingerprint
from .ids import validate_id
from .run_request import RunRequest, parse_run_request
from .run_service import Event, Runner
from .thread_runs import ThreadRunner
from .threads import live_head


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refusing (413) anything over ``limit`` without reading it all."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise InvalidRequest("Content-Length must be a whole number.")
        if int(declared) > limit:
            raise PayloadTooLarge(f"The body is over the {limit}-byte limit.")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"The body is over the {limit}-byte limit.")
        chunks.append(chunk)
    return b"".join(chunks)


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
    if settings.webhook_secrets:
        webhook_signature.verify(
            request.headers, body, settings.webhook_secrets, tolerance_seconds=settings.webhook_tolerance_seconds
        )
    if thread_id is not None:
        validate_id(thread_id, kind="thread_id")
    run_request = parse_run_request(
        body, accept=request.headers.get("accept"), limits=settings.limits, thread=thread_id is not None
    )
    service = build_service(settings)
    runner: Runner = (
        service
        if thread_id is None
        else ThreadRunner(service, thread_id, lock_wait_seconds=settings.thread_lock_wait_seconds)
    )

    key = request.headers.get("idempotency-key")
    if key is None:
        return await _execute(runner, run_request)
    store = IdempotencyStore(service.store.container, ttl_seconds=settings.idempotency_ttl_seconds)
    begun = await store.begin(key, fingerprint(request.method, request.url.path, body))
    if isinstance(begun, StoredResponse):
        return replay(begun, stream=run_request.stream)
    return await _execute_once(runner, run_request, store, begun)


async def _execute(runner: Runner, request: RunRequest) -> Response:
    if request.stream:
        return event_stream(await runner.open_stream(request))
    return json_response(await runner.run_to_json(request))


async def _execute_once(runner: Runner, request: RunRequest, store: IdempotencyStore, claim: Claim) -> Response:
    """Run while holding the key: store a success, release the key on any error.

    Errors are not stored, so a rejected request leaves nothing behind and a retry is
    judged afresh (the checkpoint may exist by then, the storage may be back).
    """
    try:
        if not request.stream:
            body = render_json(await runner.run_to_json(request))
            await store.complete(claim, 200, body)
            return Response(body, media_type=JSON_MEDIA_TYPE)
        events = await runner.open_stream(request)
    except BaseException:
        await store.release(claim)
        raise
    return event_stream(_recorded(events, store, claim))


async def _recorded(events: AsyncIterator[Event], store: IdempotencyStore, claim: Claim) -> AsyncIterator[Event]:
    """Pass events through; store the ``done`` payload, release the key on anything else."""
    stored = False
    try:
        async for name, data in events:
            if name == "done":
                await store.complete(claim, 200, render_json(data))
                stored = True
            yield name, data
    finally:
        if not stored:
            await store.release(claim)


# -- GET routes ---------------------------------------------------------------------------


async def handle_get_checkpoint(request: Request, checkpoint_id: str) -> Response:
    """``GET /api/checkpoints/{id}``: metadata from blob properties; the state is not read."""

    async def get() -> Response:
        validate_id(checkpoint_id)
        info = await build_service(load_settings()).store.get_info(checkpoint_id)
        return json_response(info.to_json())

    return await traced(request, "checkpoints/{checkpoint_id}", get)


async def handle_get_thread(request: Request, thread_id: str) -> Response:
    """``GET /api/threads/{id}``: the pointer and its recent lineage."""

    async def get() -> Response:
        service = build_service(load_settings())
        head = await live_head(service.pointers, service.store, validate_id(thread_id, kind="thread_id"))
        if head is None:
            raise ThreadNotFound(f"Thread '{thread_id}' has no turns yet.")
        return json_response(head.to_json())

    return await traced(request, "threads/{thread_id}", get)


async def handle_health() -> Response:
    """``GET /api/health``: liveness and versions; touches no storage."""
    return json_response({"status": "ok", "version": __version__, "agent_framework": AGENT_FRAMEWORK_VERSION})
