"""A synchronous response: its run's owner settles a ``ResponseCommit``, and its stream.

``ResponseCommit`` is what ``RunOwner`` calls at the commit point and at the end (the
role an Idempotency-Key claim plays on ``/api/runs``, and a lease in the background):

* the response body is rendered once, before the commit, so the Idempotency-Key's
  record (if any) keeps the Responses body, and a retry replays exactly that;
* with ``store`` (the default), its record is written before the commit and settled
  after it (``response_records``), so it can be retrieved, continued
  (``previous_response_id``) and listed like a background one, and a DELETE of the
  thread removes it with the rest;
* a failure after the commit point is resolved by the turn pipeline (``RunOwner``,
  ``resumable.core.commit_outcome``), as for every protocol: a turn that committed after
  all settles as ``succeeded``; one nobody can tell is ``outcome_unknown`` (shaped here:
  ``unknown``), which no client retries on its own, unless the request carries an
  Idempotency-Key, whose retry is safe: it resolves the outcome and replays. Its record
  then stays, for its next read to settle.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any

from fastapi import Response
from fastapi.responses import StreamingResponse

from functions_adapter.http_responses import JSON_MEDIA_TYPE, render_json
from functions_adapter.openai.events import Frame, ResponseEvents
from functions_adapter.openai.objects import render
from functions_adapter.openai.response_records import PendingRecord
from functions_adapter.sse import KEEPALIVE, MEDIA_TYPE, sse_event
from resumable.base import OutcomeUnknown
from resumable.base.cancel_safe import finish_even_if_cancelled
from resumable.core.claim import TaskOwner
from resumable.core.event_pump import IdleTick
from resumable.core.held_claim import HeldClaim
from resumable.core.idempotency import StoredResponse
from resumable.core.runs import Event

logger = logging.getLogger(__name__)
_STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class ResponseCommit:
    """Renders the response at the commit point, stores it, and settles the key's claim."""

    def __init__(self, base: dict[str, Any], claim: HeldClaim | None, pending: PendingRecord | None) -> None:
        self._base = base
        self._claim = claim
        self._pending = pending
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

    async def before_commit(
        self, checkpoint_id: str, thread_id: str | None, body: bytes, *, stamp: str = ""
    ) -> Mapping[str, object] | None:
        final = self._render(body)
        if self._pending is not None:
            await self._pending.write(checkpoint_id, stamp, body)
        if self._claim is not None:
            return await self._claim.before_commit(checkpoint_id, thread_id, final, stamp=stamp)
        return None

    async def succeeded(self, body: bytes) -> None:
        """The turn committed (perhaps found so after a failure): ``body`` is its result."""
        await finish_even_if_cancelled(self._settle(self._succeeded(body)))

    async def _succeeded(self, body: bytes) -> None:
        final = self._render(body)
        if self._pending is not None:
            await self._pending.committed(body, self._completed_at)
        if self._claim is not None:
            await self._claim.succeeded(final)

    async def failed(self, error: BaseException | None = None) -> None:
        """It did not commit, or nobody can tell (``OutcomeUnknown``: the record stays)."""
        await finish_even_if_cancelled(self._settle(self._failed(error)))

    async def _failed(self, error: BaseException | None) -> None:
        if self._pending is not None and not isinstance(error, OutcomeUnknown):
            await self._pending.discard()
        if self._claim is not None:
            await self._claim.failed(error)

    async def _settle(self, work: Awaitable[None]) -> None:
        try:
            await work
        finally:
            self.settled.set()

    @property
    def id(self) -> str:
        return str(self._base["id"])

    @property
    def keyed(self) -> bool:
        """The request carries an Idempotency-Key: a retry with it resolves the outcome."""
        return self._claim is not None

    def unknown(self) -> OutcomeUnknown:
        conversation = self._base.get("conversation")
        details: dict[str, Any] = {"id": self.id}
        if conversation is not None:
            details["conversation"] = conversation["id"]
        if self._base.get("previous_response_id") is not None:
            details["previous_response_id"] = self._base["previous_response_id"]
        return OutcomeUnknown(
            "Storage failed while this turn was being committed, and whether it was applied cannot be told"
            " yet. Do not send it again blindly: retrieve the response named in details.id (or read the"
            " conversation) to see whether it was applied, or send an Idempotency-Key with every create.",
            details=details,
        )


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
        name, data = item  # a failure after the commit point arrives resolved (``RunOwner``)
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
