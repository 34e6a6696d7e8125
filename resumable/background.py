"""Background runs: execute a queued run once, whatever the queue and the instances do.

A queue delivers each message at least once and instances crash, so ``BackgroundRuns``
makes every delivery safe to act on:

* **Claim** by compare-and-swap on the run record: of two deliveries at once, one
  wins and the other finds a live lease and leaves (the lease holder's own message
  comes back if it dies). A lease not renewed by its deadline is taken over.
* **Commit once.** Before an attempt commits, it writes what it is about to commit
  into the record (CAS on its lease, so an attempt that lost its lease cannot). The
  commit itself is create-only or compare-and-swap: a run on a thread moves the
  thread's pointer from the head it read, and a run without a thread saves its
  checkpoint under an ID derived from the run ID. Any later attempt first checks
  whether an earlier one committed, and if so reports that result instead of running.
* **Order per thread.** Thread turns are worked front-first from ``ThreadOrder``.
* **Cancel.** An attempt watches its record every ``WATCH_SECONDS``; a cancel request
  (or a lost lease) stops the run, and the commit step refuses to commit after one.

The run itself is the same ``RunOwner`` the HTTP path uses, streaming its events into
the run's event log for joiners.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Protocol

from azure.storage.blob.aio import ContainerClient
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from . import run_records as rr
from .cancel_safe import finish_even_if_cancelled
from .errors import (
    AlreadyCommitted,
    CheckpointNotFound,
    ResumeError,
    RunCancelled,
    RunTakenOver,
    ThreadBusy,
)
from .event_pump import IdleTick
from .record_store import RecordContended, Stored
from .run_events import EventWriter
from .run_owner import RunOwner
from .run_records import RunRecord, RunRecords
from .runs import Runner, RunRequest, RunService
from .thread_order import ThreadOrder
from .tracing import tracer

logger = logging.getLogger(__name__)

LEASE_SECONDS = 60.0
RENEW_SECONDS = 15.0
WATCH_SECONDS = 1.0
# Attempts a run gets (crashed instances, or a thread turn that lost a race to a
# synchronous turn) before it fails with ``attempts_exhausted``.
MAX_ATTEMPTS = 5
# A message can arrive before its record is visible (the record is written right
# after the enqueue); wait this long before handing the message back to the queue.
RECORD_WAIT_SECONDS = 2.0
# A pending entry whose record never appeared (the accept failed after appending).
ORPHAN_ENTRY_SECONDS = 120.0

# Builds the run's turn (its request and runner) from its record: the adapter's turn
# factory, the one the synchronous route uses (the library keeps no knowledge of bodies).
RequestParser = Callable[[RunRecord], "TurnLike"]


class TurnLike(Protocol):
    @property
    def request(self) -> RunRequest: ...

    @property
    def runner(self) -> Runner: ...


# Sends (run ID, delay in seconds) to the run queue again.
Requeue = Callable[[str, int], Awaitable[None]]
# Told about every finished run this instance sees (again after a crash: idempotent).
Finished = Callable[[Stored[RunRecord]], Awaitable[None]]
_EXHAUSTED = rr.RunError(
    "delivery_attempts_exhausted",
    "The run's queue message was delivered the maximum number of times; nothing was committed.",
)
_ATTEMPTS_EXHAUSTED = rr.RunError(
    "attempts_exhausted", f"The run did not finish in {MAX_ATTEMPTS} attempts; nothing was committed."
)


class RecordNotReady(Exception):
    """The message's run record is not visible yet; the delivery should be retried."""


def error_of(error: BaseException | None) -> rr.RunError:
    if isinstance(error, ResumeError) or hasattr(error, "message"):
        return rr.RunError(str(getattr(error, "code", "internal_error")), str(getattr(error, "message", "")))
    return rr.RunError("internal_error", "The background run failed; nothing was committed.")


