"""Background runs over HTTP and the run queue: 202 now, status, join, cancel.

The library (``resumable.background``) owns execution; this module turns requests
into records and messages, and records into responses. Everything a synchronous call
would refuse is refused before the 202, with the same status codes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import azure.functions as func
from fastapi import Request, Response
from fastapi.responses import StreamingResponse
from opentelemetry import propagate, trace

from resumable import run_records as rr
from resumable.background import BackgroundRuns, follow
from resumable.blob_records import RecordConflict
from resumable.errors import (
    IdempotencyKeyReused,
    InvalidRequest,
    RunFinished,
    RunNotFound,
    ServerMisconfigured,
    WebhookIdReused,
)
from resumable.event_pump import IdleTick
from resumable.idempotency import WEBHOOK_ID, fingerprint, validate_key
from resumable.ids import validate_id
from resumable.record_store import Stored
from resumable.run_events import EventReader, LoggedEvent
from resumable.run_queue import RunQueue
from resumable.run_records import RunRecord, RunRecords
from resumable.runs import RunRequest, RunService
from resumable.thread_order import ThreadOrder

from . import callback_url, callbacks
from .request_body import parse_run_request
from .responses import JSON_MEDIA_TYPE, json_response, render_json
from .settings import Settings
from .sse import KEEPALIVE, MEDIA_TYPE, sse_event
from .wiring import build_service, container_for, load_settings

logger = logging.getLogger(__name__)
MAX_WAIT_SECONDS = 60
POLL_SECONDS = 0.5
_STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def preferences(prefer: str | None) -> dict[str, str]:
    """RFC 7240 ``Prefer`` tokens (``respond-async``, ``wait=10``), names lower-cased."""
    found: dict[str, str] = {}
    for part in (prefer or "").split(","):
        token = part.split(";", 1)[0].strip()
        if token:
            name, _, value = token.partition("=")
            found[name.strip().lower()] = value.strip().strip('"')
    return found


def _links(run_id: str) -> dict[str, str]:
    base = f"/api/runs/{run_id}"
    return {"self": base, "stream": f"{base}/stream", "cancel": f"{base}/cancel"}


def _accepted_response(record: RunRecord, *, async_preferred: bool) -> Response:
    headers = {"Location": f"/api/runs/{record.run_id}", "Retry-After": "1"}
    if async_preferred:
        headers["Preference-Applied"] = "respond-async"
    return Response(record.accepted, status_code=202, media_type=JSON_MEDIA_TYPE, headers=headers)


def run_queue(settings: Settings) -> RunQueue:
    if settings.queue is None:
        logger.error("Configuration error: background runs need AzureWebJobsStorage (or __queueServiceUri)")
        raise ServerMisconfigured()
    return RunQueue(settings.queue, settings.runs_queue)


async def accept(
    request: Request,
    body: bytes,
    run_request: RunRequest,
    *,
    settings: Settings,
    service: RunService,
    thread_id: str | None,
    dedupe: Any,
) -> Response:
    """Queue a run and answer 202, or refuse it now exactly as a synchronous call would.

    Writes, in order: the queue message, the thread's pending list (thread turns), the
    record. A message without a record is dropped after its deliveries; a record is
    written last, so one exists only for a run that will execute.
    """
    queue = run_queue(settings)
    async_preferred = "respond-async" in preferences(request.headers.get("prefer"))
    callback = await _callback_state(run_request.callback_url or settings.callback_url, settings)
    if thread_id is None:
        await service.validate(run_request)  # missing, incompatible, pending requests: refused now
    records = RunRecords(container_for(settings))
    request_fingerprint = fingerprint(request.method, request.url.path, body)
    if dedupe is not None:
        validate_key(dedupe.key)
        run_id = rr.keyed_run_id(dedupe.kind, dedupe.key, request.url.path)
        existing = await records.get(run_id)
        if existing is not None:
            return await _replay(
                existing.value,
                request_fingerprint,
                dedupe.kind,
                queue,
                settings=settings,
                async_preferred=async_preferred,
            )
    else:
        run_id = rr.new_run_id()
    trace.get_current_span().set_attribute("run_id", run_id)
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    created_at = time.time()
    accepted = render_json(
        {
            "run_id": run_id,
            "status": rr.QUEUED,
            "thread_id": thread_id,
            "checkpoint_id": run_request.checkpoint_id,
            "created_at": rr.rfc3339(created_at),
            "links": _links(run_id),
        }
    )
    await queue.enqueue(run_id)
    if thread_id is not None:
        await ThreadOrder(container_for(settings)).append(thread_id, run_id)
    new = RunRecord(
        run_id=run_id,
        body=body,
        fingerprint=request_fingerprint,
        thread_id=thread_id,
        checkpoint_id=run_request.checkpoint_id,
        accepted=accepted,
        created_at=created_at,
        trace=carrier,
        callback_url=None if callback is None else callback["url"],
        callback=callback,
    )
    try:
        record = await records.create(new)
    except RecordConflict:  # an identical keyed request got there first
        existing = await records.get(run_id)
        if existing is None:
            raise
        return await _replay(
            existing.value, request_fingerprint, dedupe.kind, queue, settings=settings, async_preferred=async_preferred
        )
    return _accepted_response(record.value, async_preferred=async_preferred)


async def _replay(
    existing: RunRecord,
    request_fingerprint: str,
    kind: str,
    queue: RunQueue,
    *,
    settings: Settings,
    async_preferred: bool,
) -> Response:
    """A retry of an accepted run: its first 202 again, byte for byte; never a second run."""
    if existing.fingerprint != request_fingerprint:
        if kind == WEBHOOK_ID:
            raise WebhookIdReused("This webhook-id was already delivered with a different request.")
        raise IdempotencyKeyReused("This Idempotency-Key was used with a different request.")
    if existing.status == rr.QUEUED:
        # The first accept may have died before its message or list entry landed.
        if existing.thread_id is not None:
            await ThreadOrder(container_for(settings)).append(existing.thread_id, existing.run_id)
        await queue.enqueue(existing.run_id)
    return _accepted_response(existing, async_preferred=async_preferred)


async def _callback_state(url: str | None, settings: Settings) -> dict[str, Any] | None:
    """The run's callback, checked now (400 for an address this app will not call)."""
    if url is None:
        return None
    if not settings.callback_secrets:
        logger.error("Configuration error: a callback was asked for and CALLBACK_SECRET is not set")
        raise ServerMisconfigured()
    checked = await callback_url.check(url, callbacks.policy_of(settings))
    return callbacks.new_state(checked.url)


