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
from .run_events import EventWriter
from .run_owner import RunOwner
from .run_records import RecordConflict, RunRecord, RunRecords
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
Finished = Callable[[RunRecord], Awaitable[None]]
_EXHAUSTED = {
    "code": "delivery_attempts_exhausted",
    "message": "The run's queue message was delivered the maximum number of times; nothing was committed.",
}


class RecordNotReady(Exception):
    """The message's run record is not visible yet; the delivery should be retried."""


def error_of(error: BaseException | None) -> dict[str, str]:
    if isinstance(error, ResumeError) or hasattr(error, "message"):
        return {"code": str(getattr(error, "code", "internal_error")), "message": str(getattr(error, "message", ""))}
    return {"code": "internal_error", "message": "The background run failed; nothing was committed."}


async def committed_body(service: RunService, record: RunRecord) -> bytes | None:
    """The response of an attempt of this run that committed, if one did."""
    for entry in record.commits():
        checkpoint_id, thread_id = entry["checkpoint_id"], record.thread_id
        if thread_id is not None:
            if await service.is_committed(checkpoint_id, thread_id):
                return rr.unb64(entry["body"])
            continue
        # A run without a thread saves under one derived ID: the attempt whose
        # checkpoint is there (matched by its timestamp) is the one that committed.
        try:
            info = await service.store.get_info(checkpoint_id)
        except CheckpointNotFound:
            continue
        if info.timestamp == entry["stamp"]:
            return rr.unb64(entry["body"])
    return None