async def committed_body(service: RunService, record: RunRecord) -> bytes | None:
    """The response of an attempt of this run that committed, if one did."""
    for intent in record.commits:
        if record.thread_id is not None:
            if await service.is_committed(intent.checkpoint_id, record.thread_id):
                return intent.body
            continue
        # A run without a thread saves under one derived ID: the attempt whose
        # checkpoint is there (matched by its timestamp) is the one that committed.
        try:
            info = await service.store.get_info(intent.checkpoint_id)
        except CheckpointNotFound:
            continue
        if info.timestamp == intent.stamp:
            return intent.body
    return None


class RunLease:
    """One attempt's hold on a run: the claim ``RunOwner`` settles, with a watcher."""

    def __init__(self, records: RunRecords, service: RunService, stored: Stored[RunRecord], token: str) -> None:
        self._records = records
        self._service = service
        self.stored = stored
        self._token = token
        self._lock = asyncio.Lock()
        self._watcher: asyncio.Task[None] | None = None
        self._stop: Callable[[], Any] = lambda: None
        self.before_finish: Callable[[], Awaitable[None]] | None = None
        self.cancelled = False
        self.lost = False
        self.retry = False  # the attempt lost a thread race: run again under this lease
        self.settling = False
        self.settled = asyncio.Event()

    @property
    def record(self) -> RunRecord:
        return self.stored.value

    def stop_with(self, stop: Callable[[], Any]) -> None:
        self._stop = stop

    def start_renewing(self) -> None:
        self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            async with self._lock:
                try:
                    current = await self._records.get(self.record.run_id)
                    if current is None or current.value.holder() != self._token:
                        self.lost = True
                    else:
                        self.stored = current
                        self.cancelled = current.value.cancel_requested
                        if not self.cancelled and time.monotonic() - renewed >= RENEW_SECONDS:
                            await self._write(
                                lambda r: replace(r, lease=rr.Lease(self._token, time.time() + LEASE_SECONDS))
                            )
                            renewed = time.monotonic()
                except RunTakenOver:
                    self.lost = True
                except ResumeError:
                    logger.warning("Could not check a background run's record; will try again")
                    continue
            if self.lost or self.cancelled:
                logger.info("Stopping background run %s (%s)", self.record.run_id, "lost" if self.lost else "cancel")
                self._stop()
                return

    async def _stop_watching(self) -> None:
        if self._watcher is not None and self._watcher is not asyncio.current_task():
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher

    async def _write(self, change: Callable[[RunRecord], RunRecord | None]) -> Stored[RunRecord] | None:
        """Apply ``change`` to the record while this attempt holds the lease.

        ``change`` sees the record as it is now (a cancel request included); a different
        lease token means the run was taken over (``RunTakenOver``).
        """

        def held(record: RunRecord | None) -> RunRecord | None:
            if record is None:
                raise RunTakenOver("The run's record is gone.")
            if record.holder() != self._token:
                raise RunTakenOver("This attempt's lease was taken over; it commits nothing.")
            return change(record)

        try:
            written = await self._records.update(self.record.run_id, held, current=self.stored)
        except RunTakenOver:
            self.lost = True
            raise
        except RecordContended:
            raise RunTakenOver("The run's record is contended; this attempt stops.") from None
        if written is not None:
            self.stored = written
        return written

    async def before_commit(self, checkpoint_id: str, thread_id: str | None, body: bytes, *, stamp: str = "") -> None:
        """Refuse to commit after a cancel or a lost lease, or when an earlier attempt
        committed; otherwise record what is about to be committed."""
        async with self._lock:
            earlier = await committed_body(self._service, self.record)
            if earlier is not None:
                raise AlreadyCommitted(earlier)

            def add_commit(record: RunRecord) -> RunRecord:
                if record.cancel_requested:
                    self.cancelled = True
                    raise RunCancelled("The run was cancelled; nothing was committed.")
                intent = rr.CommitIntent(self._token, checkpoint_id, stamp, body, time.time())
                others = tuple(c for c in record.commits if c.token != self._token)
                return replace(record, commits=(*others, intent))

            await self._write(add_commit)

    async def succeeded(self, body: bytes) -> None:
        self.settling = True
        await finish_even_if_cancelled(self._settle(rr.SUCCEEDED, result=body))

    async def failed(self, error: BaseException | None = None) -> None:
        self.settling = True
        await finish_even_if_cancelled(self._settle_failure(error))

    async def _settle_failure(self, error: BaseException | None) -> None:
        if isinstance(error, AlreadyCommitted):
            await self._settle(rr.SUCCEEDED, result=error.body)
            return
        try:
            earlier = await committed_body(self._service, self.record)
        except ResumeError:
            earlier = None  # cannot tell: leave the record for the next delivery to settle
            await self._settle(None)
            return
        if earlier is not None:  # failed after the commit point (a lost answer): it did commit
            await self._settle(rr.SUCCEEDED, result=earlier)
        elif isinstance(error, RunTakenOver) or self.lost:
            await self._settle(None)
        elif self.cancelled or isinstance(error, RunCancelled):
            await self._settle(rr.CANCELLED, error=rr.CANCELLED_ERROR)
        elif getattr(error, "code", None) == ThreadBusy.code and self.record.thread_id is not None:
            self.retry = True
            await self._settle(None)
        else:
            await self._settle(rr.FAILED, error=error_of(error))

    async def _settle(self, status: str | None, **outcome: Any) -> None:
        """Write the outcome (``status`` None: write nothing), then stop watching."""
        try:
            await self._stop_watching()
            if status is None:
                return
            if self.before_finish is not None:
                await self.before_finish()
            async with self._lock:
                await self._write(lambda record: record.finished(status, **outcome))
        except ResumeError as exc:
            logger.warning("Could not record a background run's outcome (%s); the next delivery will", exc.code)
        finally:
            self.settled.set()


