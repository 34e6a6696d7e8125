"""Submitting a background run, the adapter's side, shared by ``/api/runs``, a thread's
runs, ``/api/responses``, MCP and the webhook adapters: the key, the trace context and the
callback check around the library's ``RunAcceptor``; and the ``RunControl`` the run routes
and MCP's ``get_run`` read and cancel through. Plain values in: no request object.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry import propagate, trace

from functions_adapter import callback_url, callbacks, thread_access
from functions_adapter.http_responses import render_json
from functions_adapter.queue_triggers import callbacks_for, run_queue
from functions_adapter.settings import Settings
from functions_adapter.turns import Turn
from functions_adapter.wiring import build_service, container_for, idempotency_store
from resumable import RunRequest
from resumable.background import (
    Accepted,
    AcceptRequest,
    Callback,
    Dedupe,
    RenderAccepted,
    RunAcceptor,
    RunControl,
    RunRecord,
    RunRecords,
    ThreadOrder,
    owned_run,
)
from resumable.background import records as rr
from resumable.base import InvalidRequest, ServerMisconfigured
from resumable.storage.record_store import Stored
from resumable.threads import Caller

logger = logging.getLogger(__name__)


async def submit(
    turn: Turn,
    *,
    record_body: bytes,
    request_fingerprint: str,
    settings: Settings,
    dedupe: Any,
    render: RenderAccepted,
    callback_format: str | None = None,
    callback_params: Mapping[str, str] | None = None,
) -> Accepted:
    """Accept ``turn`` as a background run (``RunAcceptor``): the record keeps
    ``record_body`` (what the queue trigger's turn factory parses) and the key's
    ``request_fingerprint`` (of what the caller sent); ``render`` shapes the answer;
    ``callback_format`` (with its ``callback_params``) renders the callback's payload."""
    if callback_format is not None and turn.request.callback_url is None:
        raise TypeError("A callback format needs the request's own callback_url.")
    url = turn.request.callback_url or settings.callback_url
    queue = run_queue(settings)
    container = container_for(settings)
    keys = None
    if dedupe is not None:
        keys = idempotency_store(settings, build_service(settings), ttl_seconds=dedupe.ttl_seconds, scope=dedupe.scope)
    carrier: dict[str, str] = {}
    propagate.inject(carrier)

    def traced_render(run_id: str, created_at: float) -> bytes:
        trace.get_current_span().set_attribute("run_id", run_id)
        return render(run_id, created_at)

    return await RunAcceptor(RunRecords(container), ThreadOrder(container), queue, keys).accept(
        AcceptRequest(
            body=record_body,
            fingerprint=request_fingerprint,
            thread_id=turn.thread_id,
            checkpoint_id=turn.request.checkpoint_id,
            dedupe=None if dedupe is None else Dedupe(dedupe.key, dedupe.kind),
            trace=carrier,
            origin=turn.request.origin,
        ),
        validate=lambda: turn.runner.validate(turn.request),
        callback=lambda: check_callback(url, settings, callback_format, callback_params),
        render=traced_render,
    )


async def check_callback(
    url: str | None,
    settings: Settings,
    callback_format: str | None = None,
    callback_params: Mapping[str, str] | None = None,
) -> Callback | None:
    """The run's callback, checked now (400 for an address this app will not call)."""
    if url is None:
        return None
    if not settings.callback_secrets:
        logger.error("Configuration error: a callback was asked for and CALLBACK_SECRET is not set")
        raise ServerMisconfigured()
    checked = await callback_url.check(url, callbacks.policy_of(settings))
    return Callback(checked.url, callback_format, dict(callback_params or {}))


def refuse_synchronous_callback(run_request: RunRequest) -> None:
    """A callback belongs to a background run: a synchronous caller has the result in hand."""
    if run_request.callback_url is not None:
        raise InvalidRequest(
            "'callback_url' needs a background run: add 'Prefer: respond-async' or \"background\": true."
        )


def run_control(settings: Settings) -> RunControl:
    return RunControl(RunRecords(container_for(settings)), on_finished=callbacks_for(settings).schedule)


def run_links(run_id: str) -> dict[str, str]:
    base = f"/api/runs/{run_id}"
    return {"self": base, "stream": f"{base}/stream", "cancel": f"{base}/cancel"}


def queued_renderer(turn: Turn) -> RenderAccepted:
    """The 202 document of a run queued for ``turn`` (what ``GET /api/runs/{id}`` links to)."""
    thread_id, checkpoint_id = turn.thread_id, turn.request.checkpoint_id

    def render(run_id: str, created_at: float) -> bytes:
        return render_json(
            {
                "run_id": run_id,
                "status": rr.QUEUED,
                "thread_id": thread_id,
                "checkpoint_id": checkpoint_id,
                "created_at": rr.rfc3339(created_at),
                "links": run_links(run_id),
            }
        )

    return render


async def authorized_run(
    settings: Settings, run_id: str, caller: Caller, headers: Mapping[str, str], route: str
) -> Stored[RunRecord]:
    """The run's record, once the thread authorizer allowed this caller its thread; a run
    of another origin (``callers.origin_of``) is 403, as its thread is."""
    found = await owned_run(run_control(settings), run_id, caller)
    if found.value.thread_id is not None:
        await thread_access.gate(headers, settings, route, found.value.thread_id)
    return found


async def status_json(settings: Settings, record: RunRecord) -> dict[str, Any]:
    """``GET /api/runs/{id}``'s document, with the callback's delivery (if the run has one)."""
    body = record.status_json()
    callback = await callbacks.status_view(container_for(settings), record)
    if callback is not None:
        body["callback"] = callback
    return body
