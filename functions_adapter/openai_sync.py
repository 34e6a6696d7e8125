"""A synchronous response: its run's owner settles a ``ResponseCommit``, and its stream.

``ResponseCommit`` is what ``RunOwner`` calls at the commit point and at the end (the
role an Idempotency-Key claim plays on ``/api/runs``, and a lease in the background):

* the response body is rendered once, before the commit, so the Idempotency-Key's
  record (if any) keeps the Responses body, and a retry replays exactly that;
* with ``store`` (the default), after the turn committed, one create-only write stores
  it as an already-succeeded run record, so it can be retrieved, continued
  (``previous_response_id``) and listed like a background one. A store that fails
  after the commit is logged, not reported: the turn is committed and re-running it
  would be worse; that response then cannot be retrieved by its ID.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Response
from fastapi.responses import StreamingResponse

from resumable.background import records as rr
from resumable.background.records import RecordConflict, RunRecord, RunRecords
from resumable.base.cancel_safe import finish_even_if_cancelled
from resumable.base.errors import ResumeError
from resumable.core.claim import TaskOwner
from resumable.core.event_pump import IdleTick
from resumable.core.held_claim import HeldClaim
from resumable.core.idempotency import StoredResponse
from resumable.core.runs import Event

from .openai_events import Frame, ResponseEvents
from .openai_objects import render
from .responses import JSON_MEDIA_TYPE, render_json
from .sse import KEEPALIVE, MEDIA_TYPE, sse_event

logger = logging.getLogger(__name__)
_STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class ResponseCommit:
    """Renders the response at the commit point, stores it after, settles the key's claim."""

    def __init__(
        self, base: dict[str, Any], claim: HeldClaim | None, record: RunRecord, records: RunRecords | None
    ) -> None:
        self._base = base
        self._claim = claim
        self._record = record  # the run record to store (``records``: store it)
        self._records = records
        self._completed_at = 0.0
        self.final: bytes | None = None
        self.settled = asyncio.Event()

    def start(self, tasks: TaskOwner) -> None:
        if self._claim is not None:
            self._claim.start(tasks)

    def _render(self, result: bytes) -> bytes:
        if self.final is None:
            self._completed_at = time.time()
            body = render(self._base, "completed", result=json.loads(result), completed_at=self._completed_at)
            self.final = render_json(body)
        return self.final

    async def before_commit(self, checkpoint_id: str, thread_id: str | None, body: bytes, *, stamp: str = "") -> None:
        final = self._render(body)
        if self._claim is not None:
            await self._claim.before_commit(checkpoint_id, thread_id, final, stamp=stamp)

    async def succeeded(self, body: bytes) -> None:
        await finish_even_if_cancelled(self._settle(body))

    async def _settle(self, body: bytes) -> None:
        try:
            final = self._render(body)
            if self._records is not None:
                await self._store(self._records, body)
            if self._claim is not None:
                await self._claim.succeeded(final)
        finally:
            self.settled.set()

    async def _store(self, records: RunRecords, result: bytes) -> None:
        stored = self._record.finished(rr.SUCCEEDED, result=result)
        stored = dataclasses.replace(stored, started_at=self._record.created_at, finished_at=self._completed_at)
        try:
            await records.create(stored)
        except (ResumeError, RecordConflict):
            logger.error("Response %s committed but could not be stored: it cannot be retrieved", self._record.run_id)

    async def failed(self, error: BaseException | None = None) -> None:
        try:
            if self._claim is not None:
                await self._claim.failed(error)
        finally:
            self.settled.set()


async def live_frames(
    events: ResponseEvents, source: AsyncIterator[Event | IdleTick], commit: ResponseCommit, base: dict[str, Any]
) -> AsyncIterator[Frame | None]:
    """A synchronous run's events as the Responses stream (None: a keep-alive)."""
    for frame in events.opening():
        yield frame
    async for item in source:
        if isinstance(item, IdleTick):
            yield None
            continue
        name, data = item
        if name == "done":
            await commit.settled.wait()  # stored (with store) before the client hears "completed"
            frames = events.finish(json.loads(commit.final or b"{}"))
        elif name == "error":
            frames = events.finish(render(base, "failed", error=data.get("error") or {}))
        else:
            frames = events.add(name, data)
        for frame in frames:
            yield frame
        if name in ("done", "error"):
            return
    error = {"code": "internal_error", "message": "The run ended without an outcome; nothing was saved."}
    for frame in events.finish(render(base, "failed", error=error)):
        yield frame


def replayed(stored: StoredResponse, *, stream: bool) -> Response:
    """A keyed retry of a synchronous response: the same body, or the stream it makes."""
    if not stream:
        return Response(stored.body, status_code=stored.status, media_type=JSON_MEDIA_TYPE)
    final = json.loads(stored.body)
    events = ResponseEvents(final)

    async def frames() -> AsyncIterator[Frame | None]:
        for frame in [*events.opening(), *events.finish(final)]:
            yield frame

    return event_stream(frames())


def event_stream(frames: AsyncIterator[Frame | None], *, after: int = -1) -> StreamingResponse:
    """Server-sent events, ``event: <type>`` then the JSON; only those numbered above ``after``."""

    async def encoded() -> AsyncIterator[bytes]:
        async for frame in frames:
            if frame is None:
                yield KEEPALIVE
            elif frame["sequence_number"] > after:
                yield sse_event(frame["type"], frame)

    return StreamingResponse(encoded(), media_type=MEDIA_TYPE, headers=_STREAM_HEADERS)
