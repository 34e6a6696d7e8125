"""Threads: a named conversation whose head checkpoint moves by compare-and-swap.

Webhook callers know a conversation ID, not our latest checkpoint ID. A thread is a
pointer record, ``threads/<thread_id>.json`` (``pointer_record.Pointer``), naming its head
checkpoint. A turn reads the pointer, resumes from the head, saves the new checkpoint,
and then changes the pointer through ``RecordStore.update`` only if it is still the
version the turn read. Two turns that raced from the same head cannot both advance it:
the loser gets ``ThreadBusy`` and its checkpoint is deleted (best effort;
``sweep_orphans`` removes any left behind). A write whose answer was lost is recognised
by its write token even when other turns committed on top of it since: the turn was
applied, and its checkpoint is in the lineage.

A pointer that does not parse or has the wrong shape is ``ThreadUnreadable``, never
an empty thread: treating it as new would restart the conversation and orphan its
history. A pointer whose head checkpoint is gone (retention removed an idle thread)
is ``ThreadExpired``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..base import tracing
from ..base.errors import CheckpointNotFound, ThreadBusy, ThreadExpired, ThreadUnreadable
from ..base.ids import validate_id
from ..checkpoints.cache import HeadCache
from ..checkpoints.store import CheckpointStore
from ..storage import layout
from ..storage.record_store import DELETE, RecordErrors, RecordStore, Refused, Stored
from .delete_progress import DeleteProgress
from .pointer_record import LINEAGE_KEPT, MAX_ORIGIN_CHARS, Pointer, valid_origin

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from azure.storage.blob.aio import ContainerClient

__all__ = ["LINEAGE_KEPT", "MAX_ORIGIN_CHARS", "Pointer", "ThreadHead", "ThreadPointers", "valid_origin"]

logger = logging.getLogger(__name__)

PREFIX = layout.THREADS


@dataclass(frozen=True, slots=True)
class ThreadHead:
    """The pointer as read, with the ETag its next write must match (None: no pointer)."""

    thread_id: str
    checkpoint_id: str | None
    turns: int
    recent: tuple[str, ...]
    etag: str | None
    updated_at: float | None = None
    deleting: bool = False
    deletion: DeleteProgress | None = None
    origin: str | None = None
    # The record as read or written (its ETag and write tokens): what an update starts from.
    stored: Stored[Pointer] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, thread_id: str, stored: Stored[Pointer] | None) -> ThreadHead:
        if stored is None:
            return cls(thread_id, None, 0, (), None)
        p = stored.value
        fields = (p.checkpoint_id, p.turns, p.recent, stored.etag, p.updated_at, p.deleting, p.deletion, p.origin)
        return cls(thread_id, *fields, stored)

    def accepts(self, origin: str | None) -> bool:
        """A thread with an origin takes turns of that origin only; one without (no pointer,
        or a legacy pointer written before origins were recorded) takes any, as far as the
        pointer can tell: an unclaimed one's metadata may still name its owner
        (``ownership``)."""
        return self.origin is None or self.origin == origin

    @property
    def unclaimed(self) -> bool:
        """No turn has claimed the thread: no pointer, or one with no origin and no turns (an
        empty fence, a deletion mark of a thread that had none). Its metadata's origin, if
        any, is then whose the thread is."""
        return self.origin is None and not self.turns

    @property
    def pointer(self) -> Pointer:
        """The record's value (an empty pointer where there is none)."""
        if self.stored is not None:
            return self.stored.value
        fields = (self.checkpoint_id, self.turns, self.recent, self.updated_at, self.deleting, self.deletion)
        return Pointer(self.thread_id, *fields, self.origin)

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoint_id": self.checkpoint_id,
            "turns": self.turns,
            "recent_checkpoint_ids": list(self.recent),
        }


def blob_name(thread_id: str) -> str:
    return f"{PREFIX}{thread_id}.json"


def _unreadable(thread_id: str, reason: str) -> ThreadUnreadable:
    # The reason is ours, never the blob's content: it goes to the log, not the caller.
    logger.error("Thread pointer %s is unreadable: %s", blob_name(thread_id), reason)
    return ThreadUnreadable(
        f"Thread '{thread_id}' has a pointer this app cannot read; nothing was run or changed. "
        "An operator must repair or remove it."
    )


class _Moved(Refused):
    """The pointer is no longer the version the update started from."""


