"""Completion callbacks: scheduling, and the delivery state machine, one attempt per queue
message ``callback.<run_id>``. The POST itself (signing, address checks) is the adapter's
``Sender``; the state lives in ``callback_records``.

    (no record) --schedule(run), run terminal--> pending
    pending --2xx--> delivered;  --410--> stopped
    pending --another status, an error--> pending (next_at = now + delay)
                                          or gave_up (attempts or time used up)
    pending --no signing secret, or its message poisoned--> gave_up (reason recorded)

* **One chain per run.** ``schedule`` is create-only: the scheduler whose create lands
  sends the first message; a concurrent one meets the record and does nothing.
* **Only finished, scheduled runs.** A message is acted on only if a callback record
  exists and the run is terminal: a forged ``callback.<id>`` posts nothing.
* **One POST per attempt where that can be avoided.** A delivery claims the attempt by
  compare-and-swap before it POSTs (the claim's token is its queue message ID, so the
  host's redelivery of that message resumes it). A duplicate meets the claim and comes
  back once it could have lapsed; a claim older than the POST's bound plus a margin (its
  age on the storage service's clock, ``_claim_left``) is a crashed instance's and is
  taken over (its attempt is recorded as ``interrupted``: it may have reached the
  receiver, which deduplicates on ``webhook-id``).
* **Never early, never stuck.** ``next_at`` is written before the next message is sent;
  a message that arrives before it (the host redelivering an attempt whose re-enqueue
  failed) sends itself again for the time left instead of POSTing. A message that used
  up its deliveries gives the callback up, with that reason.
* **Final is final.** Recording an attempt never moves a final outcome: a late answer
  is added to the attempts, and the outcome stays.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from azure.storage.blob.aio import ContainerClient

from ..base import strict_json
from ..base.errors import ServerMisconfigured
from ..storage.blob_records import RecordConflict
from ..storage.record_store import CLOCK_RESOLUTION, Stored
from . import records as rr
from .callback_records import (
    DELIVERED,
    GAVE_UP,
    PENDING,
    STOPPED,
    Attempt,
    CallbackDelivery,
    DeliveryLease,
    callback_store,
)
from .finished_run import FinishedRun, RunReader, run_record_reader

logger = logging.getLogger(__name__)
MESSAGE_PREFIX = "callback."
# The library's bound on one POST (the adapter's own timeout is 10 s; its address check
# comes first), and how long a claim holds: that bound plus a margin for the recording.
SEND_SECONDS = 15.0
CLAIM_SECONDS = SEND_SECONDS + 15.0
# A message this close to ``next_at`` is on time (queue delays are whole seconds).
EARLY_SECONDS = 1.0
# A record this old with no attempt, no claim and no message seen: its scheduler's first
# message was lost (its enqueue failed, and so did undoing the create). Sent again.
UNSENT_SECONDS = 10.0
# A payload over this carries no result, only ``"result_truncated": true``: the receiver
# reads it from GET /api/runs/{id}. Keeps one slow receiver from holding megabytes.
MAX_PAYLOAD_BYTES = 256 * 1024
POISONED = "queue_deliveries_exhausted"

# (url, body, headers) -> (HTTP status, None) or (None, error class); never raises, but
# ``ServerMisconfigured`` when it cannot sign.
Sender = Callable[[str, bytes, dict[str, str]], Awaitable[tuple[int | None, str | None]]]
# (message, delay in seconds) onto the run queue.
Enqueue = Callable[[str, int], Awaitable[None]]
# A finished run -> (body, headers to add): the payload in the format its run names
# (``FinishedRun.callback_format``); raises ``ServerMisconfigured`` for a format it does not
# know. The library's own ``render_payload`` knows only ``run.completed`` (no format).
Render = Callable[[FinishedRun], tuple[bytes, dict[str, str]]]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    schedule: tuple[float, ...] = (5.0, 30.0, 120.0, 600.0, 1800.0, 3600.0, 7200.0)
    max_attempts: int = 20
    max_seconds: float = 86_400.0

    def delay(self, attempts: int, jitter: float) -> float:
        """The wait after ``attempts`` failed attempts (the schedule's last entry repeats)."""
        return self.schedule[min(attempts - 1, len(self.schedule) - 1)] * jitter


def payload(run: FinishedRun) -> bytes:
    body: dict[str, Any] = {"type": "run.completed", "run_id": run.run_id, "status": run.status}
    body["thread_id"] = run.thread_id
    # Who started the run: a receiver acting for a sender (commenting on a GitHub issue, say)
    # checks it, since a thread's name alone is any caller's choice.
    body["origin"] = run.origin
    if run.status == rr.SUCCEEDED:
        body["result"] = run.result
    else:
        body["error"] = run.error
    encoded = strict_json.dumps(body)
    if len(encoded) > MAX_PAYLOAD_BYTES:
        encoded = strict_json.dumps({**body, "result": None, "result_truncated": True})
    return encoded


def render_payload(run: FinishedRun) -> tuple[bytes, dict[str, str]]:
    """The default ``Render``: ``run.completed`` for a run that names no format."""
    if run.callback_format is not None:
        raise ServerMisconfigured()
    return payload(run), {}


class _NotNow(Exception):
    """Not this delivery's turn: come back in ``delay`` seconds (None: never)."""

    def __init__(self, delay: float | None) -> None:
        self.delay = delay


class CallbackDeliveries:
    def __init__(
        self,
        container: ContainerClient,
        enqueue: Enqueue,
        send: Sender,
        policy: RetryPolicy | None = None,
        *,
        runs: RunReader | None = None,
        render: Render = render_payload,
    ) -> None:
        self.records = callback_store(container)
        self._enqueue = enqueue
        self._send = send
        self._render = render
        self._policy = policy or RetryPolicy()
        self._runs = runs or run_record_reader(container)

    async def get(self, run_id: str) -> CallbackDelivery | None:
        stored = await self.records.get(run_id)
        return None if stored is None else stored.value

    async def schedule(self, run: FinishedRun) -> None:
        """A finished run with a callback: create its record, then send the first message."""
        if not run.terminal or not run.callback_url:
            return
        now = time.time()
        state = CallbackDelivery(run.callback_url, run.thread_id, PENDING, (), first_at=now, next_at=now, wait=0.0)
        try:
            created = await self.records.create(run.run_id, state)
        except RecordConflict:  # scheduled already: that scheduler sent the message
            existing = await self.records.get(run.run_id)
            if existing is not None and _unsent(existing, now):
                await self._send_later(run.run_id, 0)
            return
        if await self._runs(run.run_id) is None:
            # Its thread was deleted meanwhile: a DELETE removes run records before callback
            # records, so either it finds this one, or this finds the run gone (nothing stays).
            await self.records.delete(run.run_id, etag=created.etag)
            return
        try:
            await self._send_later(run.run_id, 0)
        except Exception:
            # Undo, so that the next scheduler (this run's redelivery) starts the chain.
            await self.records.delete(run.run_id, etag=created.etag)
            raise

    async def deliver(self, run_id: str, delivery_id: str | None = None) -> None:
        """One delivery of ``callback.<run_id>``: at most one attempt. Raises (storage) to
        have the queue deliver the message again."""
        stored = await self.records.get(run_id)
        if stored is not None and stored.value.final:
            return  # a late duplicate
        run = None if stored is None else await self._runs(run_id)
        if run is None and stored is not None:
            await self.records.delete(run_id, etag=stored.etag)  # its run's thread was deleted
            return
        if run is None or not run.terminal:
            logger.warning("Dropped a callback message for run %s: no callback is scheduled for it", run_id)
            return
        now = time.time()
        token = delivery_id or uuid.uuid4().hex
        try:
            claimed = await self.records.update(run_id, lambda s: self._claimed(s, token, now, stored), current=stored)
        except _NotNow as later:
            if later.delay is not None:
                await self._send_later(run_id, math.ceil(later.delay))
            return
        if claimed is None or claimed.value.claim is None or claimed.value.claim.token != token:
            return  # gave up on the spot (a crashed holder used the last attempt)
        await self._attempt(run_id, run, claimed, token)

    async def settle_poisoned(self, run_id: str) -> None:
        """Its message used up the queue's deliveries: give up rather than stay pending."""

        def gave_up(state: CallbackDelivery | None) -> CallbackDelivery | None:
            if state is None or state.final:
                return None
            return replace(state, outcome=GAVE_UP, reason=POISONED, claim=None)

        settled = await self.records.update(run_id, gave_up)
        if settled is not None and settled.value.reason == POISONED:
            logger.error("Callback for run %s gave up: its queue message was poisoned", run_id)

    def _claimed(
        self, state: CallbackDelivery | None, token: str, now: float, read: Stored[CallbackDelivery] | None
    ) -> CallbackDelivery:
        if state is None or state.final:
            raise _NotNow(None)
        early = _wait_left(state, read, now)
        if early > EARLY_SECONDS:
            raise _NotNow(early)  # early: a redelivery whose re-enqueue failed
        held = state.claim
        if held is not None and held.token != token:
            left = _claim_left(state, read, now)
            if left > 0:
                raise _NotNow(left + 1)  # a duplicate of the attempt being made now
        if held is not None:  # a crashed holder's (or this message's earlier delivery's)
            interrupted = Attempt(held.at, error="interrupted")
            state = self._verdict(replace(state, attempts=(*state.attempts, interrupted), claim=None), None, now, 1.0)
            if state.final:
                return state
        return replace(state, claim=DeliveryLease(token, now, now + CLAIM_SECONDS), wait=0.0)  # due: it runs now

    async def _attempt(self, run_id: str, run: FinishedRun, claimed: Stored[CallbackDelivery], token: str) -> None:
        at = time.time()
        misconfigured = False
        try:
            body, extra = self._render(run)
            # The signature's headers are the sender's own: a format adds headers, never replaces these.
            headers = {**extra, "content-type": "application/json", "webhook-id": f"msg_{run_id}"}
            async with asyncio.timeout(SEND_SECONDS):
                status, error = await self._send(claimed.value.url, body, headers)
        except TimeoutError:
            status, error = None, "timeout"
        except ServerMisconfigured:
            logger.error("Callback for run %s not sent: it cannot be signed (CALLBACK_SECRET) or rendered", run_id)
            status, error, misconfigured = None, "server_misconfigured", True
        attempt = Attempt(at, status, error)
        now, jitter = time.time(), random.uniform(0.9, 1.1)  # noqa: S311 - jitter, not cryptography
        retry_at: list[float] = []

        def recorded(state: CallbackDelivery | None) -> CallbackDelivery | None:
            retry_at.clear()
            if state is None:
                return None  # deleted meanwhile (its thread was)
            mine = state.claim is not None and state.claim.token == token
            added = replace(state, attempts=(*state.attempts, attempt), claim=None if mine else state.claim)
            if added.final:
                return added  # final stays final: the late answer is only recorded
            if misconfigured:
                return replace(added, outcome=GAVE_UP, reason="server_misconfigured")
            after = self._verdict(added, status, now, jitter)
            if not after.final and not mine:
                return added  # taken over meanwhile: the new holder decides what comes next
            if not after.final:
                retry_at.append(after.next_at)
            return after

        written = await self.records.update(run_id, recorded, current=claimed)
        if written is not None and retry_at:
            # ``next_at`` is written first: if this enqueue fails, the host's redelivery
            # of this message arrives early and waits out the rest instead of POSTing.
            await self._send_later(run_id, math.ceil(retry_at[0] - now))

    def _verdict(self, state: CallbackDelivery, status: int | None, now: float, jitter: float) -> CallbackDelivery:
        """The outcome once ``state``'s last attempt got ``status`` (None: no answer)."""
        if status is not None and 200 <= status < 300:
            return replace(state, outcome=DELIVERED)
        if status == 410:
            return replace(state, outcome=STOPPED)
        policy = self._policy
        delay = policy.delay(len(state.attempts), jitter)
        if len(state.attempts) >= policy.max_attempts:
            return replace(state, outcome=GAVE_UP, reason="max_attempts")
        if now - state.first_at + delay > policy.max_seconds:
            return replace(state, outcome=GAVE_UP, reason="max_seconds")
        return replace(state, next_at=now + delay, wait=delay)

    async def _send_later(self, run_id: str, delay: int) -> None:
        await self._enqueue(MESSAGE_PREFIX + run_id, max(0, delay))


def _claim_left(state: CallbackDelivery, read: Stored[CallbackDelivery] | None, now: float) -> float:
    """Seconds another delivery's claim still holds, by the storage service's clock: the
    claim is the record's last change (later writes only clear it), so its age is the
    record's (``service_clock``). Never the holder's ``until`` against this instance's
    clock, unless the answer carried no dates. A state that is not ``read`` (met on a
    conflict's re-read) has no dates: its claim counts as just made."""
    if read is None or read.value is not state:
        return CLAIM_SECONDS + CLOCK_RESOLUTION
    if read.age is None:
        return state.claim.until - now if state.claim is not None else 0.0
    return CLAIM_SECONDS + CLOCK_RESOLUTION - read.age


def _wait_left(state: CallbackDelivery, read: Stored[CallbackDelivery] | None, now: float) -> float:
    """Seconds until the next attempt is due (negative: overdue), by the storage service's
    clock: ``wait`` counts from the write that set it, the record's last change while it is
    pending and unclaimed. A state met on a conflict's re-read, or without ``wait`` or
    dates, leaves only the writer's ``next_at`` against this instance's clock."""
    if state.wait is not None and read is not None and read.value is state and read.age is not None:
        return state.wait - read.age
    return state.next_at - now


def _unsent(stored: Stored[CallbackDelivery], now: float) -> bool:
    state = stored.value
    return (
        not state.final
        and not state.attempts
        and state.claim is None
        and -_wait_left(state, stored, now) > UNSENT_SECONDS
    )
