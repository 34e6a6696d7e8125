"""Background runs' records, one per run (``runs/<run_id>.json``), changed only by CAS.

The record's shape is ``run_schema``. Every write goes through ``RecordStore`` (the one
compare-and-swap helper, which tells a lost answer from a conflict), so two deliveries
of one message, or a stalled attempt and its successor, cannot both change a record.
Whether a lease is live is judged on the storage service's clock alone: the record's
Last-Modified and the Date of the answer that carried it (``lease_left``).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from azure.storage.blob.aio import ContainerClient

from ..base.errors import RunRecordUnreadable
from ..storage.blob_records import RecordConflict
from ..storage.record_store import CLOCK_RESOLUTION, UNREAD, Change, RecordContended, RecordErrors, RecordStore, Stored
from .schema import (
    CANCELLED,
    CANCELLED_ERROR,
    FAILED,
    PREFIX,
    QUEUED,
    RUNNING,
    SUCCEEDED,
    TERMINAL,
    CommitIntent,
    Lease,
    RunError,
    RunRecord,
    rfc3339,
)


def new_run_id() -> str:
    return uuid.uuid4().hex


def lease_live(stored: Stored[RunRecord]) -> bool:
    """Whether an attempt still holds the run, by the storage service's clock alone."""
    return lease_left(stored) > 0


def lease_left(stored: Stored[RunRecord]) -> float:
    """Seconds until the run's lease lapses (0: no live lease), by the service's clock.

    An age that cannot be told (no dates) counts as none: the lease is taken as live.
    """
    record = stored.value
    if record.status != RUNNING or record.lease is None or record.lease.seconds <= 0:
        return 0.0
    age = stored.age or 0.0
    return max(0.0, record.lease.seconds + CLOCK_RESOLUTION - age)


# What a decision makes of a record as read: the record to write, or None to leave it.
Decide = Callable[[Stored["RunRecord"]], Awaitable["RunRecord | None"]]


_ERRORS = RecordErrors(unreadable=lambda _name, _exc: RunRecordUnreadable("This run's record cannot be read."))


class RunRecords:
    """Run records beside the checkpoints, in the same container."""

    def __init__(self, container: ContainerClient) -> None:
        self._store: RecordStore[RunRecord] = RecordStore(container, PREFIX, RunRecord, _ERRORS)

    async def get(self, run_id: str) -> Stored[RunRecord] | None:
        return await self._store.get(run_id)

    async def create(self, record: RunRecord) -> Stored[RunRecord]:
        """Create-only; ``RecordConflict`` when the run already exists."""
        return await self._store.create(record.run_id, record)

    async def update(
        self, run_id: str, change: Change, *, current: Stored[RunRecord] | object | None = UNREAD
    ) -> Stored[RunRecord] | None:
        """Apply ``change`` by compare-and-swap (see ``RecordStore.update``); the record after it.

        For changes that depend only on the record's value (a cancel, a commit intent)."""
        return await self._store.update(run_id, change, current=current)  # type: ignore[arg-type]

    async def decide(self, stored: Stored[RunRecord], decide: Decide, *, rounds: int = 3) -> Stored[RunRecord] | None:
        """Write what ``decide`` makes of the record exactly as read; the record afterwards.

        For decisions that read more than the value (the service's clock on a lease, the
        checkpoints an intent names): a conflict means the record changed after it was
        judged, so it is read and judged again, never changed blindly. A lost answer still
        counts as written (``RecordStore``). ``decide`` returning None writes nothing.
        """
        run_id, current = stored.value.run_id, stored
        for _ in range(rounds):
            new = await decide(current)
            if new is None:
                return current
            try:
                return await self._store.update(run_id, lambda _value, new=new: new, current=current, attempts=1)
            except RecordContended:
                fresh = await self.get(run_id)
                if fresh is None:
                    return None
                current = fresh
        return current


__all__ = [
    "CANCELLED",
    "CANCELLED_ERROR",
    "FAILED",
    "QUEUED",
    "RUNNING",
    "SUCCEEDED",
    "TERMINAL",
    "CommitIntent",
    "Lease",
    "RecordConflict",
    "RunError",
    "RunRecord",
    "RunRecordUnreadable",
    "RunRecords",
    "Stored",
    "lease_left",
    "lease_live",
    "new_run_id",
    "rfc3339",
]
