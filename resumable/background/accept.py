"""Accepting a background run: refuse now what the run would refuse, replay a retry, and
leave exactly one run per accepted request, whatever fails in between.

The order of the steps is what makes a failure at any point safe:

1. **Replay first.** With a key (Idempotency-Key or a verified webhook-id), an earlier
   identical request's final response is the answer: its 202, or a synchronous call's
   200. The key's record is the one the synchronous path uses, so one key gets one
   record across routes (another route is a different request: 409/422) and across
   synchronous and background calls. Nothing is validated for a replay: the thread may
   have moved on since, because of the very run being replayed.
2. **Validate**, through the caller's ``validate`` (the turn factory's runner), and check
   the callback address: everything a synchronous call would refuse is refused here.
3. **Key, message, record, order.** The key's record stores the 202 (create-only), then
   the queue message is sent, then the run's record is created (create-only), then a
   thread turn is listed in its thread's order. A message without a record is dropped
   after its deliveries; the drain lists a run that has a record and no entry. A failure
   after the key's record was written is undone where it can be (the key released, the
   entry removed, the record marked failed), and a keyed retry completes whatever the
   first accept did not (``_heal``): the same run, never a second one.

Run IDs are random, never derived from what a caller sent, so a run cannot be found
or guessed from its key.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..base.cancel_safe import finish_even_if_cancelled
from ..base.errors import ResumeError
from ..core.idempotency import IdempotencyStore, StoredResponse
from ..storage.blob_records import RecordConflict
from ..storage.record_store import Stored
from . import records as rr
from .order import ThreadOrder
from .records import RunError, RunRecord, RunRecords

logger = logging.getLogger(__name__)
# A keyed retry recreates a run whose record is missing only this soon after the key was
# stored: an accept that died half-way is retried within this; an older missing record
# was deleted on purpose (its thread was deleted, which deletes the key's record too).
HEAL_SECONDS = 3600.0
ACCEPT_FAILED = RunError("accept_failed", "The run could not be queued; nothing ran. Send the request again.")


class Enqueue(Protocol):
    async def enqueue(self, run_id: str, *, delay_seconds: int = 0) -> None: ...


@dataclass(frozen=True, slots=True)
class Dedupe:
    """What makes a retry the same request: a key and its namespace (``idempotency.WEBHOOK_ID``...)."""

    key: str
    kind: str


@dataclass(frozen=True, slots=True)
class AcceptRequest:
    """One background request, as its record keeps it (the run is rebuilt from ``body``)."""

    body: bytes
    fingerprint: str
    thread_id: str | None
    checkpoint_id: str | None
    dedupe: Dedupe | None = None
    trace: Mapping[str, str] = field(default_factory=dict)
    # The caller's origin (``RunRequest.origin``), kept in the run record for its execution.
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class Accepted:
    """The answer: a 202 for a queued run, or a replay of an earlier identical request's."""

    status: int
    body: bytes
    run_id: str | None
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class Callback:
    """A callback address, checked (the callback's delivery state is a record of its own)."""

    url: str


# Renders the 202 body for (run ID, created at): the adapter's shape, with its links.
RenderAccepted = Callable[[str, float], bytes]


class RunAcceptor:
    def __init__(
        self, records: RunRecords, order: ThreadOrder, queue: Enqueue, keys: IdempotencyStore | None = None
    ) -> None:
        self._records = records
        self._order = order
        self._queue = queue
        self._keys = keys

    async def accept(
        self,
        request: AcceptRequest,
        *,
        validate: Callable[[], Awaitable[None]],
        callback: Callable[[], Awaitable[Callback | None]],
        render: RenderAccepted,
    ) -> Accepted:
        dedupe = request.dedupe
        if dedupe is not None:
            earlier = await self._require_keys().peek(dedupe.key, request.fingerprint, kind=dedupe.kind)
            if earlier is not None:
                return await self._heal(request, earlier, callback)
        await validate()
        checked = await callback()
        run_id, created_at = uuid.uuid4().hex, time.time()
        accepted = render(run_id, created_at)
        if dedupe is not None:
            earlier = await self._require_keys().accept_once(
                dedupe.key,
                request.fingerprint,
                StoredResponse(202, accepted, run_id),
                kind=dedupe.kind,
                thread_id=request.thread_id,
            )
            if earlier is not None:  # an identical request got there between the peek and now
                return await self._heal(request, earlier, callback)
        record = _record(request, run_id, created_at, accepted, checked)
        await self._queue_run(record, undo_key=dedupe)
        return Accepted(202, accepted, run_id)

    def _require_keys(self) -> IdempotencyStore:
        if self._keys is None:
            raise TypeError("a keyed accept needs the IdempotencyStore")
        return self._keys

    async def _queue_run(self, record: RunRecord, *, undo_key: Dedupe | None) -> None:
        created: Stored[RunRecord] | None = None
        try:
            await self._queue.enqueue(record.run_id)
            try:
                created = await self._records.create(record)
            except RecordConflict:  # a keyed retry healing this run got there first
                created = await self._records.get(record.run_id)
            if record.thread_id is not None:
                await self._order.append(record.thread_id, record.run_id)
        except BaseException:
            await finish_even_if_cancelled(self._undo(record, created, undo_key))
            raise

    async def _undo(self, record: RunRecord, created: Stored[RunRecord] | None, key: Dedupe | None) -> None:
        """After a failed accept: nothing of it may run later, unnoticed by the caller.

        Best effort (storage is likely what failed): a run that has a record is marked
        failed (its message then finds it finished); a key whose run has no record is
        released, so the caller's retry is judged afresh.
        """
        with contextlib.suppress(ResumeError):
            if created is not None:

                def failed(current: RunRecord | None) -> RunRecord | None:
                    if current is None or current.status != rr.QUEUED:
                        return None
                    return current.finished(rr.FAILED, error=ACCEPT_FAILED)

                await self._records.update(record.run_id, failed, current=created)
                if record.thread_id is not None:
                    await self._order.remove(record.thread_id, record.run_id)
            elif key is not None and self._keys is not None:
                await self._keys.forget_accept(key.key, key.kind, record.run_id)

    async def _heal(
        self, request: AcceptRequest, earlier: StoredResponse, callback: Callable[[], Awaitable[Callback | None]]
    ) -> Accepted:
        """A retry of an accepted request: its first answer again, byte for byte, after
        completing whatever that accept did not (a queued run is sent again: a duplicate
        message is harmless; a missing record, recently accepted, is created)."""
        run_id = earlier.run_id
        if run_id is None:  # a synchronous call's response
            return Accepted(earlier.status, earlier.body, None, replayed=True)
        found = await self._records.get(run_id)
        if found is None and time.time() - (earlier.stored_at or 0.0) < HEAL_SECONDS:
            record = _record(request, run_id, earlier.stored_at or time.time(), earlier.body, await callback())
            await self._queue_run(record, undo_key=None)
        elif found is not None and found.value.status == rr.QUEUED:
            if found.value.thread_id is not None:
                await self._order.append(found.value.thread_id, run_id)
            await self._queue.enqueue(run_id)
        return Accepted(earlier.status, earlier.body, run_id, replayed=True)


def _record(
    request: AcceptRequest, run_id: str, created_at: float, accepted: bytes, callback: Callback | None
) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        body=request.body,
        fingerprint=request.fingerprint,
        accepted=accepted,
        created_at=created_at,
        thread_id=request.thread_id,
        checkpoint_id=request.checkpoint_id,
        trace=dict(request.trace),
        callback_url=None if callback is None else callback.url,
        origin=request.origin,
    )
