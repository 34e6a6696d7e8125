"""Accepting a background run: refuse now what the run would refuse, replay a retry, and
leave exactly one run per accepted request, whatever fails in between.

The order of the steps is what makes a failure at any point safe:

1. **Replay first.** With a key (Idempotency-Key or a verified webhook-id), an earlier
   identical request's final response is the answer: its 202, or a synchronous call's
   200. The key's record is the one the synchronous path uses, so one key gets one
   record across routes (another route is a different request: 409/422) and across
   synchronous and background calls. Nothing is validated for a replay: the thread may
   have moved on since, because of the very run being replayed. An earlier accept that
   failed (its run marked ``accept_failed``) is no answer: its key is released and the
   retry is accepted afresh, so a 202 always names a run that runs.
2. **Validate**, through the caller's ``validate`` (the turn factory's runner), and check
   the callback address: everything a synchronous call would refuse is refused here.
3. **Key, record, order, message.** The key's record stores the 202 (create-only), then
   the run's record is created (create-only), then a thread turn is listed in its
   thread's order, and only then is the queue message sent. The message goes last so
   that whatever handles it finds the record and the entry already written: a drain
   (on any instance) can only meet an entry its accept has finished writing, so no
   late append can put back an entry a drain has already popped (every append is
   followed by a drain that reaches it: the message sent after it, or the appending
   drain's own loop). A failure part-way is undone (``_undo``): the record marked
   ``accept_failed``, the entry removed, the key released; unless a drain of the thread
   met the entry and started the run meanwhile, and then the run stands and the answer
   is its 202. A keyed retry completes whatever the first accept did not (``_heal``): the
   same run, never a second one; it marks the run ``replayed`` before answering 202, so
   a first accept still under way that fails leaves that run to run.

Run IDs are random, never derived from what a caller sent, so a run cannot be found
or guessed from its key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..base.cancel_safe import finish_even_if_cancelled
from ..base.errors import RequestInProgress, ResumeError
from ..core.idempotency import IdempotencyStore, StoredResponse
from ..storage.blob_records import RecordConflict
from ..storage.record_store import Stored
from . import records as rr
from .messages import RunMessage
from .order import ThreadOrder
from .records import RunError, RunRecord, RunRecords

logger = logging.getLogger(__name__)
# A keyed retry recreates a run whose record is missing only this soon after the key was
# stored: an accept that died half-way is retried within this; an older missing record
# was deleted on purpose (its thread was deleted, which deletes the key's record too).
HEAL_SECONDS = 3600.0
ACCEPT_FAILED = RunError("accept_failed", "The run could not be queued; nothing ran. Send the request again.")
# A key whose stored accept keeps failing under concurrent retries: give up after this many.
KEY_ROUNDS = 3


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
    """A callback address, checked (the callback's delivery state is a record of its own).

    ``format`` names who renders its payload (None: the library's ``run.completed``; see
    ``callbacks.Render``) and ``params`` what that renderer needs; both rest in the run's record."""

    url: str
    format: str | None = None
    params: Mapping[str, str] = field(default_factory=dict)


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
            if earlier is not None and (healed := await self._heal(request, earlier, callback)) is not None:
                return healed
        await validate()
        checked = await callback()
        run_id, created_at = uuid.uuid4().hex, time.time()
        accepted = render(run_id, created_at)
        if dedupe is not None:
            healed = await self._store_key(request, dedupe, StoredResponse(202, accepted, run_id), callback)
            if healed is not None:  # an identical request got there between the peek and now
                return healed
        record = _record(request, run_id, created_at, accepted, checked)
        await self._queue_run(record, undo_key=dedupe)
        return Accepted(202, accepted, run_id)

    async def _store_key(
        self,
        request: AcceptRequest,
        dedupe: Dedupe,
        response: StoredResponse,
        callback: Callable[[], Awaitable[Callback | None]],
    ) -> Accepted | None:
        """Store the 202 under the key: None once it is stored (the run is ours to create),
        or the earlier identical accept's answer. An earlier accept that failed releases
        the key (``_heal``), and ours is stored in its place."""
        keys = self._require_keys()
        for _ in range(KEY_ROUNDS):
            earlier = await keys.accept_once(
                dedupe.key, request.fingerprint, response, kind=dedupe.kind, thread_id=request.thread_id
            )
            if earlier is None:
                return None
            healed = await self._heal(request, earlier, callback)
            if healed is not None:
                return healed
        raise RequestInProgress("The Idempotency-Key is contended; retry later.")

    def _require_keys(self) -> IdempotencyStore:
        if self._keys is None:
            raise TypeError("a keyed accept needs the IdempotencyStore")
        return self._keys

    async def _queue_run(self, record: RunRecord, *, undo_key: Dedupe | None) -> None:
        """Record, entry, message, in that order (see the module's docstring)."""
        created: Stored[RunRecord] | None = None
        try:
            try:
                created = await self._records.create(record)
            except RecordConflict:  # a keyed retry healing this run got there first
                created = await self._records.get(record.run_id)
            listed = None
            if record.thread_id is not None:
                listed = await self._order.append(record.thread_id, record.run_id)
            await self._queue.enqueue(RunMessage.listed(record.run_id, listed).text())
        except BaseException as exc:
            went_ahead = await finish_even_if_cancelled(self._undo(record, created, undo_key))
            if not went_ahead or not isinstance(exc, Exception):
                raise

    async def _undo(self, record: RunRecord, created: Stored[RunRecord] | None, key: Dedupe | None) -> bool:
        """After a failed accept: nothing of it may run later, unnoticed by the caller.

        Best effort (storage is likely what failed): a run that has a record is marked
        failed (``accept_failed``: its entry, if a drain meets it, is popped as finished)
        and its entry removed; the key is released, so the caller's retry is judged
        afresh. Not so when someone else has answered for the run meanwhile: a keyed
        retry told 202 (``replayed``; the run stays queued, and the next retry completes
        it), or a drain of its thread that met its entry and started it. True in that
        last case: the run went ahead and the accept stands (it needs no message of its
        own: that drain, or its message's redelivery, works it).
        """
        with contextlib.suppress(ResumeError):
            if created is not None:

                def failed(current: RunRecord | None) -> RunRecord | None:
                    if current is None or current.status != rr.QUEUED or current.replayed:
                        return None
                    return current.finished(rr.FAILED, error=ACCEPT_FAILED)

                after = await self._records.update(record.run_id, failed, current=created)
                if after is not None and not _accept_failed(after.value):
                    return after.value.status != rr.QUEUED
                if record.thread_id is not None:
                    await self._order.remove(record.thread_id, record.run_id)
            if key is not None and self._keys is not None:
                await self._keys.forget_accept(key.key, key.kind, record.run_id)
        return False

    async def _heal(
        self, request: AcceptRequest, earlier: StoredResponse, callback: Callable[[], Awaitable[Callback | None]]
    ) -> Accepted | None:
        """A retry of an accepted request: its first answer again, byte for byte, after
        completing whatever that accept did not (a missing record, recently accepted, is
        created; a queued run is listed and sent again: a duplicate message is harmless).

        The run is marked ``replayed`` (compare-and-swap) before the 202 goes out, so the
        first accept, should it still be under way and fail, leaves the run to run. None
        when that accept failed first (its run is ``accept_failed``, so it never runs):
        the key is released now (``StorageUnavailable`` if it cannot be: the retry gets
        the failure) and the request is to be accepted afresh, never answered 202 for a
        run that does not run."""
        run_id = earlier.run_id
        replay = Accepted(earlier.status, earlier.body, run_id, replayed=True)
        if run_id is None:  # a synchronous call's response
            return replay
        found = await self._records.get(run_id)
        if found is None:
            if time.time() - (earlier.stored_at or 0.0) >= HEAL_SECONDS:
                return replay  # deleted on purpose (see HEAL_SECONDS)
            record = _record(request, run_id, earlier.stored_at or time.time(), earlier.body, await callback())
            try:
                found = await self._records.create(dataclasses.replace(record, replayed=True))
            except RecordConflict:  # the first accept created it meanwhile
                found = await self._records.get(run_id)
        if found is not None:
            found = await self._records.update(run_id, _mark_replayed, current=found)
        if found is None:
            return replay
        if _accept_failed(found.value):
            dedupe = request.dedupe
            if dedupe is None:  # only a key finds an earlier accept
                raise TypeError("a replay needs the request's key")
            await self._require_keys().forget_accept(dedupe.key, dedupe.kind, run_id)
            return None
        if found.value.status == rr.QUEUED:
            listed = None
            if found.value.thread_id is not None:
                listed = await self._order.append(found.value.thread_id, run_id)
            await self._queue.enqueue(RunMessage.listed(run_id, listed).text())
        return replay


def _mark_replayed(current: RunRecord | None) -> RunRecord | None:
    if current is None or current.status != rr.QUEUED or current.replayed:
        return None
    return dataclasses.replace(current, replayed=True)


def _accept_failed(record: RunRecord) -> bool:
    """Whether the run is one whose accept failed (and so never runs)."""
    return record.status == rr.FAILED and record.error is not None and record.error.code == ACCEPT_FAILED.code


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
        callback_format=None if callback is None else callback.format,
        callback_params={} if callback is None else dict(callback.params),
        origin=request.origin,
    )
