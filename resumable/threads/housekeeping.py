"""The timer's housekeeping, a pass spread over as many invocations as it takes.

A pass has four phases, each a walk through one listing, a page at a time:

1. ``mark``: list every checkpoint and collect what they link to (``reference_filter.py``);
2. ``sweep``: list them again and sweep the leaves among them (``thread_sweep.sweep_page``:
   fenced, never deleting what a thread reaches, nothing newer than its listing page);
3. ``touch``: list the thread pointers and read one byte of each thread's recent
   checkpoints, so idle-time retention (which goes by last access) keeps them;
4. ``events``: list the background runs and delete event logs whose run record is gone
   (what a crash during a thread's DELETE leaves: ``event_sweep.py``).

Where the pass stands (phase and the listing's continuation token) is a small record,
``maintenance/state.json``, written by compare-and-swap at the end of each invocation.
An invocation starts no new page once the pass's slowest page so far would end past its
budget (but always does one, so every invocation moves on): it can run past its budget
by about one page, at most a thread's longest walk. Once a pass ends, the next starts
``PASS_INTERVAL_SECONDS`` after it began: hourly timer runs then cost one read each.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from collections import Counter
from dataclasses import dataclass

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob.aio import ContainerClient

from ..base.errors import InvalidRequest, ThreadUnreadable
from ..checkpoints.blob_store import blob_name as checkpoint_blob
from ..checkpoints.store import CheckpointStore
from ..storage import layout
from ..storage.failures import download_capped, list_page, storage_unavailable_on_failure, upload_new
from ..storage.record_store import RecordStore, RecordUnreadable, Stored
from .event_sweep import sweep_event_logs
from .pass_state import STATE, PassState, version_key
from .pointers import ThreadPointers
from .reference_filter import ReferenceFilter
from .sweep import sweep_page

logger = logging.getLogger(__name__)

PASS_INTERVAL_SECONDS = 23 * 3600
# Listing pages: small enough that one page fits well inside a short budget.
CHECKPOINT_PAGE = 1000
THREAD_PAGE = 25  # each thread costs its pointer and up to ten ranged reads
EVENT_PAGE = 1000  # run records and logs; a log costs a read only if its record is on another page
TOUCH_CONCURRENCY = 16
_MAX_REFERENCES_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Report:
    phase: str  # where this invocation left the pass
    pass_finished: bool
    deleted: tuple[str, ...]
    touched: int
    pages: int
    seconds: float
    logs_deleted: int = 0


class _Superseded(Exception):
    """Another invocation recorded progress first: this one's record is not written."""


async def run_housekeeping(
    container: ContainerClient,
    pointers: ThreadPointers,
    store: CheckpointStore,
    *,
    budget_seconds: float,
    orphan_min_age_seconds: float,
) -> Report:
    """Go on with the pass from its record for about ``budget_seconds``; record where it stopped."""
    began = time.monotonic()
    records = RecordStore(container, layout.MAINTENANCE, PassState)
    stored = await _read_state(records)
    state = stored.value if stored else None
    if state is not None and state.phase == "done" and time.time() - state.started_at < PASS_INTERVAL_SECONDS:
        return Report("done", False, (), 0, 0, time.monotonic() - began)
    references = None
    if state is not None and state.phase in ("touch", "events"):
        references = ReferenceFilter.empty()  # not needed any more
    elif state is not None and state.phase != "done":
        references = await _load_references(container, state.references)
    if state is None or references is None:
        state = PassState("mark", None, time.time()) if state is None else state.next_pass()
        references = ReferenceFilter.empty()
    work = _Pass(container, pointers, store, references, orphan_min_age_seconds)
    pages, marked = 0, False
    while state.phase != "done" and (not pages or time.monotonic() + state.slowest < began + budget_seconds):
        page_began = time.monotonic()
        marked = marked or state.phase == "mark"
        token = await work.page(state.phase, state.token)
        if state.phase == "touch":
            state = state.counted_heads(work.take_heads())
        state = state.after_page(token, time.monotonic() - page_began)
        pages += 1
    await _record(container, records, stored, state, work if marked else None)
    logger.info(
        "housekeeping invocation",
        extra={
            "phase": state.phase,
            "pages": pages,
            "deleted": len(work.deleted),
            "touched": work.touched,
            "logs_deleted": work.logs_deleted,
        },
    )
    done = state.phase == "done"
    return Report(
        state.phase, done, tuple(work.deleted), work.touched, pages, time.monotonic() - began, work.logs_deleted
    )


async def _read_state(records: RecordStore[PassState]) -> Stored[PassState] | None:
    try:
        return await records.get(STATE)
    except RecordUnreadable:
        logger.error("The housekeeping record is unreadable; it is removed and a new pass starts")
        await records.delete(STATE)
        return None