class BackgroundRuns:
    """Processes run-queue messages: claims, runs and settles background runs."""

    def __init__(
        self,
        container: ContainerClient,
        service: RunService,
        parse: RequestParser,
        requeue: Requeue,
        *,
        on_finished: Finished | None = None,
    ) -> None:
        self._on_finished = on_finished
        self._container = container
        self.records = RunRecords(container)
        self.order = ThreadOrder(container)
        self._service = service
        self._parse = parse
        self._requeue = requeue

    async def handle(self, run_id: str) -> None:
        """One delivery of ``run_id``. Raises only to have the queue deliver it again."""
        stored = await self._wait_for_record(run_id)
        record = stored.value
        if record.terminal:
            await self._finished(stored)  # a redelivery after a crash that followed the outcome
        elif record.thread_id is not None:
            await self._drain(record.thread_id, stored)
        else:
            await self._run(stored, run_id)

    async def _finished(self, stored: Stored[RunRecord] | None) -> None:
        if stored is not None and stored.value.terminal and self._on_finished is not None:
            await self._on_finished(stored)

    async def handle_poisoned(self, run_id: str) -> None:
        """A message that used up its deliveries: the run fails, unless it committed or
        is still running under a live lease (then a delayed message keeps watch)."""
        stored = await self.records.get(run_id)
        for _ in range(3):  # again only if an attempt wrote a commit intent meanwhile
            if stored is None or stored.value.terminal:
                return
            if stored.value.lease_live(time.time()):
                await self._watch_later(stored.value, run_id)
                return
            checked = stored.value.commits
            earlier = await committed_body(self._service, stored.value)

            def poisoned(record: RunRecord | None, checked: Any = checked, earlier: Any = earlier) -> Any:
                if record is None or record.terminal or record.lease_live(time.time()) or record.commits != checked:
                    return None
                if earlier is not None:
                    return record.finished(rr.SUCCEEDED, result=earlier)
                return record.finished(rr.FAILED, error=_EXHAUSTED)

            stored = await self.records.update(run_id, poisoned, current=stored)
            if stored is not None and stored.value.terminal:
                await self._finished(stored)
                return

    async def _watch_later(self, holder: RunRecord, run_id: str) -> None:
        """Another delivery holds the run: check again once its lease could have lapsed,
        so a holder that dies without its message coming back cannot strand the run."""
        until = holder.lease.until if holder.lease is not None else time.time()
        await self._requeue(run_id, max(1, int(until - time.time()) + 1))

    async def _wait_for_record(self, run_id: str) -> Stored[RunRecord]:
        deadline = time.monotonic() + RECORD_WAIT_SECONDS
        while True:
            stored = await self.records.get(run_id)
            if stored is not None:
                return stored
            if time.monotonic() > deadline:
                raise RecordNotReady(run_id)
            await asyncio.sleep(0.1)

    async def _drain(self, thread_id: str, mine: Stored[RunRecord]) -> None:
        """Work the thread's pending turns front-first until none is left.

        Stops early when another delivery holds the front (it drains on; a delayed
        message for ``run_id`` keeps watch in case it dies).
        """
        run_id = mine.value.run_id
        if not mine.value.terminal and not mine.value.lease_live(time.time()):
            # Listed at accept; appending again is a no-op, and lists a run whose accept
            # failed between creating its record and listing it.
            await self.order.append(thread_id, run_id)
        while True:
            pending = await self.order.pending(thread_id)
            if not pending:
                return
            front_id, appended_at = pending[0]
            front = mine if front_id == run_id else await self.records.get(front_id)
            if front is None:
                if time.time() - appended_at < ORPHAN_ENTRY_SECONDS:
                    raise RecordNotReady(front_id)  # its accept may still be writing it
                await self.order.remove(thread_id, front_id)
                continue
            if not front.value.terminal:
                await self._run(front, run_id)
                front = await self.records.get(front_id)
                if front is None or not front.value.terminal:
                    return
            await self._finished(front)
            await self.order.remove(thread_id, front_id)
            mine = await self.records.get(run_id) or mine

    async def _run(self, stored: Stored[RunRecord], delivered: str) -> None:
        """Claim the run and run attempts under the lease until it settles.

        ``delivered`` is the run ID of the message being handled (for a thread, maybe
        another turn's): it is the one re-sent to keep watch.
        """
        held: str | None = None
        run_id = stored.value.run_id
        while True:
            claimed = await self._claim(stored, held)
            if claimed is None:
                current = await self.records.get(run_id)
                if current is not None and current.value.lease_live(time.time()):
                    await self._watch_later(current.value, delivered)
                elif stored.value.thread_id is None:
                    await self._finished(current)
                return
            stored, token = claimed
            lease = await self._attempt(stored, token)
            if lease.retry:
                stored, held = lease.stored, token
                continue
            if not lease.record.terminal and not lease.lost:
                # The outcome could not be written: hand the message back; the next
                # delivery settles the run from its record once the lease lapses.
                raise RecordNotReady(run_id)
            if lease.record.thread_id is None:  # a thread's turns are reported as the drain pops them
                await self._finished(lease.stored)
            return

    async def _claim(self, stored: Stored[RunRecord], held: str | None = None) -> tuple[Stored[RunRecord], str] | None:
        """Take the run (``held``: the token of this delivery's own previous attempt)."""
        token = uuid.uuid4().hex
        current: Stored[RunRecord] | None = stored
        for _ in range(3):  # again only if an attempt wrote a commit intent meanwhile
            if current is None:
                return None
            checked = current.value.commits
            earlier = await committed_body(self._service, current.value)

            def claim(record: RunRecord | None, checked: Any = checked, earlier: Any = earlier) -> Any:
                held_by_another = record is not None and record.lease_live(time.time()) and record.holder() != held
                if record is None or record.terminal or held_by_another or record.commits != checked:
                    return None  # not this delivery's to take (changed commits: checked again below)
                if earlier is not None:
                    return record.finished(rr.SUCCEEDED, result=earlier)
                if record.cancel_requested:
                    return record.finished(rr.CANCELLED, error=rr.CANCELLED_ERROR)
                if record.attempts >= MAX_ATTEMPTS:
                    return record.finished(rr.FAILED, error=_ATTEMPTS_EXHAUSTED)
                return replace(
                    record,
                    status=rr.RUNNING,
                    attempts=record.attempts + 1,
                    lease=rr.Lease(token, time.time() + LEASE_SECONDS),
                    started_at=record.started_at or time.time(),
                )

            try:
                current = await self.records.update(stored.value.run_id, claim, current=current)
            except RecordContended:
                return None
            if current is None or current.value.terminal:
                return None
            if current.value.holder() == token:
                return current, token
            if current.value.commits == checked:
                return None  # held by another attempt
        return None

    async def _attempt(self, stored: Stored[RunRecord], token: str) -> RunLease:
        record = stored.value
        lease = RunLease(self.records, self._service, stored, token)
        writer = EventWriter(self._container, record.run_id, record.attempts)
        lease.before_finish = writer.flush
        with _run_span(record) as span:
            try:
                turn = self._parse(record)
            except ResumeError as exc:
                await lease.failed(exc)
                return lease
            try:
                await writer.open()
            except ResumeError:
                await self._release(lease.stored)
                raise
            owner = RunOwner(turn.runner, turn.request, claim=lease)
            task = asyncio.get_running_loop().create_task(self._consume(owner, writer, lease))
            lease.stop_with(task.cancel)
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise  # this delivery is cancelled; the run goes on to settle
            finally:
                # The run and its settling finish even if this delivery is cancelled.
                await finish_even_if_cancelled(_settled(task, lease, writer))
            status = lease.record.status
            span.set_attribute("run.status", status)
            if status == rr.FAILED and lease.record.error is not None:
                span.set_status(Status(StatusCode.ERROR, lease.record.error.code))
        return lease

    async def _release(self, stored: Stored[RunRecord]) -> None:
        """Give up a claim before the run started, so the next delivery can take it at once."""
        token = stored.value.holder()

        def released(record: RunRecord | None) -> RunRecord | None:
            if record is None or record.lease is None or record.lease.token != token:
                return None
            return replace(record, lease=rr.Lease(record.lease.token, 0))

        with contextlib.suppress(ResumeError):
            await self.records.update(stored.value.run_id, released, current=stored)

    async def _consume(self, owner: RunOwner, writer: EventWriter, lease: RunLease) -> None:
        """Log the run's events; the last one is written from the settled record, so a
        joiner's final event always agrees with the run's status."""
        try:
            events = await owner.stream(keepalive_seconds=3600)
        except ResumeError:
            pass
        else:
            async for item in events:
                if not isinstance(item, IdleTick) and item[0] not in ("done", "error"):
                    writer.add(*item)
        await lease.settled.wait()
        final = terminal_event(lease.record)
        if final is not None and not lease.retry:
            writer.add(*final)