def refuse_synchronous_callback(run_request: RunRequest) -> None:
    """A callback belongs to a background run: a synchronous caller has the result in hand."""
    if run_request.callback_url is not None:
        raise InvalidRequest(
            "'callback_url' needs a background run: add 'Prefer: respond-async' or \"background\": true."
        )


def parse_record(settings: Settings) -> Any:
    """How the queue trigger rebuilds a run's request from its record."""

    def parse(record: RunRecord) -> RunRequest:
        thread = record.thread_id is not None
        parsed = parse_run_request(record.body, limits=settings.limits, thread=thread)
        return RunRequest(
            checkpoint_id=parsed.checkpoint_id,
            turn=parsed.turn,
            stream=True,
            # A thread's background turns run one after another; a turn that still loses
            # to a synchronous one runs again on the new head.
            multitask="enqueue" if thread else parsed.multitask,
            final_checkpoint_id=None if thread else record.run_id,
        )

    return parse


def _callbacks(settings: Settings) -> callbacks.Callbacks:
    return callbacks.Callbacks(RunRecords(container_for(settings)), run_queue(settings), settings)


def background_runs(settings: Settings) -> BackgroundRuns:
    queue = run_queue(settings)
    return BackgroundRuns(
        container_for(settings),
        build_service(settings),
        parse_record(settings),
        lambda run_id, delay: queue.enqueue(run_id, delay_seconds=delay),
        thread_lock_wait_seconds=settings.thread_lock_wait_seconds,
        on_finished=_callbacks(settings).schedule,
    )