async def _load_references(container: ContainerClient, name: str | None) -> ReferenceFilter | None:
    """The pass's reference filter; None if it is gone or damaged (the pass starts over)."""
    if name is None:
        return None
    try:
        data, _ = await download_capped(container.get_blob_client(name), _MAX_REFERENCES_BYTES)
        return ReferenceFilter.from_bytes(data)
    except (ResourceNotFoundError, ValueError):
        logger.warning("The housekeeping pass lost its reference filter; a new pass starts")
        return None


async def _record(
    container: ContainerClient,
    records: RecordStore[PassState],
    stored: Stored[PassState] | None,
    state: PassState,
    marked: _Pass | None,
) -> None:
    """Write the new state iff the record is still what this invocation started from.

    A filter that grew is saved under a new name first and the record then points at it,
    so an invocation that was superseded leaves the winner's filter untouched.
    """
    expected = stored.value if stored else None
    saved = None
    if state.phase in ("mark", "sweep") and marked is not None:
        saved = await marked.save_references()
        state = dataclasses.replace(state, references=saved)
    elif state.phase in ("touch", "events", "done"):
        state = dataclasses.replace(state, references=None)

    def advance(current: PassState | None) -> PassState:
        if current != expected:
            raise _Superseded
        return state

    try:
        await records.update(STATE, advance, current=stored)
    except _Superseded:
        logger.warning("Another housekeeping invocation moved the pass on first; this one's position is dropped")
        if saved is not None:
            await _delete_blob(container, saved)
        return
    replaced = expected.references if expected else None
    if replaced is not None and replaced != state.references:
        await _delete_blob(container, replaced)


async def _delete_blob(container: ContainerClient, name: str) -> None:
    with storage_unavailable_on_failure("delete reference filter"), contextlib.suppress(ResourceNotFoundError):
        await container.delete_blob(name)


class _Pass:
    """One invocation's pages of work, and what they did."""

    def __init__(
        self,
        container: ContainerClient,
        pointers: ThreadPointers,
        store: CheckpointStore,
        references: ReferenceFilter,
        orphan_min_age_seconds: float,
    ) -> None:
        self.container, self.pointers, self.store = container, pointers, store
        self.references = references
        self.min_age = orphan_min_age_seconds
        self.deleted: list[str] = []
        self.touched = 0
        self.logs_deleted = 0
        self._heads: Counter[str] = Counter()  # this page's threads per workflow version
        self._gate = asyncio.Semaphore(TOUCH_CONCURRENCY)

    async def page(self, phase: str, token: str | None) -> str | None:
        """Do one page of ``phase`` from ``token``; the next page's token (None: phase done)."""
        if phase == "touch":
            return await self._touch(token)
        if phase == "events":
            deleted, token = await sweep_event_logs(self.container, token, EVENT_PAGE)
            self.logs_deleted += deleted
            return token
        infos, token = await self.store.info_page(token, CHECKPOINT_PAGE)
        if phase == "mark":
            for info in infos:
                if info.thread_id:
                    for link in info.links:
                        self.references.add(link)
        else:
            cutoff = time.time() - self.min_age
            self.deleted += await sweep_page(self.pointers, self.store, infos, self.references, cutoff=cutoff)
        return token

    def take_heads(self) -> Counter[str]:
        heads, self._heads = self._heads, Counter()
        return heads

    async def save_references(self) -> str:
        name = f"{layout.MAINTENANCE}references-{uuid.uuid4().hex}.bin"
        await upload_new(self.container, name, self.references.to_bytes())
        return name

    async def _touch(self, token: str | None) -> str | None:
        blobs, token = await list_page(self.container, layout.THREADS, token, THREAD_PAGE)
        names = [blob.name.removeprefix(layout.THREADS).removesuffix(".json") for blob in blobs]
        counts = await asyncio.gather(*(self._touch_thread(name) for name in names))
        self.touched += sum(counts)
        return token

    async def _touch_thread(self, thread_id: str) -> int:
        try:
            async with self._gate:
                head = await self.pointers.read(thread_id)
        except (InvalidRequest, ThreadUnreadable):
            return 0
        touched = await asyncio.gather(*(self._touch_checkpoint(cid) for cid in head.recent))
        for checkpoint_id, metadata in zip(head.recent, touched, strict=True):
            if checkpoint_id == head.checkpoint_id and metadata is not None and not head.deleting:
                self._heads[version_key(metadata)] += 1
        return sum(metadata is not None for metadata in touched)

    async def _touch_checkpoint(self, checkpoint_id: str) -> dict[str, str] | None:
        """One ranged read: retention goes by last access, and turns read only the head. Its
        metadata (None: gone) names the head's workflow version, for the pass's counts."""
        async with self._gate:
            with storage_unavailable_on_failure("touch checkpoint"):
                try:
                    blob = self.container.get_blob_client(checkpoint_blob(checkpoint_id))
                    downloader = await blob.download_blob(offset=0, length=1)
                    await downloader.readall()
                except ResourceNotFoundError:
                    return None
        return dict(downloader.properties.metadata or {})