class RunLease:
    """One attempt's hold on a run: the claim ``RunOwner`` settles, with a watcher."""

    def __init__(self, records: RunRecords, service: RunService, record: RunRecord, token: str) -> None:
        self._records = records
        self._service = service
        self.record = record
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
                    if current is None or (current.data.get("lease") or {}).get("token") != self._token:
                        self.lost = True
                    else:
                        self.record = current
                        self.cancelled = bool(current.data.get("cancel_requested"))
                        if not self.cancelled and time.monotonic() - renewed >= RENEW_SECONDS:
                            lease = {"token": self._token, "until": time.time() + LEASE_SECONDS}
                            self.record = await self._records.replace(current, {**current.data, "lease": lease})
                            renewed = time.monotonic()
                except RecordConflict:
                    continue  # changed between read and renew; the next look sees why
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

    async def _write(self, change: Callable[[RunRecord], dict[str, Any] | None]) -> RunRecord | None:
        """CAS ``change`` onto the record while this attempt holds the lease.

        A conflict re-reads: a cancel request is adopted and ``change`` applied again;
        a different lease token means the run was taken over (``RunTakenOver``).
        """
        for _ in range(10):
            if (self.record.data.get("lease") or {}).get("token") != self._token:
                self.lost = True
                raise RunTakenOver("This attempt's lease was taken over; it commits nothing.")
            data = change(self.record)
            if data is None:
                return None
            try:
                self.record = await self._records.replace(self.record, data)
                return self.record
            except RecordConflict:
                current = await self._records.get(self.record.run_id)
                if current is None:
                    raise RunTakenOver("The run's record is gone.") from None
                self.record = current
        raise RunTakenOver("The run's record is contended; this attempt stops.")

    async def before_commit(self, checkpoint_id: str, thread_id: str | None, body: bytes, *, stamp: str = "") -> None:
        """Refuse to commit after a cancel or a lost lease, or when an earlier attempt
        committed; otherwise record what is about to be committed."""
        async with self._lock:
            earlier = await committed_body(self._service, self.record)
            if earlier is not None:
                raise AlreadyCommitted(earlier)

            def add_commit(record: RunRecord) -> dict[str, Any]:
                if record.data.get("cancel_requested"):
                    self.cancelled = True
                    raise RunCancelled("The run was cancelled; nothing was committed.")
                entry = {"checkpoint_id": checkpoint_id, "stamp": stamp, "body": rr.b64(body), "at": time.time()}
                return {**record.data, "commits": {**record.data.get("commits", {}), self._token: entry}}

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
            await self._settle(rr.CANCELLED, error={"code": "cancelled", "message": "The run was cancelled."})
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
                await self._write(lambda record: rr.finished(record.data, status, **outcome))
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
        record = await self._wait_for_record(run_id)
        if record.terminal:
            await self._finished(record)  # a redelivery after a crash that followed the outcome
        elif record.thread_id is not None:
            await self._drain(record.thread_id, run_id)
        else:
            await self._run(record, run_id)

    async def _finished(self, record: RunRecord | None) -> None:
        if record is not None and record.terminal and self._on_finished is not None:
            await self._on_finished(record)

    async def handle_poisoned(self, run_id: str) -> None:
        """A message that used up its deliveries: the run fails, unless it committed or
        is still running under a live lease (then a delayed message keeps watch)."""
        record = await self.records.get(run_id)
        for _ in range(10):
            if record is None or record.terminal:
                return
            if record.lease_live:
                await self._watch_later(record, run_id)
                return
            earlier = await committed_body(self._service, record)
            outcome = (
                rr.finished(record.data, rr.SUCCEEDED, result=earlier)
                if earlier is not None
                else rr.finished(record.data, rr.FAILED, error=_EXHAUSTED)
            )
            try:
                await self._finished(await self.records.replace(record, outcome))
                return
            except RecordConflict:
                record = await self.records.get(run_id)

    async def _watch_later(self, holder: RunRecord, run_id: str) -> None:
        """Another delivery holds the run: check again once its lease could have lapsed,
        so a holder that dies without its message coming back cannot strand the run."""
        until = float((holder.data.get("lease") or {}).get("until", time.time()))
        await self._requeue(run_id, max(1, int(until - time.time()) + 1))

    async def _wait_for_record(self, run_id: str) -> RunRecord:
        deadline = time.monotonic() + RECORD_WAIT_SECONDS
        while True:
            record = await self.records.get(run_id)
            if record is not None:
                return record
            if time.monotonic() > deadline:
                raise RecordNotReady(run_id)
            await asyncio.sleep(0.1)

    async def _drain(self, thread_id: str, run_id: str) -> None:
        """Work the thread's pending turns front-first until none is left.

        Stops early when another delivery holds the front (it drains on; a delayed
        message for ``run_id`` keeps watch in case it dies).
        """
        mine = await self.records.get(run_id)
        if mine is not None and not mine.terminal and not mine.lease_live:
            # Listed at accept; appending again is a no-op, and lists a run whose accept
            # failed between creating its record and listing it.
            await self.order.append(thread_id, run_id)
        while True:
            pending = await self.order.pending(thread_id)
            if not pending:
                return
            front_id, appended_at = pending[0]
            front = await self.records.get(front_id)
            if front is None:
                if time.time() - appended_at < ORPHAN_ENTRY_SECONDS:
                    raise RecordNotReady(front_id)  # its accept may still be writing it
                await self.order.remove(thread_id, front_id)
                continue
            if not front.terminal:
                await self._run(front, run_id)
                front = await self.records.get(front_id)
                if front is None or not front.terminal:
                    return
            await self._finished(front)
            await self.order.remove(thread_id, front_id)

    async def _run(self, record: RunRecord, delivered: str) -> None:
        """Claim ``record`` and run attempts under the lease until it settles.

        ``delivered`` is the run ID of the message being handled (for a thread, maybe
        another turn's): it is the one re-sent to keep watch.
        """
        held: str | None = None
        while True:
            claimed = await self._claim(record, held)
            if claimed is None:
                current = await self.records.get(record.run_id)
                if current is not None and current.lease_live:
                    await self._watch_later(current, delivered)
                elif record.thread_id is None:
                    await self._finished(current)
                return
            record, token = claimed
            lease = await self._attempt(record, token)
            if lease.retry:
                record, held = lease.record, token
                continue
            if not lease.record.terminal and not lease.lost:
                # The outcome could not be written: hand the message back; the next
                # delivery settles the run from its record once the lease lapses.
                raise RecordNotReady(record.run_id)
            if record.thread_id is None:  # a thread's turns are reported as the drain pops them
                await self._finished(lease.record)
            return

    async def _claim(self, record: RunRecord, held: str | None = None) -> tuple[RunRecord, str] | None:
        """Take the run (``held``: the token of this delivery's own previous attempt)."""
        for _ in range(10):
            try:
                holder = (record.data.get("lease") or {}).get("token")
                if record.terminal or (record.lease_live and holder != held):
                    return None
                earlier = await committed_body(self._service, record)
                if earlier is not None:
                    await self.records.replace(record, rr.finished(record.data, rr.SUCCEEDED, result=earlier))
                elif record.data.get("cancel_requested"):
                    cancelled = {"code": "cancelled", "message": "The run was cancelled."}
                    await self.records.replace(record, rr.finished(record.data, rr.CANCELLED, error=cancelled))
                elif record.attempts >= MAX_ATTEMPTS:
                    exhausted = {
                        "code": "attempts_exhausted",
                        "message": f"The run did not finish in {MAX_ATTEMPTS} attempts; nothing was committed.",
                    }
                    await self.records.replace(record, rr.finished(record.data, rr.FAILED, error=exhausted))
                else:
                    token = uuid.uuid4().hex
                    data = {
                        **record.data,
                        "status": rr.RUNNING,
                        "attempts": record.attempts + 1,
                        "lease": {"token": token, "until": time.time() + LEASE_SECONDS},
                        "started_at": record.data.get("started_at") or time.time(),
                    }
                    return await self.records.replace(record, data), token
                return None
            except RecordConflict:
                current = await self.records.get(record.run_id)
                if current is None:
                    return None
                record = current
        return None

    async def _attempt(self, record: RunRecord, token: str) -> RunLease:
        lease = RunLease(self.records, self._service, record, token)
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
                await self._release(lease.record)
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
            if status == rr.FAILED:
                span.set_status(Status(StatusCode.ERROR, str((lease.record.data.get("error") or {}).get("code"))))
        return lease

    async def _release(self, record: RunRecord) -> None:
        """Give up a claim before the run started, so the next delivery can take it at once."""
        with contextlib.suppress(ResumeError, RecordConflict):
            await self.records.replace(record, {**record.data, "lease": {**record.data["lease"], "until": 0}})

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
        return "done", record.to_json()["result"]
    if record.status == rr.FAILED:
        return "error", {"error": record.data.get("error")}
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
    accepted = trace.get_current_span(propagate.extract(record.data.get("trace") or {})).get_span_context()
    links = [Link(accepted)] if accepted.is_valid else []
    attributes = {"run_id": record.run_id, "run.attempt": record.attempts}
    if record.thread_id:
        attributes["thread_id"] = record.thread_id
    with tracer.start_as_current_span(
        "background run", kind=SpanKind.CONSUMER, links=links, attributes=attributes
    ) as span:
        yield span
