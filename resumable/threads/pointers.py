"""Threads: a named conversation whose head checkpoint moves by compare-and-swap.

Webhook callers know a conversation ID, not our latest checkpoint ID. A thread is a
pointer blob, ``threads/<thread_id>.json``, naming its head checkpoint. A turn reads
the pointer (keeping its ETag), resumes from the head, saves the new checkpoint, and
then replaces the pointer only if its ETag is unchanged. Two turns that raced from
the same head cannot both advance it: the loser gets ``ThreadBusy`` and its
checkpoint is deleted (best effort; ``sweep_orphans`` removes any left behind).

A pointer that does not parse or has the wrong shape is ``ThreadUnreadable``, never
an empty thread: treating it as new would restart the conversation and orphan its
history. A pointer whose head checkpoint is gone (retention removed an idle thread)
is ``ThreadExpired``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from azure.storage.blob.aio import ContainerClient

from ..base import tracing
from ..base.errors import (
    CheckpointNotFound,
    InvalidRequest,
    StorageUnavailable,
    ThreadBusy,
    ThreadExpired,
    ThreadUnreadable,
)
from ..base.ids import validate_id
from ..checkpoints.blob_store import BlobCheckpointStorage
from ..checkpoints.cache import HeadCache
from ..storage import layout
from ..storage.blob_records import BlobRecords, RecordConflict, RecordUnreadable
from .delete_progress import BadProgress, DeleteProgress

logger = logging.getLogger(__name__)

PREFIX = layout.THREADS
LINEAGE_KEPT = 10


@dataclass(frozen=True, slots=True)
class ThreadHead:
    """The pointer as read, with the ETag a replacement must match (None: no pointer blob)."""

    thread_id: str
    checkpoint_id: str | None
    turns: int
    recent: tuple[str, ...]
    etag: str | None
    updated_at: float | None = None
    # A delete is in progress (``thread_delete.delete_thread``): turns are refused until it
    # ends, and ``deletion`` says where a repeat call goes on.
    deleting: bool = False
    deletion: DeleteProgress | None = None
    # Seconds since the pointer last changed, by the storage service's clock, as of the
    # read that returned it (None: not read, or no dates in the answer).
    age: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoint_id": self.checkpoint_id,
            "turns": self.turns,
            "recent_checkpoint_ids": list(self.recent),
        }

    def record(self) -> dict[str, Any]:
        """What the pointer blob holds."""
        data = {**self.to_json(), "updated_at": self.updated_at if self.updated_at is not None else time.time()}
        if not self.deleting:
            return data
        return {**data, "deleting": True, "deletion": (self.deletion or DeleteProgress(found=True)).to_json()}


def blob_name(thread_id: str) -> str:
    return f"{PREFIX}{thread_id}.json"


def _unreadable(thread_id: str, reason: str) -> ThreadUnreadable:
    # The reason is ours, never the blob's content: it goes to the log, not the caller.
    logger.error("Thread pointer %s is unreadable: %s", blob_name(thread_id), reason)
    return ThreadUnreadable(
        f"Thread '{thread_id}' has a pointer this app cannot read; nothing was run or changed. "
        "An operator must repair or remove it."
    )


def _is_id(value: object) -> bool:
    try:
        validate_id(value)
    except InvalidRequest:
        return False
    return True


def parse_pointer(thread_id: str, data: object, etag: str) -> ThreadHead:
    """Validate a pointer record as strictly as a checkpoint; ``ThreadUnreadable`` otherwise."""
    if not isinstance(data, Mapping):
        raise _unreadable(thread_id, "not a JSON object")
    checkpoint_id = data.get("checkpoint_id")
    turns = data.get("turns")
    recent = data.get("recent_checkpoint_ids")
    updated_at = data.get("updated_at")
    if data.get("thread_id") != thread_id:
        raise _unreadable(thread_id, "thread_id is missing or names another thread")
    if checkpoint_id is not None and not _is_id(checkpoint_id):
        raise _unreadable(thread_id, "checkpoint_id is not a checkpoint ID")
    if type(turns) is not int or turns < 0 or (turns == 0) != (checkpoint_id is None):
        raise _unreadable(thread_id, "turns is not a count that matches checkpoint_id")
    if not isinstance(recent, list) or not all(_is_id(item) for item in recent):
        raise _unreadable(thread_id, "recent_checkpoint_ids is not a list of checkpoint IDs")
    if updated_at is not None and (type(updated_at) not in (int, float)):
        raise _unreadable(thread_id, "updated_at is not a number")
    deleting = data.get("deleting", False)
    if type(deleting) is not bool:
        raise _unreadable(thread_id, "deleting is not true or false")
    deletion = None
    if "deletion" in data:
        if not deleting:
            raise _unreadable(thread_id, "deletion progress on a pointer that is not deleting")
        try:
            deletion = DeleteProgress.parse(data["deletion"])
        except BadProgress as exc:
            raise _unreadable(thread_id, str(exc)) from None
    elif deleting:  # a tombstone from before progress was kept: the delete starts over
        deletion = DeleteProgress(found=True)
    return ThreadHead(thread_id, checkpoint_id, turns, tuple(recent), etag, updated_at, deleting, deletion)


class ThreadPointers:
    def __init__(self, container: ContainerClient, heads: HeadCache | None = None) -> None:
        self._records = BlobRecords(container, PREFIX)
        # The pointer as this process last read or wrote it: a JSON turn commits on it by
        # compare-and-swap without reading first (``thread_runs``); None: always read.
        self._heads = heads
        self._scope = container.url

    def cached(self, thread_id: str) -> ThreadHead | None:
        """The pointer as this process last read or wrote it, if recent; it may be stale."""
        return None if self._heads is None else self._heads.get(self._scope, thread_id)

    def _seen(self, head: ThreadHead) -> ThreadHead:
        if self._heads is not None:
            self._heads.put(self._scope, head.thread_id, head)
        return head

    async def read(self, thread_id: str) -> ThreadHead:
        """The pointer, an empty head if there is none, or ``ThreadUnreadable``."""
        validate_id(thread_id, kind="thread_id")
        try:
            record = await self._records.get(thread_id)
        except RecordUnreadable as exc:
            raise _unreadable(thread_id, str(exc)) from exc
        if record is None:
            return self._seen(ThreadHead(thread_id, None, 0, (), None))
        age = None if record.modified is None or record.seen is None else max(0.0, record.seen - record.modified)
        return self._seen(dataclasses.replace(parse_pointer(thread_id, record.data, record.etag), age=age))

    async def advance(self, head: ThreadHead, checkpoint_id: str) -> ThreadHead:
        """Point the thread at ``checkpoint_id`` iff it still points where ``head`` says."""
        recent = (checkpoint_id, *head.recent)[:LINEAGE_KEPT]
        moved = ThreadHead(head.thread_id, checkpoint_id, head.turns + 1, recent, head.etag, time.time())
        try:
            with tracing.phase("thread.advance", {"thread.id": head.thread_id, "checkpoint.id": checkpoint_id}):
                etag = await self._write(head, moved.record())
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
        return self._seen(dataclasses.replace(moved, etag=etag))

    async def _write(self, head: ThreadHead, data: dict[str, Any]) -> str:
        """Create the pointer (no ETag) or replace it (ETag); the new ETag, or ``RecordConflict``."""
        if head.etag is None:
            return (await self._records.create(head.thread_id, data)).etag
        return (await self._records.replace(head.thread_id, data, head.etag)).etag

    async def _landed(self, thread_id: str, checkpoint_id: str) -> ThreadHead | None:
        """The head if it is ``checkpoint_id``, else None. If the head cannot be read,
        ``StorageUnavailable`` propagates: the turn may have committed, so it must not be
        reported as lost (which would delete what may now be the head)."""
        current = await self.read(thread_id)
        return current if current.checkpoint_id == checkpoint_id else None

    async def fence(self, head: ThreadHead) -> ThreadHead | None:
        """Rewrite the pointer as read (create it empty if there was none), changing its ETag.

        Every turn that read the pointer before this then fails its compare-and-swap, so
        a checkpoint such a turn saved can never become reachable. An empty pointer reads
        as a thread with no turns, like no pointer at all. None if the pointer changed or
        appeared since ``head`` was read.
        """
        try:
            etag = await self._write(head, head.record())
        except RecordConflict:
            return None
        return self._seen(dataclasses.replace(head, etag=etag))

    async def remove(self, head: ThreadHead) -> bool:
        """Delete the pointer iff it is still exactly ``head`` (its ETag); False otherwise."""
        if head.etag is None:
            return False
        if self._heads is not None:
            self._heads.forget(self._scope, head.thread_id)
        return await self._records.delete(head.thread_id, head.etag)

    async def forget_expired(self, head: ThreadHead) -> bool:
        """Drop a pointer whose head checkpoint is gone, so the thread ID can start afresh."""
        removed = await self.remove(head)
        if removed:
            logger.warning(
                "Thread expired: its head checkpoint is gone; removed its pointer %s",
                blob_name(head.thread_id),
                extra={"thread_id": head.thread_id, "checkpoint_id": head.checkpoint_id},
            )
        return removed


async def live_head(pointers: ThreadPointers, store: BlobCheckpointStorage, thread_id: str) -> ThreadHead | None:
    """The pointer, checked against its head: None if the thread has no turns yet,
    ``ThreadExpired`` if retention removed its head checkpoint (one extra HEAD request)."""
    head = await pointers.read(thread_id)
    if head.checkpoint_id is None:
        return None
    try:
        await store.get_info(head.checkpoint_id)
    except CheckpointNotFound:
        raise expired(thread_id) from None
    return head


def expired(thread_id: str) -> ThreadExpired:
    return ThreadExpired(
        f"Thread '{thread_id}' expired: it was idle past the retention period and its state was deleted. "
        "A new turn on this ID starts a new thread."
    )


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
