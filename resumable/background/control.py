"""A background run seen from outside: read its status (waiting for it, if asked) and
cancel it. The adapter authorizes between ``get`` and what follows, on the run's thread.

A run's callback can be set or removed until it finishes (``change_callback``): the run's
outcome is written by compare-and-swap on the same record, so either the change lands first
and the finished run is scheduled with it, or the run finished first and the change is
refused (``RunFinished``); never a callback lost between the two.

Cancelling is idempotent: a run already cancelled, or already asked to stop, answers
with its status again, so a client that lost the answer to its cancel can send it again.
A queued run is cancelled at once (it never starts); a running one is asked to stop,
and its attempt, which watches its record, commits nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable

from ..base.errors import RunFinished, RunNotFound
from ..base.ids import validate_id
from ..storage.record_store import Stored
from . import records as rr
from .accept import Callback
from .records import RunRecord, RunRecords

# Long-polls start fast (short runs answer at once) and settle at a read every POLL_SECONDS.
FIRST_POLL_SECONDS = 0.05
POLL_SECONDS = 0.5

# The run's callback now (None: none) -> the one it should have (None: remove it); may raise.
ChangeCallback = Callable[[Callback | None], Callback | None]

# Told about a run that became terminal here (a queued run cancelled): its callback.
Finished = Callable[[Stored[RunRecord]], Awaitable[None]]


def not_found(run_id: str) -> RunNotFound:
    return RunNotFound(f"No background run has the ID '{run_id}'.")


class RunControl:
    def __init__(self, records: RunRecords, *, on_finished: Finished | None = None) -> None:
        self._records = records
        self._on_finished = on_finished

    async def get(self, run_id: str) -> Stored[RunRecord]:
        """The run's record; ``RunNotFound`` (also for an ID this app never makes)."""
        validate_id(run_id, kind="run_id")
        found = await self._records.get(run_id)
        if found is None:
            raise not_found(run_id)
        return found

    async def wait(self, found: Stored[RunRecord], seconds: float) -> RunRecord:
        """The record once the run is finished, or as it is after ``seconds``."""
        record = found.value
        deadline = time.monotonic() + seconds
        pause = FIRST_POLL_SECONDS
        while not record.terminal and time.monotonic() < deadline:
            await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(POLL_SECONDS, pause * 2)
            latest = await self._records.get(record.run_id)
            if latest is None:
                raise not_found(record.run_id)  # deleted meanwhile (its thread was deleted)
            record = latest.value
        return record

    async def cancel(self, found: Stored[RunRecord]) -> RunRecord:
        run_id = found.value.run_id

        def cancelled(record: RunRecord | None) -> RunRecord | None:
            if record is None:
                raise not_found(run_id)
            if record.status == rr.CANCELLED or (record.cancel_requested and not record.terminal):
                return None  # asked before: the same answer again
            if record.terminal:
                raise RunFinished(f"The run already finished ({record.status}).")
            if record.status == rr.QUEUED:
                return record.finished(rr.CANCELLED, error=rr.CANCELLED_ERROR)
            return dataclasses.replace(record, cancel_requested=True)

        written = await self._records.update(run_id, cancelled, current=found)
        if written is None:
            raise not_found(run_id)
        if written.value.terminal and self._on_finished is not None:
            await self._on_finished(written)  # a queued run cancelled: report it
        return written.value

    async def change_callback(self, found: Stored[RunRecord], change: ChangeCallback) -> RunRecord:
        """Set or remove the callback of a run that has not finished (``RunFinished`` once it
        has). A change that leaves the callback as it is writes nothing. Like a cancel
        request, a write to a running record makes its lease look younger to other
        instances: a takeover of a crashed attempt can only come later, never earlier."""
        run_id = found.value.run_id

        def changed(record: RunRecord | None) -> RunRecord | None:
            if record is None:
                raise not_found(run_id)
            if record.terminal:
                raise RunFinished(f"The run already finished ({record.status}).")
            now = callback_of(record)
            new = change(now)
            if new == now:
                return None
            return dataclasses.replace(
                record,
                callback_url=None if new is None else new.url,
                callback_format=None if new is None else new.format,
                callback_params={} if new is None else dict(new.params),
            )

        written = await self._records.update(run_id, changed, current=found)
        if written is None:
            raise not_found(run_id)
        return written.value


def callback_of(record: RunRecord) -> Callback | None:
    """The callback ``record`` holds (None: the run has none)."""
    if record.callback_url is None:
        return None
    return Callback(record.callback_url, record.callback_format, dict(record.callback_params))