def _message_run_id(message: func.QueueMessage) -> str | None:
    text = message.get_body().decode("utf-8", "replace").strip()
    try:
        return validate_id(text, kind="run_id")
    except InvalidRequest:
        logger.error("Dropped a run-queue message that is not a run ID")
        return None


async def handle_message(message: func.QueueMessage) -> None:
    """The queue trigger: run (or settle) the run the message names. Raises to retry."""
    run_id = _message_run_id(message)
    if run_id is None:
        return
    settings = load_settings()
    if run_id.startswith(callbacks.MESSAGE_PREFIX):
        await _callbacks(settings).deliver(run_id.removeprefix(callbacks.MESSAGE_PREFIX))
    else:
        await background_runs(settings).handle(run_id)


async def handle_poisoned(message: func.QueueMessage) -> None:
    """The poison queue: the run's message was delivered ``maxDequeueCount`` times."""
    run_id = _message_run_id(message)
    if run_id is None or run_id.startswith(callbacks.MESSAGE_PREFIX):
        return  # a callback whose deliveries failed for storage reasons: its attempts are recorded
    logger.error("Run %s used up its queue deliveries", run_id)
    await background_runs(load_settings()).handle_poisoned(run_id)


# -- GET /api/runs/{id}, GET /api/runs/{id}/stream, POST /api/runs/{id}/cancel -------------


async def _record(settings: Settings, run_id: str) -> Stored[RunRecord]:
    validate_id(run_id, kind="run_id")
    record = await RunRecords(container_for(settings)).get(run_id)
    if record is None:
        raise RunNotFound(f"No background run has the ID '{run_id}'.")
    return record


def _wait_seconds(prefer: str | None) -> float:
    raw = preferences(prefer).get("wait", "")
    return float(min(int(raw), MAX_WAIT_SECONDS)) if raw.isascii() and raw.isdigit() else 0.0


async def get_status(request: Request, run_id: str) -> Response:
    """The run's status; ``Prefer: wait=N`` holds the answer until it finishes or N s pass."""
    settings = load_settings()
    record = (await _record(settings, run_id)).value
    deadline = time.monotonic() + _wait_seconds(request.headers.get("prefer"))
    records = RunRecords(container_for(settings))
    pause = 0.05  # short runs answer fast; longer ones cost a read every POLL_SECONDS
    while not record.terminal and time.monotonic() < deadline:
        await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(POLL_SECONDS, pause * 2)
        record = (await records.get(run_id) or Stored(record, "")).value
    headers = None if record.terminal else {"Retry-After": "1"}
    return json_response(status_json(record), headers=headers)


def status_json(record: RunRecord) -> dict[str, Any]:
    body = record.status_json()
    if record.callback:
        body["callback"] = callbacks.public_view(record.callback)
    return body


async def cancel(run_id: str) -> Response:
    """Cancel: a queued run never starts; a running one is stopped by its watcher."""
    settings = load_settings()
    records = RunRecords(container_for(settings))
    stored = await _record(settings, run_id)

    def cancelled(record: RunRecord | None) -> RunRecord:
        if record is None:
            raise RunNotFound(f"No background run has the ID '{run_id}'.")
        if record.terminal:
            raise RunFinished(f"The run already finished ({record.status}).")
        if record.status == rr.QUEUED:
            return record.finished(rr.CANCELLED, error=rr.CANCELLED_ERROR)
        return dataclasses.replace(record, cancel_requested=True)

    written = await records.update(run_id, cancelled, current=stored)
    if written is None:
        raise RunNotFound(f"No background run has the ID '{run_id}'.")
    await _callbacks(settings).schedule(written)  # a queued run cancelled: report it
    return json_response(status_json(written.value))


def _last_event_id(value: str | None) -> tuple[int, int]:
    attempt, _, seq = (value or "").strip().partition(".")
    if attempt.isascii() and attempt.isdigit() and seq.isascii() and seq.isdigit():
        return int(attempt), int(seq)
    return 0, 0


async def join(request: Request, run_id: str) -> Response:
    """SSE: the run's events from the start (or after ``Last-Event-ID``), then live."""
    settings = load_settings()
    await _record(settings, run_id)
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
