"""Background execution: what one delivery of a run's queue message does.

``BackgroundRuns.handle`` reads the run's record and either drains its thread (a thread
turn, finished or not: ``ThreadDrain``), reports a run that already finished, or runs it: claim the lease (a
compare-and-swap decided on the record as read, ``RunRecords.decide``), run one attempt
under it (``RunLease``), and repeat only when a thread turn lost a race to a synchronous
turn. A message used up by the queue is settled by ``handle_poisoned``.

An attempt is one ``asyncio.TaskGroup``: the run itself (``RunOwner.drive``, in a task of
its own that the lease's watcher can cancel), the watcher (started by the owner through
the ``Claim`` protocol) and the event log's flusher. Nothing of it outlives the attempt:
the group waits for every task, also when the delivery is cancelled, and every failure
below the library's boundary settles the run with a documented code.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Protocol

from azure.storage.blob.aio import ContainerClient
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from ..base.boundary import library_error
from ..base.errors import ResumeError
from ..base.tracing import tracer
from ..core.claim import TaskOwner
from ..core.run_owner import RunOwner
from ..core.runs import Runner, RunRequest, RunService
from ..storage.record_store import Stored
from .commit_check import CommitCheck, may_still_land
from .drain import RecordNotReady, ThreadDrain
from .events import EventWriter
from .lease import LEASE_SECONDS, Ending, LeaseState, RunLease
from .order import ThreadOrder
from .progress import RunProgress, delete_progress
from .records import RunRecords, lease_left, lease_live
from .schema import CANCELLED, CANCELLED_ERROR, FAILED, RUNNING, SUCCEEDED, Lease, RunError, RunRecord

logger = logging.getLogger(__name__)

# Attempts a run gets (crashed instances, or a thread turn that lost a race to a
# synchronous turn) before it fails with ``attempts_exhausted``.
MAX_ATTEMPTS = 5
# A message can arrive before its record is visible (the record is written right
# after the enqueue); wait this long before handing the message back to the queue.
RECORD_WAIT_SECONDS = 2.0


class TurnLike(Protocol):
    """A run's request and the runner that runs it (the adapter's turn factory builds it)."""

    @property
    def request(self) -> RunRequest: ...

    @property
    def runner(self) -> Runner: ...


# Builds the run's turn from its record: the adapter's turn factory, the one the
# synchronous route uses (the library keeps no knowledge of request bodies).
RequestParser = Callable[[RunRecord], TurnLike]
# Sends (run ID, delay in seconds) to the run queue again.
Requeue = Callable[[str, int], Awaitable[None]]
# Told about every finished run this instance sees (again after a crash: idempotent).
Finished = Callable[[Stored[RunRecord]], Awaitable[None]]
_EXHAUSTED = RunError(
    "delivery_attempts_exhausted",
    "The run's queue message was delivered the maximum number of times; nothing was committed.",
)
_ATTEMPTS_EXHAUSTED = RunError(
    "attempts_exhausted", f"The run did not finish in {MAX_ATTEMPTS} attempts; nothing was committed."
)
_LOGGED = frozenset({"done", "error"})  # a run's last event is written from its settled record


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
        budget_seconds: float | None = None,
    ) -> None:
        """``budget_seconds``: how long one invocation (this object: one per delivery, counted
        from its construction, so every turn a drain runs shares it) runs ``superstep`` turns before it
        hands the run on at a superstep boundary (None: never)."""
        self._deadline = None if budget_seconds is None else time.monotonic() + budget_seconds
        self._on_finished = on_finished
        self._container = container
        self.records = RunRecords(container)
        self.order = ThreadOrder(container)
        self._service = service
        self._check = CommitCheck(service.ledger)
        self._parse = parse
        self._requeue = requeue
        self._drain = ThreadDrain(
            self.records, self.order, self._run, self._finished, met=lambda stored: self._sweep_progress(stored.value)
        )

    async def handle(self, run_id: str, *, alone: str | None = None) -> None:
        """One delivery of ``run_id``. Raises only to have the queue deliver it again.
        ``alone``: the message's pending-list ETag (``RunMessage``), if it carries one."""
        stored = await self._wait_for_record(run_id)
        record = stored.value
        if record.thread_id is not None:
            # Finished too (cancelled while queued, a redelivery after a crash): the drain
            # pops its entry and reports it, so no entry outlives its run.
            await self._drain.drain(record.thread_id, stored, alone=alone)
        elif record.terminal:  # a redelivery after a crash that followed the outcome
            await self._sweep_progress(record)
            await self._finished(stored)
        else:
            await self._run(stored, run_id)

    async def handle_poisoned(self, run_id: str) -> None:
        """A message that used up its deliveries: the run fails, unless it committed, is
        still held under a live lease, or may still commit (then a delayed message keeps watch)."""
        stored = await self.records.get(run_id)
        if stored is None or stored.value.terminal:
            return

        async def decide(current: Stored[RunRecord]) -> RunRecord | None:
            record = current.value
            if record.terminal or lease_live(current):
                return None
            earlier = await self._check.committed_intent(record)
            if earlier is not None:
                return record.finished(SUCCEEDED, result=earlier.body, tail=earlier.tail)
            if may_still_land(current) > 0:
                return None
            return record.finished(FAILED, error=_EXHAUSTED)

        after = await self.records.decide(stored, decide)
        if after is not None and after.value.terminal:
            await self._sweep_progress(after.value)
            await self._finished(after)
            if after.value.thread_id is not None:  # no drain follows a used-up message: pop it here
                await self.order.remove(after.value.thread_id, run_id)
        elif after is not None:
            await self._watch_later(after, run_id)

    async def _finished(self, stored: Stored[RunRecord] | None) -> None:
        if stored is not None and stored.value.terminal and self._on_finished is not None:
            await self._on_finished(stored)

    async def _watch_later(self, stored: Stored[RunRecord], run_id: str) -> None:
        """Someone else holds the run, or an intent may still land: check again once that
        could be over, so a holder that dies without its message coming back strands nothing."""
        wait = max(lease_left(stored), may_still_land(stored), 1.0)
        await self._requeue(run_id, math.ceil(wait))

    async def _wait_for_record(self, run_id: str) -> Stored[RunRecord]:
        deadline = time.monotonic() + RECORD_WAIT_SECONDS
        while True:
            stored = await self.records.get(run_id)
            if stored is not None:
                return stored
            if time.monotonic() > deadline:
                raise RecordNotReady(run_id)
            await asyncio.sleep(0.1)

    async def _run(self, stored: Stored[RunRecord], delivered: str) -> Stored[RunRecord] | None:
        """Claim the run and run attempts under the lease until it settles; the record after.

        ``delivered`` is the run ID of the message being handled (for a thread, maybe
        another turn's): it is the one re-sent to keep watch.
        """
        held: str | None = None
        while True:
            after, token = await self._claim(stored, held)
            if after is None:
                return None
            if token is None:
                if not after.value.terminal:
                    await self._watch_later(after, delivered)
                    return after
                if not stored.value.terminal:  # settled here: an attempt before may have left progress
                    await self._sweep_progress(after.value)
                if after.value.thread_id is None:  # a thread's turns are reported as the drain pops them
                    await self._finished(after)
                return after
            lease = await self._attempt(after, token)
            if lease.ending is Ending.RETRY:
                stored, held = lease.stored, token
                continue
            if lease.ending is Ending.HANDED_ON:
                # A new message, so the next invocation (any instance) goes on from the progress.
                await self._requeue(lease.record.run_id, 0)
                return lease.stored
            if lease.ending is Ending.LEFT:
                # No outcome was written: hand the message back; the next delivery judges
                # the record (at once when the lease was released).
                raise RecordNotReady(lease.record.run_id)
            if lease.record.thread_id is None:
                await self._finished(lease.stored)
            return lease.stored

    async def _claim(self, stored: Stored[RunRecord], held: str | None) -> tuple[Stored[RunRecord] | None, str | None]:
        """Take the run, or settle it when there is nothing left to run. Returns the record
        afterwards and the new lease's token (None: not claimed). ``held``: the token of
        this delivery's own previous attempt."""
        token = uuid.uuid4().hex

        async def decide(current: Stored[RunRecord]) -> RunRecord | None:
            record = current.value
            if record.terminal or (lease_live(current) and record.holder() != held):
                return None
            earlier = await self._check.committed_intent(record)
            if earlier is not None:  # committed by an attempt that stopped before its outcome
                return record.finished(SUCCEEDED, result=earlier.body, tail=earlier.tail)
            ending = record.cancel_requested or record.attempts - record.handoffs >= MAX_ATTEMPTS
            if ending and may_still_land(current) > 0:
                return None  # ending it as not committed must wait until no commit can land
            if record.cancel_requested:
                return record.finished(CANCELLED, error=CANCELLED_ERROR)
            if record.attempts - record.handoffs >= MAX_ATTEMPTS:
                return record.finished(FAILED, error=_ATTEMPTS_EXHAUSTED)
            return replace(
                record,
                status=RUNNING,
                attempts=record.attempts + 1,
                lease=Lease(token, LEASE_SECONDS),
                started_at=record.started_at or time.time(),
            )

        after = await self.records.decide(stored, decide)
        claimed = after is not None and after.value.status == RUNNING and after.value.holder() == token
        return after, token if claimed else None

    async def _attempt(self, stored: Stored[RunRecord], token: str) -> RunLease:
        """One attempt, owned by one task group: the run, its lease's watcher, its log's flusher."""
        record = stored.value
        writer = EventWriter(self._container, record.run_id, record.attempts, thread_id=record.thread_id)
        lease = RunLease(self.records, self._check, stored, token, events=writer)
        progress = RunProgress(self._container, self._service.store.mac, record, writer, deadline=self._deadline)
        lease.progress_saved = lambda: progress.saved
        with _run_span(record) as span:
            try:
                async with asyncio.TaskGroup() as tasks:
                    tasks.create_task(writer.flush_periodically(), name="event log flusher")
                    tasks.create_task(self._drive(record, lease, writer, tasks, progress), name="background run")
            except* Exception as failures:  # below the boundary; the run still settles
                logger.error("A background attempt failed", exc_info=failures)
            if lease.state is not LeaseState.SETTLED:
                await lease.failed(ResumeError("An internal error occurred; nothing was committed."))
            span.set_attribute("run.status", lease.record.status)
            if lease.record.status == FAILED and lease.record.error is not None:
                span.set_status(Status(StatusCode.ERROR, lease.record.error.code))
            if progress.resumed_from is not None:
                span.set_attribute("run.resumed_from_superstep", progress.resumed_from)
        if lease.record.terminal:
            await self._remove_progress(progress, lease.record)
        return lease

    async def _sweep_progress(self, record: RunRecord) -> None:
        """A run ended here without an attempt of this delivery: one that crashed or stalled
        may have left progress (found by listing the run's prefix; never on the happy path)."""
        if record.attempts == 0:
            return
        try:
            await delete_progress(self._container, record.run_id)
        except ResumeError:
            logger.warning("Could not remove an ended run's progress checkpoints; housekeeping will")

    @staticmethod
    async def _remove_progress(progress: RunProgress, record: RunRecord) -> None:
        """A finished run's progress checkpoints go (best effort: housekeeping sweeps what stays)."""
        try:
            await progress.remove(record)
        except ResumeError:
            logger.warning("Could not remove a finished run's progress checkpoints; housekeeping will")

    async def _drive(
        self, record: RunRecord, lease: RunLease, writer: EventWriter, tasks: TaskOwner, progress: RunProgress
    ) -> None:
        try:
            turn = self._parse(record)
            request, runner = replace(turn.request, progress=progress), turn.runner
        except Exception as exc:
            await lease.failed(library_error(exc))
            return

        def log(name: str, data: dict[str, Any]) -> None:
            if name not in _LOGGED:
                writer.add(name, data)

        try:
            await RunOwner(runner, request, claim=lease, tasks=tasks).drive(log)
        finally:
            await writer.close()  # the run is over: its log's flusher ends with it


@contextmanager
def _run_span(record: RunRecord) -> Iterator[Span]:
    """The attempt's span: a new trace linked to the request that accepted the run."""
    accepted = trace.get_current_span(propagate.extract(dict(record.trace))).get_span_context()
    links = [Link(accepted)] if accepted.is_valid else []
    attributes: dict[str, Any] = {"run_id": record.run_id, "run.attempt": record.attempts}
    if record.thread_id:
        attributes["thread_id"] = record.thread_id
    with tracer.start_as_current_span(
        "background run", kind=SpanKind.CONSUMER, links=links, attributes=attributes
    ) as span:
        yield span


__all__ = ["MAX_ATTEMPTS", "RECORD_WAIT_SECONDS", "BackgroundRuns", "RecordNotReady"]
