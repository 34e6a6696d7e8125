"""The orphan sweep: delete thread checkpoints that no thread's lineage reaches.

Lost races leave checkpoints behind when their immediate delete fails. The sweep finds
them without ever deleting what a thread reaches, whatever commits while it runs: it
looks up checkpoints newer than its listing instead of stopping at them, and fences each
thread's pointer (rewrites it unchanged by compare-and-swap) before deleting, so a turn
still in flight cannot make a deleted checkpoint reachable.

It works a listing page at a time (``sweep_page``), so the timer can spread a large
container over several invocations (``housekeeping.py``). Only *leaves* are candidates:
checkpoints no other checkpoint links to (as its parent, or as the head a fork replaced),
given as ``linked``. What something resumed from was once a head, so every lost race's
leftover is a leaf; the heads themselves are leaves too, and the walk keeps them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Container, Iterable, Mapping

from ..base.errors import CheckpointNotFound, InvalidRequest, ThreadUnreadable
from ..base.ids import validate_id
from ..checkpoints.info import CheckpointInfo
from ..checkpoints.store import CheckpointStore
from .pointers import ThreadHead, ThreadPointers

logger = logging.getLogger(__name__)

# A thread whose pointer keeps moving is left for the next sweep after this many tries.
SWEEP_ATTEMPTS = 5
# Threads swept at once.
SWEEP_CONCURRENCY = 16
LIST_PAGE = 5000


async def sweep_orphans(
    pointers: ThreadPointers, store: CheckpointStore, *, older_than_seconds: float = 600
) -> list[str]:
    """One whole pass in one call (one listing, held in memory); return the deleted IDs.

    Only checkpoints tagged with a ``thread_id`` and older than ``older_than_seconds``
    are considered. Safety does not depend on that age, though: a thread is swept only
    after its pointer is fenced (rewritten, so its ETag changes) with the pointer
    exactly as the reachability walk saw it, so no turn in flight can still make one
    of the listed checkpoints reachable, and checkpoints saved after the listing are
    never candidates. A thread whose pointer cannot be read keeps all its checkpoints.
    """
    infos: list[CheckpointInfo] = []
    token: str | None = None
    while True:
        page, token = await store.info_page(token, LIST_PAGE)
        infos += page
        if token is None:
            break
    linked = {link for info in infos if info.thread_id for link in info.links}
    return await sweep_page(pointers, store, infos, linked, cutoff=time.time() - older_than_seconds)


async def sweep_page(
    pointers: ThreadPointers,
    store: CheckpointStore,
    infos: Iterable[CheckpointInfo],
    linked: Container[str],
    *,
    cutoff: float,
) -> list[str]:
    """Sweep the candidates among ``infos`` (one listing page): thread checkpoints created
    before ``cutoff`` that are not in ``linked``. Returns the IDs deleted."""
    page = {info.checkpoint_id: info for info in infos}
    candidates: dict[str, set[str]] = {}
    for info in page.values():
        if info.thread_id and info.created_epoch < cutoff and info.checkpoint_id not in linked:
            candidates.setdefault(info.thread_id, set()).add(info.checkpoint_id)
    gate = asyncio.Semaphore(SWEEP_CONCURRENCY)

    async def sweep_one(thread_id: str, checkpoint_ids: set[str]) -> list[str]:
        async with gate:
            return await _sweep_thread(pointers, store, thread_id, checkpoint_ids, page)

    swept = await asyncio.gather(*(sweep_one(t, ids) for t, ids in candidates.items()))
    return [checkpoint_id for per_thread in swept for checkpoint_id in per_thread]


async def _sweep_thread(
    pointers: ThreadPointers,
    store: CheckpointStore,
    thread_id: str,
    candidates: set[str],
    infos: Mapping[str, CheckpointInfo],
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
        orphans = sorted(await _unreached(head, candidates, store, infos))
        if not orphans:
            return []
        if await pointers.fence(head) is None:
            continue  # a turn committed since the read: walk again from the new head
        # The fence stays: an empty pointer (no head) reads as "no turns yet", and removing
        # it would let a first turn that is still in flight create the thread on a deleted
        # checkpoint.
        # Only what this sweep removed: another sweep running alongside may have been first.
        return [checkpoint_id for checkpoint_id in orphans if await store.delete(checkpoint_id)]
    logger.warning("Orphan sweep skipped thread %s: its pointer kept moving", thread_id)
    return []


async def _unreached(
    head: ThreadHead, candidates: set[str], store: CheckpointStore, infos: Mapping[str, CheckpointInfo]
) -> set[str]:
    """The candidates that the head's lineage, its recent list and the old heads forks
    replaced do not reach. The walk stops as soon as every candidate is reached, so a
    thread with no orphan costs the pointer read and little more.

    The listing may predate the head: an ID it lacks is looked up, not taken as the end.
    A walk ends at the first checkpoint that no longer exists (retention removed it).
    """
    starts = [start for start in (head.checkpoint_id, *head.recent) if start]
    left = candidates - set(starts)
    seen = set(starts)
    todo = deque(starts)
    while todo and left:
        checkpoint_id = todo.popleft()
        info = infos.get(checkpoint_id)
        if info is None:
            try:
                info = await store.get_info(checkpoint_id)
            except (CheckpointNotFound, InvalidRequest):
                continue
        for link in info.links:  # the parent, and the head a fork replaced
            if link not in seen:
                seen.add(link)
                left.discard(link)
                todo.append(link)
    return left
