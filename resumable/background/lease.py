"""One attempt's hold on a background run: the ``Claim`` its ``RunOwner`` settles.

The attempt holds the run record's lease (``Lease``: a token and a duration from the
record's last change, on the storage service's clock). A watcher task, owned by the
attempt's task group, reads the record every ``WATCH_SECONDS``: a cancel request or a
lost lease stops the run, and every ``RENEW_SECONDS`` it renews the lease. The lease's
``state`` says where the attempt is; only one place (``_settle``) decides its outcome:

* ``HELD``: running. A cancel request moves it to ``CANCEL_REQUESTED``, a lease that
  another attempt took to ``LOST``; either stops the run.
* ``COMMITTING``: the commit intent is written (``before_commit``): past the commit point,
  so the run is not stopped any more, and a failure whose commit may still have landed
  (an outage, a cancellation mid-save) is left for the next delivery to judge.
* ``SETTLING`` → ``SETTLED``: the outcome is written (with the events the log did not get)
  or deliberately left; ``ending`` says which.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..base.cancel_safe import finish_even_if_cancelled
from ..base.errors import AlreadyCommitted, ResumeError, RunCancelled, RunTakenOver, ThreadBusy
from ..core.claim import TaskOwner
from ..storage.record_store import RecordContended, Stored
from .commit_check import CommitCheck
from .events import EventWriter
from .records import RunRecords
from .schema import CANCELLED, CANCELLED_ERROR, FAILED, SUCCEEDED, CommitIntent, Lease, RunError, RunRecord

logger = logging.getLogger(__name__)

LEASE_SECONDS = 60.0
RENEW_SECONDS = 15.0
WATCH_SECONDS = 1.0
# Failures after the commit intent that prove nothing was committed by this attempt.
_NOT_COMMITTED = frozenset(
    {ThreadBusy.code, "checkpoint_exists", "checkpoint_too_large", "checkpoint_not_saveable", "cancelled"}
)
# Stops at a superstep boundary of a ``superstep`` turn (``run_progress``): the run goes on.
HANDED_ON, PROGRESS_NOT_SAVED = "handed_on", "progress_not_saved"


class LeaseState(enum.Enum):
    HELD = "held"
    CANCEL_REQUESTED = "cancel_requested"
    LOST = "lost"
    COMMITTING = "committing"
    SETTLING = "settling"
    SETTLED = "settled"


class Ending(enum.Enum):
    OUTCOME = "outcome"  # a terminal outcome is in the record
    LEFT = "left"  # nothing written: the next delivery judges the record
    TAKEN_OVER = "taken_over"  # another attempt holds (or settled) the run: nothing to do
    RETRY = "retry"  # a thread turn lost a race to a synchronous turn: run again
    HANDED_ON = "handed_on"  # stopped at a superstep boundary near the time budget: run on


def error_of(error: BaseException | None) -> RunError:
    if isinstance(error, ResumeError) or hasattr(error, "message"):
        return RunError(str(getattr(error, "code", "internal_error")), str(getattr(error, "message", "")))
    return RunError("internal_error", "The background run failed; nothing was committed.")


def _code(error: BaseException | None) -> str | None:
    code = getattr(error, "code", None)
    return code if isinstance(code, str) else None


class RunLease:
    def __init__(
        self,
        records: RunRecords,
        check: CommitCheck,
        stored: Stored[RunRecord],
        token: str,
        *,
        events: EventWriter | None = None,
    ) -> None:
        self._records = records
        self._check = check
        self.stored = stored
        self._token = token
        self._events = events
        self._lock = asyncio.Lock()
        self._watcher: asyncio.Task[None] | None = None
        self._stop: Callable[[], Any] = lambda: None
        self.state = LeaseState.HELD
        self.ending = Ending.LEFT
        self.settled = asyncio.Event()
        # How many progress checkpoints this attempt saved (``run_progress``), told by its run.
        self.progress_saved: Callable[[], int] = lambda: 0

    @property
    def record(self) -> RunRecord:
        return self.stored.value

    # -- Claim --------------------------------------------------------------------------

    def start(self, tasks: TaskOwner) -> None:
        run = asyncio.current_task()
        self._stop = run.cancel if run is not None else self._stop
        self._watcher = tasks.create_task(self._watch(), name="run lease watcher")

    async def before_commit(self, checkpoint_id: str, thread_id: str | None, body: bytes, *, stamp: str = "") -> None:
        """Refuse to commit after a cancel or a lost lease, or when an earlier attempt
        committed; otherwise write what is about to be committed (the commit point)."""
        async with self._lock:
            if self.state is LeaseState.CANCEL_REQUESTED:
                raise RunCancelled("The run was cancelled; nothing was committed.")
            earlier = await self._check.committed(self.record)
            if earlier is not None:
                raise AlreadyCommitted(earlier)
            tail = await self._events.buffered() if self._events is not None else ()

            def add_intent(record: RunRecord) -> RunRecord:
                if record.cancel_requested:
                    self.state = LeaseState.CANCEL_REQUESTED
                    raise RunCancelled("The run was cancelled; nothing was committed.")
                intent = CommitIntent(self._token, checkpoint_id, stamp, body, time.time(), tail)
                others = tuple(c for c in record.commits if c.token != self._token)
                return replace(record, commits=(*others, intent))

            await self._write(add_intent)
            self.state = LeaseState.COMMITTING

    async def succeeded(self, body: bytes) -> None:
        await finish_even_if_cancelled(self._settle(None, body))

    async def failed(self, error: BaseException | None = None) -> None:
        await finish_even_if_cancelled(self._settle(error, None))

    # -- watching -----------------------------------------------------------------------

    async def _watch(self) -> None:
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            async with self._lock:
                if self.state not in (LeaseState.HELD, LeaseState.COMMITTING):
                    return
                was = self.state
                try:
                    renewed = await self._look(renewed)
                except ResumeError:
                    logger.warning("Could not check a background run's record; will try again")
                    continue
                if was is LeaseState.HELD and self.state in (LeaseState.LOST, LeaseState.CANCEL_REQUESTED):
                    logger.info("Stopping background run %s (%s)", self.record.run_id, self.state.value)
                    self._stop()
                    return

    async def _look(self, renewed: float) -> float:
        """Read the record; note a lost lease or a cancel; renew when due. When renewed."""
        current = await self._records.get(self.record.run_id)
        if current is None or current.value.holder() != self._token:
            self.state = LeaseState.LOST
            return renewed
        self.stored = current
        if current.value.cancel_requested and self.state is LeaseState.HELD:
            self.state = LeaseState.CANCEL_REQUESTED
        elif time.monotonic() - renewed >= RENEW_SECONDS:
            sent = time.monotonic()
            await self._write(lambda record: replace(record, lease=Lease(self._token, LEASE_SECONDS)))
            return sent
        return renewed

    async def _stop_watching(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None and watcher is not asyncio.current_task():
            watcher.cancel()
            await asyncio.wait({watcher})

    async def _write(self, change: Callable[[RunRecord], RunRecord]) -> Stored[RunRecord]:
        """Apply ``change`` to the record as it is now, while this attempt holds the lease."""

        def held(record: RunRecord | None) -> RunRecord:
            if record is None:
                raise RunTakenOver("The run's record is gone.")
            if record.holder() != self._token:
                raise RunTakenOver("This attempt's lease was taken over; it commits nothing.")
            return change(record)

        try:
            written = await self._records.update(self.record.run_id, held, current=self.stored)
        except RunTakenOver:
            if self.state is not LeaseState.SETTLING:
                self.state = LeaseState.LOST
            raise
        except RecordContended:
            raise RunTakenOver("The run's record is contended; this attempt stops.") from None
        if written is None:  # the record went away under an update (never a change of ours)
            raise RunTakenOver("The run's record is gone.")
        self.stored = written
        return written

    # -- settling -----------------------------------------------------------------------

    async def _settle(self, error: BaseException | None, body: bytes | None) -> None:
        """The one place an attempt's outcome is decided and written (or left), once."""
        if self.state in (LeaseState.SETTLING, LeaseState.SETTLED):
            await self.settled.wait()
            return
        was, self.state = self.state, LeaseState.SETTLING
        try:
            await self._stop_watching()
            async with self._lock:
                if body is not None:
                    await self._outcome(SUCCEEDED, result=body)
                else:
                    await self._settle_failure(was, error)
        except Exception:
            logger.exception("Settling a background run failed; the next delivery will")
        finally:
            if self._events is not None:
                await self._events.close()
            self.state = LeaseState.SETTLED
            self.settled.set()

    async def _settle_failure(self, was: LeaseState, error: BaseException | None) -> None:
        if isinstance(error, AlreadyCommitted):
            await self._outcome(SUCCEEDED, result=error.body)
            return
        try:
            earlier = await self._check.committed(self.record)
        except ResumeError:
            await self._leave(release=True)  # cannot tell: the next delivery judges
            return
        code = _code(error)
        if earlier is not None:  # failed after the commit point (a lost answer): it did commit
            await self._outcome(SUCCEEDED, result=earlier)
        elif was is LeaseState.LOST or isinstance(error, RunTakenOver):
            self.ending = Ending.TAKEN_OVER
        elif was is LeaseState.COMMITTING and code not in _NOT_COMMITTED:
            await self._leave(release=True)  # the commit may still land: decided later, on the record
        elif was is LeaseState.CANCEL_REQUESTED or isinstance(error, RunCancelled):
            await self._outcome(CANCELLED, error=CANCELLED_ERROR)
        elif code == HANDED_ON:
            await self._hand_on()
        elif code == PROGRESS_NOT_SAVED:
            await self._leave(release=True)  # the next delivery goes on from the last saved progress
        elif code == ThreadBusy.code and self.record.thread_id is not None:
            await self._retract()  # its pointer move failed for good: the intent can never land
            self.ending = Ending.RETRY
        elif not isinstance(error, Exception) and error is not None:
            await self._leave(release=True)  # this delivery was cancelled: the next one runs it
        else:
            await self._outcome(FAILED, error=error_of(error))

    async def _outcome(self, status: str, *, result: bytes | None = None, error: RunError | None = None) -> None:
        tail = await self._events.take_tail() if self._events is not None else ()
        try:
            await self._write(lambda record: record.finished(status, result=result, error=error, tail=tail))
            self.ending = Ending.OUTCOME
        except RunTakenOver:
            self.ending = Ending.TAKEN_OVER  # whoever holds the run now reports it
        except ResumeError as exc:
            logger.warning("Could not record a background run's outcome (%s); the next delivery will", exc.code)
            if self._events is not None:
                await self._events.append_late(tail)

    async def _retract(self) -> None:
        """Drop this attempt's commit intent (its commit failed for good), so that nothing
        waits for it to land."""
        if any(intent.token == self._token for intent in self.record.commits):
            mine = self._token
            await self._write(
                lambda record: replace(record, commits=tuple(c for c in record.commits if c.token != mine))
            )

    def _progress_from(self, record: RunRecord) -> int:
        return max(record.progress_from, record.attempts) if self.progress_saved() else record.progress_from

    async def _hand_on(self) -> None:
        """Release the run for the next invocation, which goes on from this attempt's progress."""
        try:
            await self._write(
                lambda record: replace(
                    record,
                    lease=Lease(self._token, 0),
                    handoffs=record.handoffs + 1,
                    progress_from=self._progress_from(record),
                )
            )
            self.ending = Ending.HANDED_ON
        except RunTakenOver:
            self.ending = Ending.TAKEN_OVER
        except ResumeError:
            logger.warning("Could not hand a background run on; its lease lapses and the next delivery goes on")

    async def _leave(self, *, release: bool) -> None:
        """Write no outcome. ``release``: let the next delivery take the run at once."""
        if release:
            try:
                await self._write(
                    lambda record: replace(
                        record, lease=Lease(self._token, 0), progress_from=self._progress_from(record)
                    )
                )
            except ResumeError:
                logger.warning("Could not release a background run's lease; it lapses on its own")


__all__ = ["LEASE_SECONDS", "RENEW_SECONDS", "WATCH_SECONDS", "Ending", "LeaseState", "RunLease", "error_of"]
