"""HTTP handlers: request in, response out. ``function_app`` only routes to these.

Handlers take and return Starlette (FastAPI) objects because the Functions HTTP
streaming extension, which live SSE needs, uses them for every HTTP trigger.

Order of checks on a POST, cheapest and least revealing first: body size →
webhook signature → body shape → idempotency record → checkpoint → run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from fastapi import Request, Response
from fastapi.responses import StreamingResponse
from opentelemetry import trace
from opentelemetry.trace import Span

from . import __version__, tracing, webhook_signature
from .af_internals import AGENT_FRAMEWORK_VERSION
from .blob_store import BlobCheckpointStorage
from .checkpoint_codec import CheckpointCodec
from .errors import InvalidRequest, PayloadTooLarge, ResumeError
from .idempotency import Claim, IdempotencyStore, StoredResponse, fingerprint
from .ids import validate_id
from .run_request import RunRequest, parse_run_request
from .run_service import Event, RunService
from .settings import Settings, SettingsError
from .sse import MEDIA_TYPE, sse_event
from .storage_client import container_client
from .thread_runs import ThreadRunner
from .threads import ThreadPointers

logger = logging.getLogger(__name__)
JSON_MEDIA_TYPE = "application/json"
_STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class ServerMisconfigured(ResumeError):
    status = 500
    code = "server_misconfigured"


class ThreadNotFound(ResumeError):
    status = 404
    code = "thread_not_found"


@lru_cache(maxsize=8)
def _spec(name: str) -> Any:
    from workflows import load_spec  # noqa: PLC0415 - workflows are an app concern, loaded on demand

    try:
        return load_spec(name)
    except (KeyError, TypeError) as exc:
        raise SettingsError(str(exc)) from exc


def build_service(settings: Settings) -> RunService:
    """The service for the current settings; its storage client is shared per process."""
    spec = _spec(settings.workflow)
    codec = CheckpointCodec(
        allowed_types=(*settings.allowed_types, *spec.allowed_type_keys),
        max_bytes=settings.max_checkpoint_bytes,
    )
    container = container_client(settings)
    return RunService(BlobCheckpointStorage(container, codec), spec, ThreadPointers(container))


def render_json(body: dict[str, Any]) -> bytes:
    """The exact bytes sent, so an idempotent replay can send them again."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def json_response(body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(render_json(body), status_code=status, media_type=JSON_MEDIA_TYPE, headers=headers)


def error_response(error: ResumeError) -> Response:
    return json_response(error.to_body(), error.status, error.headers())


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except SettingsError as exc:
        logger.error("Configuration error: %s", exc)
        raise ServerMisconfigured("The function app is not configured correctly; see its logs.") from exc


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


async def _guarded(what: str, handler: Callable[[], Awaitable[Response]]) -> tuple[Response, str | None]:
    """Every handler's last line of defence: documented errors as such, anything else as 500.

    Returns the response and, for an error, its code.
    """
    try:
        return await handler(), None
    except ResumeError as exc:
        error = exc
    except SettingsError as exc:  # raised late, e.g. by a workflow factory reading its settings
        logger.error("Configuration error: %s", exc)
        error = ServerMisconfigured("The function app is not configured correctly; see its logs.")
    except Exception:
        logger.exception("Unhandled error in %s", what)
        error = ResumeError("An internal error occurred.")
    return error_response(error), error.code


