"""The orphan sweep: delete thread checkpoints that no thread's lineage reaches.

Lost races leave checkpoints behind when their immediate delete fails. The sweep finds
them without ever deleting what a thread reaches, whatever commits while it runs: it
looks up checkpoints newer than its listing instead of stopping at them, and fences each
thread's pointer (rewrites it unchanged by compare-and-swap) before deleting, so a turn
still in flight cannot make a deleted checkpoint reachable.
"""

from __future__ import annotations

import asyncio
import logging
import time

from .blob_store import BlobCheckpointStorage
from .checkpoint_info import CheckpointInfo
from .errors import CheckpointNotFound, InvalidRequest, ThreadUnreadable
from .ids import validate_id
from .threads import ThreadHead, ThreadPointers

logger = logging.getLogger(__name__)

# A thread whose pointer keeps moving is left for the next sweep after this many tries.
SWEEP_ATTEMPTS = 5
# Threads swept at once: enough to finish a large container in one timer run.
SWEEP_CONCURRENCY = 16


async def sweep_orphans(
    pointers: ThreadPointers, store: BlobCheckpointStorage, *, older_than_seconds: float = 600
) -> list[str]:
    """Delete thread checkpoints that no thread's lineage reaches; return their IDs.

    Only checkpoints tagged with a ``thread_id`` and older than ``older_than_seconds``
    are considered. Safety does not depend on that age, though: a thread is swept only
    after its pointer is fenced (rewritten, so its ETag changes) with the pointer
    exactly as the reachability walk saw it, so no turn in flight can still make one
    of the listed checkpoints reachable, and checkpoints saved after the listing are
    never candidates. A thread whose pointer cannot be read keeps all its checkpoints.
    """
    infos = {info.checkpoint_id: info for info in await store.list_all_infos()}
    cutoff = time.time() - older_than_seconds
    candidates: dict[str, set[str]] = {}
    for info in infos.values():
        if info.thread_id and info.created_epoch < cutoff:
            candidates.setdefault(info.thread_id, set()).add(info.checkpoint_id)
    gate = asyncio.Semaphore(SWEEP_CONCURRENCY)

    async def sweep_one(thread_id: str, checkpoint_ids: set[str]) -> list[str]:
        async with gate:
            return await _sweep_thread(pointers, store, thread_id, checkpoint_ids, infos)

    swept = await asyncio.gather(*(sweep_one(t, ids) for t, ids in candidates.items()))
    return [checkpoint_id for per_thread in swept for checkpoint_id in per_thread]


async def _sweep_thread(
    pointers: ThreadPointers,
    store: BlobCheckpointStorage,
    thread_id: str,
    candidates: set[str],
    infos: dict[str, CheckpointInfo],
) -> list[str]:
    try:
        validate_id(thread_id, kind="thread_id")
    except InvalidRequest:
        logger.warning("Orphan sweep skipped checkpoints tagged with a thread ID this app does not write")
        return []
    for _ in range(SWEEP_ATTEMPTS):
        try:
            head = await pointers.read(thread_id)
        except ThreadUnreadable:
            logger.error("Orphan sweep kept every checkpoint of thread %s: its pointer is unreadable", thread_id)
            return []
        orphans = sorted(candidates - await _reachable(head, store, infos))
        if not orphans:
            return []
        if await pointers.fence(head) is None:
            continue  # a turn committed since the read: walk again from the new head
        # The fence stays: an empty pointer (no head) reads as "no turns yet", and removing
        # it would let a first turn that is still in flight create the thread on a deleted
        # checkpoint.
        for checkpoint_id in orphans:
            await store.delete(checkpoint_id)
        return orphans
    logger.warning("Orphan sweep skipped thread %s: its pointer kept moving", thread_id)
    return []


async def _reachable(head: ThreadHead, store: BlobCheckpointStorage, infos: dict[str, CheckpointInfo]) -> set[str]:
    """Every checkpoint the head's lineage and its recent list reach, through parents and
    through the old heads forks replaced (so whatever was once a head stays).

    The listing may predate the head: an ID it lacks is looked up, not taken as the end.
    A walk ends at the first checkpoint that no longer exists (retention removed it).
    """
    reached: set[str] = set()
    todo = [start for start in (head.checkpoint_id, *head.recent) if start]
    while todo:
        checkpoint_id = todo.pop()
        if checkpoint_id in reached:
            continue
        reached.add(checkpoint_id)
        info = infos.get(checkpoint_id)
        if info is None:
            try:
                info = await store.get_info(checkpoint_id)
            except (CheckpointNotFound, InvalidRequest):
                continue
        todo.extend(info.links)  # the parent, and the head a fork replaced
    return reached
