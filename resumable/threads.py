"""Threads: a named conversation whose head checkpoint moves by compare-and-swap.

Webhook callers know a conversation ID, not our latest checkpoint ID. A thread is a
pointer blob, ``threads/<thread_id>.json``, naming its head checkpoint. A turn reads
the pointer (keeping its ETag), resumes from the head, saves the new checkpoint, and
then replaces the pointer only if its ETag is unchanged. Two turns that raced from
the same head cannot both advance it: the loser gets ``ThreadBusy`` and its
checkpoint is deleted (best effort; ``sweep_orphans`` removes any left behind).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from azure.storage.blob.aio import ContainerClient

from . import tracing
from .blob_records import BlobRecords, RecordConflict
from .blob_store import BlobCheckpointStorage
from .errors import StorageUnavailable, ThreadBusy
from .ids import validate_id

PREFIX = "threads/"
LINEAGE_KEPT = 10


@dataclass(frozen=True, slots=True)
class ThreadHead:
    """The pointer as read, with the ETag a replacement must match (None: new thread)."""

    thread_id: str
    checkpoint_id: str | None
    turns: int
    recent: tuple[str, ...]
    etag: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoint_id": self.checkpoint_id,
            "turns": self.turns,
            "recent_checkpoint_ids": list(self.recent),
        }


class ThreadPointers:
    def __init__(self, container: ContainerClient) -> None:
        self._records = BlobRecords(container, PREFIX)

    async def read(self, thread_id: str) -> ThreadHead:
        validate_id(thread_id, kind="thread_id")
        record = await self._records.get(thread_id)
        if record is None:
            return ThreadHead(thread_id, None, 0, (), None)
        data = record.data
        return ThreadHead(
            thread_id=thread_id,
            checkpoint_id=data.get("checkpoint_id"),
            turns=int(data.get("turns", 0)),
            recent=tuple(data.get("recent_checkpoint_ids", ())),
            etag=record.etag,
        )

    async def advance(self, head: ThreadHead, checkpoint_id: str) -> ThreadHead:
        """Point the thread at ``checkpoint_id`` iff it still points where ``head`` says."""
        recent = (checkpoint_id, *head.recent)[:LINEAGE_KEPT]
        data = {
            "thread_id": head.thread_id,
            "checkpoint_id": checkpoint_id,
            "turns": head.turns + 1,
            "recent_checkpoint_ids": list(recent),
            "updated_at": time.time(),
        }
        try:
            with tracing.phase("thread.advance", {"thread.id": head.thread_id, "checkpoint.id": checkpoint_id}):
                if head.etag is None:
                    record = await self._records.create(head.thread_id, data)
                else:
                    record = await self._records.replace(head.thread_id, data, head.etag)
        except (RecordConflict, StorageUnavailable) as exc:
            # The write may have landed with its answer lost (a timeout, or the SDK's own
            # retry then meeting it). Look before reporting a failure, or the caller's
            # retry would apply the turn a second time.
            landed = await self._landed(head.thread_id, checkpoint_id)
            if landed is not None:
                return landed
            if isinstance(exc, RecordConflict):
                raise ThreadBusy("Another turn advanced this thread first; this turn was not applied.") from exc
            raise
        return ThreadHead(head.thread_id, checkpoint_id, head.turns + 1, recent, record.etag)

    async def _landed(self, thread_id: str, checkpoint_id: str) -> ThreadHead | None:
        try:
            current = await self.read(thread_id)
        except StorageUnavailable:
            return None
        return current if current.checkpoint_id == checkpoint_id else None

    async def thread_ids(self) -> list[str]:
        return await self._records.names()


class ThreadHeld(ThreadBusy):
    """This worker's lock on the thread was not free in time: the turn ends, it is not retried."""


class ThreadLocks:
    """Per-worker turn serialization: saves wasted runs, never replaces the CAS.

    Within one worker, ``enqueue`` turns wait for each other instead of racing (for a
    bounded time: a client that never reads its stream holds the lock), and a
    ``reject`` turn fails fast instead of running a turn it could not commit. Across
    workers, the pointer's ETag is still what decides.
    """

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    @asynccontextmanager
    async def hold(self, thread_id: str, *, wait_seconds: float = 0.0) -> AsyncIterator[None]:
        """Hold the thread, waiting at most ``wait_seconds`` (0: only if it is free); else ``ThreadHeld``."""
        lock = self._locks.setdefault(thread_id, asyncio.Lock())
        if wait_seconds <= 0 and lock.locked():
            raise ThreadHeld("A turn on this thread is already running.")
        self._users[thread_id] = self._users.get(thread_id, 0) + 1
        try:
            try:
                async with asyncio.timeout(wait_seconds if wait_seconds > 0 else None):
                    await lock.acquire()
            except TimeoutError:
                raise ThreadHeld(
                    f"Another turn held this thread for longer than {wait_seconds:g} s; this turn was not run."
                ) from None
            try:
                yield
            finally:
                lock.release()
        finally:
            self._users[thread_id] -= 1
            if not self._users[thread_id]:
                del self._users[thread_id]
                del self._locks[thread_id]


async def sweep_orphans(
    pointers: ThreadPointers, store: BlobCheckpointStorage, *, older_than_seconds: float = 600
) -> list[str]:
    """Delete thread checkpoints that no thread's lineage reaches; return their IDs.

    Only checkpoints tagged with a ``thread_id`` and older than ``older_than_seconds``
    are considered, so a turn that has saved but not yet advanced its pointer is safe.
    """
    reachable: set[str] = set()
    infos = {info.checkpoint_id: info for info in await store.list_all_infos()}
    for thread_id in await pointers.thread_ids():
        checkpoint_id = (await pointers.read(thread_id)).checkpoint_id
        while checkpoint_id and checkpoint_id not in reachable:
            reachable.add(checkpoint_id)
            info = infos.get(checkpoint_id)
            checkpoint_id = info.previous_checkpoint_id if info else None
    cutoff = time.time() - older_than_seconds
    orphans = [
        info.checkpoint_id
        for info in infos.values()
        if info.thread_id and info.checkpoint_id not in reachable and info.created_epoch < cutoff
    ]
    for checkpoint_id in orphans:
        await store.delete(checkpoint_id)
    return orphans
