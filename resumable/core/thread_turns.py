"""Turns on a thread: resume from its head, commit by compare-and-swap, retry if asked.

``multitask="reject"`` (the default): a turn that races another on the same thread
gets 409 ``thread_busy`` and changes nothing. ``"enqueue"``: it runs again on top of
the winner's checkpoint, with backoff and jitter, up to ``MAX_ATTEMPTS`` times.
Retries happen only before a response starts: a streaming turn that loses the race
after its events were sent reports ``thread_busy`` in an ``error`` event. Within one
worker, an ``enqueue`` turn waits for the turn ahead of it at most
``THREAD_LOCK_WAIT_SECONDS`` in total, then gets ``thread_busy`` too. A thread whose head
checkpoint retention removed gets 410 ``thread_expired`` and starts afresh next time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from ..base.errors import (
    CheckpointNotFound,
    CheckpointNotInThread,
    Forbidden,
    ResumeError,
    ThreadBusy,
    ThreadExpired,
    ThreadUnreadable,
)
from ..storage.record_store import CLOCK_RESOLUTION
from ..threads.ownership import refuse_unless_metadata_origin
from ..threads.pointers import ThreadHead, ThreadHeld, ThreadLocks, expired
from .runs import CommitHook, Event, RunRequest, RunService

# A turn loses a race only when another turn commits in between, so with K turns racing
# on one thread each needs at most K attempts: 30 covers 30 concurrent turns (across
# workers; within one worker turns queue and never lose).
MAX_ATTEMPTS = 30
_BASE_DELAY = 0.02
_MAX_DELAY = 0.5
# How long an ``enqueue`` turn waits, in total, for this worker's lock on the thread
# (THREAD_LOCK_WAIT_SECONDS); then it ends with ``thread_busy``.
DEFAULT_LOCK_WAIT_SECONDS = 30.0

logger = logging.getLogger(__name__)

# One per worker process: turns on this worker serialize per thread.
process_locks = ThreadLocks()


def _backoff(attempt: int) -> float:
    """Exponential backoff with full jitter, so racing retries spread out."""
    return random.uniform(0, min(_MAX_DELAY, _BASE_DELAY * 2**attempt))  # noqa: S311 - not cryptographic


def _changed_during(now: ThreadHead, elapsed: float) -> bool:
    """Whether the pointer's last change certainly came while this turn ran (``elapsed``
    seconds), judged on the storage service's clock alone: the record's age, from its
    Last-Modified to the Date of the read that found it, both in whole seconds. A change
    that may have come before the turn began counts as before: the turn runs again on the
    new head, as it would have without the cache, rather than answering 409."""
    age = None if now.stored is None else now.stored.age
    return age is not None and age + CLOCK_RESOLUTION <= elapsed


@dataclass(frozen=True, slots=True)
class _TurnCommit:
    """Commits a saved checkpoint as the thread's new head, by compare-and-swap.

    A turn that loses the race deletes its checkpoint (best effort; the sweep removes
    any left behind) and raises ``ThreadBusy``: nothing it did remains visible.
    """

    service: RunService
    head: ThreadHead
    # The checkpoint the turn resumed from (a fork's ``from_checkpoint_id``, else the head).
    start: str | None
    # The turn's origin: recorded if this turn creates the thread.
    origin: str | None = None

    @property
    def thread_id(self) -> str:
        return self.head.thread_id

    @property
    def replaced_head(self) -> str | None:
        """A fork moves the head away from a checkpoint its lineage does not hold: the new
        checkpoint names it, so what was once a head stays reachable for the sweep."""
        return self.head.checkpoint_id if self.start != self.head.checkpoint_id else None

    @property
    def head_of(self) -> str | None:
        """The thread, when the turn resumes from the very head its swap is conditioned on."""
        return self.thread_id if self.start is not None and self.start == self.head.checkpoint_id else None

    async def after_save(self, checkpoint_id: str) -> None:
        try:
            await self.service.pointers.advance(self.head, checkpoint_id, origin=self.origin)
        except (ThreadBusy, ThreadUnreadable):  # the pointer is not ours: nothing was committed
            try:
                await self.service.store.delete(checkpoint_id)
            except ResumeError:
                logger.warning("Could not delete orphan checkpoint %s", checkpoint_id)
            raise


class ThreadRunner:
    """Turns on one thread; a ``Runner`` like ``RunService``."""

    def __init__(
        self,
        service: RunService,
        thread_id: str,
        locks: ThreadLocks = process_locks,
        *,
        lock_wait_seconds: float = DEFAULT_LOCK_WAIT_SECONDS,
        restart_expired: bool = False,
    ) -> None:
        self.restart_expired = restart_expired
        self.service = service
        self.thread_id = thread_id
        self.locks = locks
        self.lock_wait_seconds = lock_wait_seconds

    async def is_committed(self, checkpoint_id: str, thread_id: str | None) -> bool:
        return await self.service.is_committed(checkpoint_id, thread_id)

    def _deadline(self, request: RunRequest) -> float | None:
        """When an ``enqueue`` turn stops waiting for the lock; None: ``reject``, never wait."""
        if request.multitask != "enqueue":
            return None
        return asyncio.get_running_loop().time() + self.lock_wait_seconds

    def _hold(self, deadline: float | None) -> Any:
        left = 0.0 if deadline is None else max(0.0, deadline - asyncio.get_running_loop().time())
        return self.locks.hold(self.thread_id, wait_seconds=left)

    async def _at_head(self, request: RunRequest) -> tuple[ThreadHead, RunRequest]:
        """The thread's head as read now, and the request aimed at its checkpoint (or, for a
        fork, at ``from_checkpoint_id``, which must be in the thread's lineage)."""
        head = await self.service.pointers.read(self.thread_id)
        if not head.accepts(request.origin):
            raise Forbidden("This thread belongs to another origin; nothing was run.")
        if head.unclaimed:  # a first turn: the metadata's creator, if any, owns the thread
            await refuse_unless_metadata_origin(self.service.pointers, self.thread_id, request.origin)
        if head.deleting:
            raise ThreadBusy("This thread is being deleted; nothing was run.")
        start = head.checkpoint_id
        if request.fork_from is not None:
            if not await self.service.is_committed(request.fork_from, self.thread_id):
                raise CheckpointNotInThread(
                    f"Checkpoint '{request.fork_from}' is not in the lineage of thread '{self.thread_id}'."
                )
            start = request.fork_from
        return head, dataclasses.replace(request, checkpoint_id=start)

    async def _expired(self, head: ThreadHead) -> ThreadExpired | None:
        """After a resume found no checkpoint: ``ThreadExpired`` if the head is really gone.

        The caller never named that checkpoint, so a 404 would mislead. The stale pointer
        is removed (only if unchanged), so the next turn on this ID starts a new thread.
        """
        if head.checkpoint_id is None:
            return None
        try:
            await self.service.store.get_info(head.checkpoint_id)
        except CheckpointNotFound:
            await self.service.pointers.forget_expired(head)
            return expired(self.thread_id)
        return None

    @asynccontextmanager
    async def _expired_if_gone(self, head: ThreadHead) -> AsyncIterator[None]:
        """A resume that finds no checkpoint is ``ThreadExpired`` when the head is really gone."""
        try:
            yield
        except CheckpointNotFound as exc:
            gone = await self._expired(head)
            if gone is None:
                raise
            raise gone from exc

    async def validate(self, request: RunRequest) -> None:
        """Everything this turn would be refused for on the thread as it is now (being
        deleted, a fork outside its lineage, expired, the checkpoint's own checks),
        decided without running or changing anything: a background accept's checks."""
        head, turn = await self._at_head(request)
        try:
            await self.service.validate(turn, thread_id=self.thread_id)
        except CheckpointNotFound:
            if head.checkpoint_id is None or turn.checkpoint_id != head.checkpoint_id:
                raise
            try:
                await self.service.store.get_info(head.checkpoint_id)
            except CheckpointNotFound:
                if not self.restart_expired:
                    raise expired(self.thread_id) from None
                await self.service.validate(dataclasses.replace(turn, checkpoint_id=None), thread_id=self.thread_id)
                return
            raise

    async def run_to_json(self, request: RunRequest, *, before_commit: CommitHook | None = None) -> bytes:
        try:
            return await self._run_to_json(request, before_commit)
        except ThreadExpired:
            if not self.restart_expired:
                raise
            # The stale pointer is gone (``_expired``): the turn starts a new thread.
            return await self._run_to_json(dataclasses.replace(request, thread_created=True), before_commit)

    async def _run_to_json(self, request: RunRequest, before_commit: CommitHook | None) -> bytes:
        attempts = MAX_ATTEMPTS if request.multitask == "enqueue" else 1
        deadline = self._deadline(request)
        for attempt in range(attempts):
            try:
                async with self._hold(deadline):
                    warm = await self._on_cached_head(request, before_commit)
                    if warm is not None:
                        return warm
                    head, turn = await self._at_head(request)
                    async with self._expired_if_gone(head):
                        return await self.service.run_to_json(
                            turn,
                            head=_TurnCommit(self.service, head, turn.checkpoint_id, request.origin),
                            before_commit=before_commit,
                        )
            except ThreadHeld:
                raise
            except ThreadBusy:
                if attempt == attempts - 1:
                    raise
            await asyncio.sleep(_backoff(attempt))
        raise AssertionError("unreachable")

    async def _on_cached_head(self, request: RunRequest, before_commit: CommitHook | None) -> bytes | None:
        """A JSON turn on the head this process last saw, without reading the pointer: the
        compare-and-swap on that pointer version is what proves it is still the head.

        None when there is no such head, or when it proved stale (the swap failed on a
        change older than this turn, or the head is gone): the caller then reads the
        pointer and runs the turn as if the cache had not been there. A change made while
        this turn ran is a race like any other (``ThreadBusy``). Streams never start here:
        a stream whose swap fails has already sent its events.
        """
        head = self.service.pointers.cached(self.thread_id)
        if head is None or request.fork_from is not None or head.deleting or head.checkpoint_id is None:
            return None
        if not head.accepts(request.origin):
            return None  # refused on the pointer as read now, not on a cached one
        started = time.monotonic()
        turn = dataclasses.replace(request, checkpoint_id=head.checkpoint_id)
        commit = _TurnCommit(self.service, head, head.checkpoint_id, request.origin)
        try:
            return await self.service.run_to_json(turn, head=commit, before_commit=before_commit)
        except CheckpointNotFound:
            return None
        except ThreadBusy:
            now = self.service.pointers.cached(self.thread_id)  # as read after the failed swap
            # A pointer changed before this turn began: without the cache the turn would have
            # read it. A pointer gone (a thread deleted) could have gone at any time: a race.
            elapsed = time.monotonic() - started
            if now is not None and now.etag is not None and now.etag != head.etag and not _changed_during(now, elapsed):
                return None
            raise

    async def open_stream(
        self, request: RunRequest, *, before_commit: CommitHook | None = None, cleanup: AsyncExitStack | None = None
    ) -> AsyncIterator[Event]:
        """Hold this worker's turn on the thread for as long as the stream runs.

        The hold is released by whoever closes ``cleanup`` (the run's owner); without one,
        this worker's turn is held only while the stream is being opened.
        """
        try:
            return await self._open_stream(request, before_commit, cleanup)
        except ThreadExpired:
            if not self.restart_expired:
                raise
            return await self._open_stream(dataclasses.replace(request, thread_created=True), before_commit, cleanup)

    async def _open_stream(
        self, request: RunRequest, before_commit: CommitHook | None, cleanup: AsyncExitStack | None
    ) -> AsyncIterator[Event]:
        async with AsyncExitStack() as local:
            await local.enter_async_context(self._hold(self._deadline(request)))
            head, turn = await self._at_head(request)
            async with self._expired_if_gone(head):
                events = await self.service.open_stream(
                    turn,
                    head=_TurnCommit(self.service, head, turn.checkpoint_id, request.origin),
                    before_commit=before_commit,
                )
            if cleanup is not None:
                cleanup.push_async_exit(local.pop_all())
            return events