def terminal_event(record: RunRecord) -> tuple[str, dict[str, Any]] | None:
    """The event a finished run's stream ends with: ``done``, ``error`` or ``cancelled``."""
    if record.status == rr.SUCCEEDED:
        return "done", record.status_json()["result"]
    if record.status == rr.FAILED:
        return "error", {"error": None if record.error is None else record.error.to_json()}
    if record.status == rr.CANCELLED:
        return "cancelled", {"run_id": record.run_id, "status": rr.CANCELLED}
    return None


async def _settled(task: asyncio.Task[None], lease: RunLease, writer: EventWriter) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        await task
    if not lease.settling:  # stopped before the run's owner could settle it
        await lease.failed(asyncio.CancelledError())
    await lease.settled.wait()
    await writer.close()


@contextlib.contextmanager
def _run_span(record: RunRecord) -> Any:
    """The attempt's span: a new trace linked to the request that accepted the run."""
    accepted = trace.get_current_span(propagate.extract(dict(record.trace))).get_span_context()
    links = [Link(accepted)] if accepted.is_valid else []
    attributes = {"run_id": record.run_id, "run.attempt": record.attempts}
    if record.thread_id:
        attributes["thread_id"] = record.thread_id
    with tracer.start_as_current_span(
        "background run", kind=SpanKind.CONSUMER, links=links, attributes=attributes
    ) as span:
        yield span
