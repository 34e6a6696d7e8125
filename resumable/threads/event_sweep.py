"""Housekeeping's last phase: delete background runs' event logs whose run record is gone.

A log (``runs/<run_id>/events-<n>.jsonl``) holds a thread's text. Its record is written
before the log is ever created, and only a thread's DELETE (or retention, which takes both)
removes the record; a log without one is what a crash left between the two (a delete that
stopped after the record, a writer that stopped before removing the log it created after
a delete, or could not tell). Nothing reads a log without its record, so it can go at once.

A run's progress checkpoints (``runs/<run_id>/progress-<n>.bin``) go the same way, and also
once their run has ended: the run removes them itself, so one left is what a crash between
its outcome and that removal left (``background/progress.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING

from ..storage import layout, sdk
from ..storage.failures import list_page, storage_unavailable_on_failure

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start: a thread's DELETE imports this)
    from azure.storage.blob.aio import ContainerClient

_CONCURRENCY = 16


async def sweep_event_logs(container: ContainerClient, token: str | None, size: int) -> tuple[int, str | None]:
    """One listing page of ``runs/`` from ``token``: delete its logs whose run has no
    record. Returns (logs deleted, the next page's token)."""
    blobs, token = await list_page(container, layout.RUNS, token, size)
    names = {blob.name for blob in blobs}
    logs = [name for name in names if "/" in name.removeprefix(layout.RUNS)]
    gate = asyncio.Semaphore(_CONCURRENCY)

    async def one(log: str) -> int:
        record = layout.record_blob(layout.RUNS, log.removeprefix(layout.RUNS).split("/", 1)[0])
        async with gate:
            progress = layout.is_run_progress(log)
            if record in names and not progress:  # the record sorts just before its logs: often on this page
                return 0
            with storage_unavailable_on_failure("sweep event logs"):
                if progress:
                    if not await _ended_or_gone(container, record):
                        return 0
                elif await container.get_blob_client(record).exists():
                    return 0
                with contextlib.suppress(sdk.ResourceNotFoundError):
                    await container.delete_blob(log)
                    return 1
        return 0

    return sum(await asyncio.gather(*(one(log) for log in logs))), token


async def delete_run_events(container: ContainerClient, run_id: str) -> int:
    """Delete every event log of ``run_id`` (its record gone or going); the count deleted.

    A log another call removed first, or a container that is gone, is simply not counted,
    so a repeat is harmless. ``StorageUnavailable`` when storage fails.
    """
    deleted = 0
    with storage_unavailable_on_failure("delete run events"), contextlib.suppress(sdk.ResourceNotFoundError):
        async for blob in container.list_blobs(name_starts_with=layout.run_events_prefix(run_id)):
            with contextlib.suppress(sdk.ResourceNotFoundError):
                await container.delete_blob(blob.name)
                deleted += 1
    return deleted


async def _ended_or_gone(container: ContainerClient, record: str) -> bool:
    """Whether a run's record is gone or says the run ended (its progress can go)."""
    try:
        data = await (await container.get_blob_client(record).download_blob()).readall()
    except sdk.ResourceNotFoundError:
        return True
    try:
        return json.loads(data).get("status") in _ENDED
    except (ValueError, AttributeError):
        return False  # unreadable: leave it to retention with its record


_ENDED = frozenset({"succeeded", "failed", "cancelled"})

__all__ = ["delete_run_events", "sweep_event_logs"]