# The pointer as it is -> the pointer to write (``DELETE``: remove it).
PointerChange = Callable[[Pointer], Any]
_ERRORS = RecordErrors(unreadable=lambda name, exc: _unreadable(name, str(exc)))


class ThreadPointers:
    def __init__(self, container: ContainerClient, heads: HeadCache | None = None) -> None:
        self._records: RecordStore[Pointer] = RecordStore(container, PREFIX, Pointer, _ERRORS)
        # The pointer as this process last read or wrote it: a JSON turn commits on it by
        # compare-and-swap without reading first (``thread_turns``); None: always read.
        self._heads = heads
        self._scope = container.url
        # Where the thread's other records live: its metadata names the owner of a thread
        # no turn has claimed yet (``ownership``).
        self.container = container

    def cached(self, thread_id: str) -> ThreadHead | None:
        """The pointer as this process last read or wrote it, if recent; it may be stale."""
        return None if self._heads is None else self._heads.get(self._scope, thread_id)

    def _seen(self, thread_id: str, stored: Stored[Pointer] | None) -> ThreadHead:
        head = ThreadHead.of(thread_id, stored)
        if stored is not None and stored.value.thread_id != thread_id:
            raise _unreadable(thread_id, "thread_id names another thread")
        if self._heads is not None:
            self._heads.put(self._scope, thread_id, head)
        return head

    async def read(self, thread_id: str) -> ThreadHead:
        """The pointer, an empty head if there is none, or ``ThreadUnreadable``."""
        validate_id(thread_id, kind="thread_id")
        return self._seen(thread_id, await self._records.get(thread_id))

    async def update(self, change: PointerChange, *, current: ThreadHead) -> ThreadHead | None:
        """Apply ``change`` iff the pointer is still the version ``current`` was read as
        (by compare-and-swap on its ETag); the pointer afterwards, or None if it moved
        (nothing written; the pointer as it is now is what ``cached`` then gives).

        A write whose answer was lost counts as written, even if other writes landed on
        top of it since (``RecordStore``): the head returned is then the pointer as it is.
        ``StorageUnavailable`` when the outcome cannot be known: never report that as lost.
        """
        thread_id = current.thread_id
        calls = 0

        def once(value: Pointer | None) -> Any:
            nonlocal calls
            calls += 1
            if calls > 1:  # called again only after a write that did not land: it moved
                raise _Moved()
            return change(value if value is not None else Pointer(thread_id))

        start = current.stored if current.etag is not None else None
        if current.etag is not None and start is None:  # a head built by hand: read its version
            start = await self._records.get(thread_id)
            if start is None or start.etag != current.etag:
                return None
        try:
            written = await self._records.update(thread_id, once, current=start, attempts=2)
        except _Moved as moved:
            self._seen(thread_id, moved.stored)
            return None
        if written is None:
            if self._heads is not None:
                self._heads.forget(self._scope, thread_id)
            return ThreadHead.of(thread_id, None)
        return self._seen(thread_id, written)

    async def advance(self, head: ThreadHead, checkpoint_id: str, *, origin: str | None = None) -> ThreadHead:
        """``update`` moving the head to ``checkpoint_id`` (``ThreadBusy`` if it moved).

        ``origin`` is recorded only by a thread's first turn; it never changes after."""
        with tracing.phase("thread.advance", {"thread.id": head.thread_id, "checkpoint.id": checkpoint_id}):
            moved = await self.update(lambda p: p.advanced(checkpoint_id, origin), current=head)
        if moved is None:
            raise ThreadBusy("Another turn advanced this thread first; this turn was not applied.")
        return moved

    async def fence(self, head: ThreadHead) -> ThreadHead | None:
        """``update`` rewriting the pointer unchanged (creating it empty if there was none).

        Every turn that read the pointer before this then fails its compare-and-swap, so
        a checkpoint such a turn saved can never become reachable. An empty pointer reads
        as a thread with no turns, like no pointer at all. None if the pointer changed or
        appeared since ``head`` was read.
        """
        return await self.update(lambda p: p, current=head)

    async def remove(self, head: ThreadHead) -> bool:
        """Delete the pointer iff it is still exactly ``head`` (its ETag); False otherwise."""
        if head.etag is None:
            return False
        return await self.update(lambda _p: DELETE, current=head) is not None

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


async def live_head(pointers: ThreadPointers, store: CheckpointStore, thread_id: str) -> ThreadHead | None:
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
