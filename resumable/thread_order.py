"""The order of a thread's background turns: a pending list per thread, appended at accept.

``run-order/<thread_id>.json`` holds ``{"pending": [[run_id, appended_at], ...]}``,
changed only by compare-and-swap. A turn is appended when it is accepted (before its
record exists), and removed once its run is finished. Whoever processes a message for
the thread works the list from the front, one run at a time, so turns apply in the
order they were accepted whatever order their messages arrive in, on however many
instances.
"""

from __future__ import annotations

import time

from azure.storage.blob.aio import ContainerClient

from . import layout
from .blob_records import BlobRecords, RecordConflict
from .errors import ThreadBusy

PREFIX = layout.RUN_ORDER
# More queued turns than this on one thread is a caller out of control: 409.
MAX_PENDING = 100
_CAS_ATTEMPTS = 20


class ThreadOrder:
    def __init__(self, container: ContainerClient) -> None:
        self._records = BlobRecords(container, PREFIX)

    async def pending(self, thread_id: str) -> list[tuple[str, float]]:
        record = await self._records.get(thread_id)
        if record is None:
            return []
        return [(str(run_id), float(at)) for run_id, at in record.data.get("pending", [])]

    async def append(self, thread_id: str, run_id: str) -> None:
        """Add ``run_id`` at the end (once: appending it again changes nothing)."""
        for _ in range(_CAS_ATTEMPTS):
            record = await self._records.get(thread_id)
            pending = [] if record is None else list(record.data.get("pending", []))
            if any(entry[0] == run_id for entry in pending):
                return
            if len(pending) >= MAX_PENDING:
                raise ThreadBusy(f"This thread already has {MAX_PENDING} background turns waiting; retry later.")
            data = {"pending": [*pending, [run_id, time.time()]]}
            try:
                if record is None:
                    await self._records.create(thread_id, data)
                else:
                    await self._records.replace(thread_id, data, record.etag)
                return
            except RecordConflict:
                continue
        raise ThreadBusy("This thread's background queue is contended; retry later.")

    async def remove(self, thread_id: str, run_id: str) -> None:
        """Drop ``run_id`` (a finished run); the list blob goes when it empties."""
        for _ in range(_CAS_ATTEMPTS):
            record = await self._records.get(thread_id)
            if record is None:
                return
            pending = [entry for entry in record.data.get("pending", []) if entry[0] != run_id]
            if len(pending) == len(record.data.get("pending", [])):
                return
            try:
                if pending:
                    await self._records.replace(thread_id, {"pending": pending}, record.etag)
                elif not await self._records.delete(thread_id, etag=record.etag):
                    continue
                return
            except RecordConflict:
                continue
        raise ThreadBusy("This thread's background queue is contended; retry later.")
