"""The order of a thread's background turns: a pending list per thread, appended at accept.

``run-order/<thread_id>.json`` holds ``{"pending": [[run_id, appended_at], ...]}``,
changed only through the record store's compare-and-swap. A turn is appended when it is
accepted, and removed once its run is finished. Whoever processes a message for the
thread works the list from the front, one run at a time, so turns apply in the order
they were accepted whatever order their messages arrive in, on however many instances.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

from azure.storage.blob.aio import ContainerClient

from ..base.errors import ThreadBusy
from ..storage import layout
from ..storage.record_store import DELETE, UNREAD, RecordContended, RecordStore, Stored

PREFIX = layout.RUN_ORDER
# More queued turns than this on one thread is a caller out of control: 409.
MAX_PENDING = 100


@dataclass(frozen=True, slots=True)
class PendingTurns:
    """A thread's accepted, unfinished background turns, oldest first."""

    VERSION: ClassVar[int] = 1
    pending: tuple[tuple[str, float], ...]

    def to_json(self) -> dict[str, Any]:
        return {"pending": [[run_id, at] for run_id, at in self.pending]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PendingTurns:
        return cls(tuple((_text(run_id), float(at)) for run_id, at in data["pending"]))

    def has(self, run_id: str) -> bool:
        return any(entry[0] == run_id for entry in self.pending)


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("run ID")
    return value


class ThreadOrder:
    def __init__(self, container: ContainerClient) -> None:
        self._records = RecordStore(container, PREFIX, PendingTurns)

    async def pending(self, thread_id: str) -> list[tuple[str, float]]:
        record = await self._records.get(thread_id)
        return [] if record is None else list(record.value.pending)

    async def read(self, thread_id: str) -> Stored[PendingTurns] | None:
        """The list as stored (None: no turns pending), to pass on as ``current``."""
        return await self._records.get(thread_id)

    @staticmethod
    def left_alone(run_id: str, etag: str) -> Stored[PendingTurns]:
        """The list as an accept that left ``run_id`` its only entry wrote it (``etag``),
        without reading it: ``run_id`` is still the front, if still listed (``messages``)."""
        return Stored(PendingTurns(((run_id, 0.0),)), etag)

    async def append(self, thread_id: str, run_id: str) -> Stored[PendingTurns] | None:
        """Add ``run_id`` at the end (once: appending it again changes nothing, and costs
        one read). Returns the list as it is afterwards."""

        def appended(turns: PendingTurns | None) -> PendingTurns | None:
            pending = () if turns is None else turns.pending
            if turns is not None and turns.has(run_id):
                return None
            if len(pending) >= MAX_PENDING:
                raise ThreadBusy(f"This thread already has {MAX_PENDING} background turns waiting; retry later.")
            return PendingTurns((*pending, (run_id, time.time())))

        return await self._update(thread_id, appended)

    async def remove(
        self, thread_id: str, run_id: str, *, current: Stored[PendingTurns] | object | None = UNREAD
    ) -> Stored[PendingTurns] | None:
        """Drop ``run_id`` (a finished run); the list blob goes when it empties. ``current``:
        the list as last read or written (saves a read). Returns what is left (None: nothing)."""

        def removed(turns: PendingTurns | None) -> PendingTurns | object | None:
            if turns is None or not turns.has(run_id):
                return None
            rest = tuple(entry for entry in turns.pending if entry[0] != run_id)
            return PendingTurns(rest) if rest else DELETE

        return await self._update(thread_id, removed, current)

    async def delete(self, thread_id: str) -> None:
        """The whole list (a thread being deleted)."""
        await self._records.delete(thread_id)

    async def _update(self, thread_id: str, change: Any, current: Any = UNREAD) -> Stored[PendingTurns] | None:
        try:
            return await self._records.update(thread_id, change, current=current, attempts=20)
        except RecordContended:
            raise ThreadBusy("This thread's background queue is contended; retry later.") from None
