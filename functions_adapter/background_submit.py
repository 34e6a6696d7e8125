"""Submitting a background run, the adapter's side, shared by ``/api/runs``, a thread's
runs and ``/api/responses``: the key, the trace context and the callback check around the
library's ``RunAcceptor``; and the ``RunControl`` the run routes read and cancel through.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from opentelemetry import propagate, trace

from functions_adapter import callback_url, callbacks
from functions_adapter.queue_triggers import callbacks_for, run_queue
from functions_adapter.settings import Settings
from functions_adapter.turns import Turn
from functions_adapter.wiring import build_service, container_for, idempotency_store
from resumable.background.accept import Accepted, AcceptRequest, Callback, Dedupe, RenderAccepted, RunAcceptor
from resumable.background.control import RunControl
from resumable.background.order import ThreadOrder
from resumable.background.records import RunRecords
from resumable.base.errors import InvalidRequest, ServerMisconfigured
from resumable.core.idempotency import fingerprint
from resumable.core.runs import RunRequest

logger = logging.getLogger(__name__)


async def submit(
    request: Request,
    turn: Turn,
    *,
    record_body: bytes,
    request_body: bytes,
    settings: Settings,
    dedupe: Any,
    render: RenderAccepted,
) -> Accepted:
    """Accept ``turn`` as a background run (``RunAcceptor``): the record keeps
    ``record_body`` (what the queue trigger's turn factory parses) and the key's
    fingerprint is of ``request_body`` (what the caller sent); ``render`` shapes the answer."""
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
            fingerprint=fingerprint(request.method, request.url.path, request_body),
            thread_id=turn.thread_id,
            checkpoint_id=turn.request.checkpoint_id,
            dedupe=None if dedupe is None else Dedupe(dedupe.key, dedupe.kind),
            trace=carrier,
            origin=turn.request.origin,
        ),
        validate=lambda: turn.runner.validate(turn.request),
        callback=lambda: _check_callback(turn.request.callback_url or settings.callback_url, settings),
        render=traced_render,
    )


async def _check_callback(url: str | None, settings: Settings) -> Callback | None:
    """The run's callback, checked now (400 for an address this app will not call)."""
    if url is None:
        return None
    if not settings.callback_secrets:
        logger.error("Configuration error: a callback was asked for and CALLBACK_SECRET is not set")
        raise ServerMisconfigured()
    checked = await callback_url.check(url, callbacks.policy_of(settings))
    return Callback(checked.url)


def refuse_synchronous_callback(run_request: RunRequest) -> None:
    """A callback belongs to a background run: a synchronous caller has the result in hand."""
    if run_request.callback_url is not None:
        raise InvalidRequest(
            "'callback_url' needs a background run: add 'Prefer: respond-async' or \"background\": true."
        )


def run_control(settings: Settings) -> RunControl:
    return RunControl(RunRecords(container_for(settings)), on_finished=callbacks_for(settings).schedule)