@dataclass
class _RequestTrace:
    """One request's span, ID and clock; ``finish`` ends the span and logs one line."""

    span: Span
    route: str
    request_id: str
    started: float = field(default_factory=time.perf_counter)

    def finish(self, status: int, error: str | None) -> None:
        tracing.end_server_span(self.span, status, error)
        logger.info(
            "request completed",
            extra={
                "request_id": self.request_id,
                "route": self.route,
                "status": status,
                "error_code": error,
                "duration_ms": round((time.perf_counter() - self.started) * 1000, 1),
            },
        )

    async def finish_after(self, frames: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Pass a stream through; finish when it ends, noting an ``error`` event."""
        error: str | None = None
        try:
            async for frame in frames:
                if isinstance(frame, bytes) and frame.startswith(b"event: error\n"):
                    error = json.loads(frame.split(b"data: ", 1)[1])["error"]["code"]
                yield frame
        finally:
            self.finish(200, error)


async def _traced(request: Request, route: str, handler: Callable[[], Awaitable[Response]]) -> Response:
    """Run a handler as one request: a SERVER span, a request ID, one structured log line.

    A streaming response ends its span and logs when the stream ends, not here.
    """
    span = tracing.start_server_span(request.method, route, request.url.path, request.headers)
    with trace.use_span(span, end_on_exit=False):
        record = _RequestTrace(span, route, tracing.new_request_id(span))
        response, error = await _guarded(f"{request.method} {route}", handler)
    response.headers["x-request-id"] = record.request_id
    if isinstance(response, StreamingResponse):
        response.body_iterator = record.finish_after(response.body_iterator)
    else:
        record.finish(response.status_code, error)
    return response


# -- POST /api/runs and POST /api/threads/{thread_id}/runs -------------------------------


async def handle_run(request: Request) -> Response:
    """``POST /api/runs``: HTTP → parse → load → resume → save → respond."""
    return await _traced(request, "runs", lambda: _post_run(request, thread_id=None))


async def handle_thread_run(request: Request, thread_id: str) -> Response:
    """``POST /api/threads/{thread_id}/runs``: the same, resuming from the thread's head."""
    return await _traced(request, "threads/{thread_id}/runs", lambda: _post_run(request, thread_id=thread_id))


async def _post_run(request: Request, *, thread_id: str | None) -> Response:
    settings = _settings()
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

    key = request.headers.get("idempotency-key")
    if key is None:
        return await _execute(service, run_request, thread_id)
    store = IdempotencyStore(service.store.container, ttl_seconds=settings.idempotency_ttl_seconds)
    begun = await store.begin(key, fingerprint(request.method, request.url.path, body))
    if isinstance(begun, StoredResponse):
        return _replay(begun, stream=run_request.stream)
    return await _execute_once(service, run_request, thread_id, store, begun)


async def _execute(service: RunService, request: RunRequest, thread_id: str | None) -> Response:
    if request.stream:
        return _event_stream(await _open_stream(service, request, thread_id))
    return json_response(await _run_to_json(service, request, thread_id))


async def _run_to_json(service: RunService, request: RunRequest, thread_id: str | None) -> dict[str, Any]:
    if thread_id is None:
        return await service.run_to_json(request)
    return await ThreadRunner(service).run_to_json(thread_id, request)


async def _open_stream(service: RunService, request: RunRequest, thread_id: str | None) -> AsyncIterator[Event]:
    if thread_id is None:
        return await service.open_stream(request)
    return await ThreadRunner(service).open_stream(thread_id, request)


def _event_stream(events: AsyncIterator[Event]) -> StreamingResponse:
    async def frames() -> AsyncIterator[bytes]:
        async for name, data in events:
            yield sse_event(name, data)

    return StreamingResponse(frames(), media_type=MEDIA_TYPE, headers=_STREAM_HEADERS)


async def _execute_once(
    service: RunService, request: RunRequest, thread_id: str | None, store: IdempotencyStore, claim: Claim
) -> Response:
    """Run while holding the key: store a success, release the key on any error.

    Errors are not stored, so a rejected request leaves nothing behind and a retry is
    judged afresh (the checkpoint may exist by then, the storage may be back).
    """
    try:
        if not request.stream:
            body = render_json(await _run_to_json(service, request, thread_id))
            await store.complete(claim, 200, body)
            return Response(body, media_type=JSON_MEDIA_TYPE)
        events = await _open_stream(service, request, thread_id)
    except BaseException:
        await store.release(claim)
        raise
    return _event_stream(_recorded(events, store, claim))


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


def _replay(stored: StoredResponse, *, stream: bool) -> Response:
    """The first response again: the same bytes, or its body as a one-event stream."""
    if not stream:
        return Response(stored.body, status_code=stored.status, media_type=JSON_MEDIA_TYPE)

    async def done() -> AsyncIterator[Event]:
        yield "done", json.loads(stored.body)

    return _event_stream(done())


# -- GET routes ---------------------------------------------------------------------------


async def handle_get_checkpoint(request: Request, checkpoint_id: str) -> Response:
    """``GET /api/checkpoints/{id}``: metadata from blob properties; the state is not read."""

    async def get() -> Response:
        validate_id(checkpoint_id)
        info = await build_service(_settings()).store.get_info(checkpoint_id)
        return json_response(info.to_json())

    return await _traced(request, "checkpoints/{checkpoint_id}", get)


async def handle_get_thread(request: Request, thread_id: str) -> Response:
    """``GET /api/threads/{id}``: the pointer and its recent lineage."""

    async def get() -> Response:
        head = await build_service(_settings()).pointers.read(validate_id(thread_id, kind="thread_id"))
        if head.etag is None:
            raise ThreadNotFound(f"Thread '{thread_id}' has no turns yet.")
        return json_response(head.to_json())

    return await _traced(request, "threads/{thread_id}", get)


async def handle_health() -> Response:
    """``GET /api/health``: liveness and versions; touches no storage."""
    return json_response({"status": "ok", "version": __version__, "agent_framework": AGENT_FRAMEWORK_VERSION})
