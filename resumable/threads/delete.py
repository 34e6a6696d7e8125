"""Deleting a thread whole (a GDPR erasure), across as many calls as it takes.

The pointer is fenced first: a ``deleting`` tombstone, so any turn that read it before
fails its compare-and-swap and later ones are refused. Then the container is scanned a
listing page at a time: checkpoints (found by their ``thread_id`` metadata, so lost
races' leftovers go too, and deleted through the checkpoint store, whose cache forgets
them), idempotency records, background runs (Responses' ``resp_`` records among them) and
their callback delivery records (each record is read, since their names do not say whose
they are). A run's record goes before its event logs are listed, and a log's writer reads
the record after creating the log (``background/events.py``), so a log created while the
delete runs is removed by one or the other; a log whose record a crashed delete already
removed is found by the ``thread_id`` in its metadata.
After each page the tombstone records the listing's continuation token by
compare-and-swap (``delete_progress.py``), so a call that runs out of time answers 202
and the next call goes on from there instead of starting over. Every call finishes at
least one page, however short its budget. Last, the pending list, the metadata and the
pointer go.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..base.errors import ThreadBusy, ThreadNotFound
from ..checkpoints.store import CheckpointStore
from ..storage import layout, sdk
from ..storage.blob_records import BlobRecords, RecordUnreadable
from ..storage.failures import list_page, storage_unavailable_on_failure
from .admin import ThreadMetadata
from .delete_progress import DeleteProgress
from .event_sweep import delete_run_events
from .ownership import Caller, owned_head
from .pointers import ThreadHead, ThreadPointers

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from azure.storage.blob.aio import ContainerClient

# Names per listing page: one page is the least a call does, so it bounds how far a call
# can run past its budget (a page of records is that many reads, DELETE_CONCURRENCY at once).
DELETE_PAGE = 250
DELETE_CONCURRENCY = 16
_TOMBSTONE_ATTEMPTS = 10

# A phase's page: (container, checkpoint store, thread ID, continuation token) -> (blobs
# deleted, next token).
_Step = Callable[["ContainerClient", CheckpointStore, str, str | None], Awaitable[tuple[int, str | None]]]


@dataclass(frozen=True, slots=True)
class Deletion:
    finished: bool
    deleted: int


async def delete_thread(
    container: ContainerClient,
    pointers: ThreadPointers,
    thread_id: str,
    *,
    caller: Caller,
    store: CheckpointStore,
    deadline_seconds: float = 20.0,
) -> Deletion:
    """Delete everything of ``thread_id``; ``finished`` False when the deadline came first.

    ``Forbidden`` before anything changes unless ``caller`` made the thread.
    ``ThreadNotFound`` once a whole scan found nothing of the thread (no pointer, metadata,
    checkpoint or record).
    """
    deadline = time.monotonic() + deadline_seconds
    head: ThreadHead | None = await _tombstone(container, pointers, await owned_head(pointers, thread_id, caller))
    deleted = 0
    worked = False
    while head is not None:
        progress = head.deletion or DeleteProgress(found=True)
        if worked and time.monotonic() > deadline:
            return Deletion(False, deleted)
        if progress.phase == "finish":
            await BlobRecords(container, layout.RUN_ORDER).delete(thread_id)
            await ThreadMetadata(container).delete(thread_id)
            await pointers.remove(head)
            if not progress.found:
                raise ThreadNotFound(f"Thread '{thread_id}' does not exist (or was deleted).")
            return Deletion(True, deleted)
        count, token = await _STEPS[progress.phase](container, store, thread_id, progress.token)
        deleted += count
        head = await _record(pointers, head, progress.after_page(token, found=count > 0))
        worked = True
    return Deletion(True, deleted)  # another call finished the delete meanwhile


async def _tombstone(container: ContainerClient, pointers: ThreadPointers, head: ThreadHead) -> ThreadHead:
    """Mark the pointer ``deleting`` (CAS): turns that read it before now cannot commit.
    A pointer already marked is a delete in progress: this call goes on with it."""
    if head.deleting:
        return head
    has_metadata = (await ThreadMetadata(container).get(head.thread_id)).exists
    for _ in range(_TOMBSTONE_ATTEMPTS):
        if head.deleting:
            return head
        progress = DeleteProgress(found=has_metadata or head.etag is not None)
        fenced = await pointers.update(lambda p, progress=progress: p.marked_deleting(progress), current=head)
        if fenced is not None:
            return fenced
        head = await pointers.read(head.thread_id)
    raise ThreadBusy("The thread kept changing while it was being deleted; try again.")


async def _record(pointers: ThreadPointers, head: ThreadHead, progress: DeleteProgress) -> ThreadHead | None:
    """Write the progress into the tombstone (CAS). If another call moved it first, go on
    from its position (pages are idempotent); None if the delete is no longer in progress."""
    fenced = await pointers.update(lambda p: p.with_progress(progress), current=head)
    if fenced is not None:
        return fenced
    current = await pointers.read(head.thread_id)
    return current if current.deleting else None


async def _bounded(work: Iterable[Awaitable[int]]) -> int:
    gate = asyncio.Semaphore(DELETE_CONCURRENCY)

    async def one(item: Awaitable[int]) -> int:
        async with gate:
            return await item

    return sum(await asyncio.gather(*(one(item) for item in work)))


async def _delete_blob(container: ContainerClient, name: str) -> int:
    with storage_unavailable_on_failure("delete"):
        try:
            await container.delete_blob(name)
        except sdk.ResourceNotFoundError:
            return 0
    return 1


async def _checkpoints(
    container: ContainerClient, store: CheckpointStore, thread_id: str, token: str | None
) -> tuple[int, str | None]:
    """Through the store: it forgets each in its cache as it deletes it."""
    infos, token = await store.info_page(token, DELETE_PAGE)
    mine = [info.checkpoint_id for info in infos if info.thread_id == thread_id]

    async def one(checkpoint_id: str) -> int:
        return int(await store.delete(checkpoint_id))

    return await _bounded(one(checkpoint_id) for checkpoint_id in mine), token


def _records_naming(prefix: str) -> _Step:
    """A page of the JSON records under ``prefix``: those whose ``thread_id`` is this
    thread are deleted (with a background run's event logs)."""

    async def step(
        container: ContainerClient, _store: CheckpointStore, thread_id: str, token: str | None
    ) -> tuple[int, str | None]:
        blobs, token = await list_page(container, prefix, token, DELETE_PAGE, metadata=prefix == layout.RUNS)
        records = BlobRecords(container, prefix)
        names = [blob.name.removeprefix(prefix).removesuffix(".json") for blob in blobs]
        # An event log (``runs/<id>/...``) names its thread: gone even if its record is.
        logs = [
            b.name for b in blobs if "/" in b.name[len(prefix) :] and (b.metadata or {}).get("thread_id") == thread_id
        ]

        async def one(name: str) -> int:
            try:
                record = await records.get(name)
            except RecordUnreadable:
                return 0
            if record is None or record.data.get("thread_id") != thread_id:
                return 0
            deleted = int(await records.delete(name))
            if prefix == layout.RUNS:  # after the record: a log created meanwhile is listed here
                await delete_run_events(container, name)
            return deleted

        deleted = await _bounded(_delete_blob(container, log) for log in logs)
        return deleted + await _bounded(one(name) for name in names if "/" not in name), token

    return step


_STEPS: dict[str, _Step] = {
    "checkpoints": _checkpoints,
    "idempotency": _records_naming(layout.IDEMPOTENCY),
    "runs": _records_naming(layout.RUNS),
    "callbacks": _records_naming(layout.CALLBACKS),
}
