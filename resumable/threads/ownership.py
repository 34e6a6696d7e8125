"""Whose a thread's data is: checked where it is read, against the caller who asks.

A thread records the origin of its first turn (``pointer_record.Pointer.origin``); its
metadata records the origin of the caller that created it (``metadata_record``). The
pointer decides when a turn has claimed the thread; until then (no pointer yet, or none
any more once retention removed an idle thread's pointer) the metadata's origin does, and
a first turn of another origin is refused too (``thread_turns``). Only a thread with
neither (no record, or records from before origins were kept) is anyone's; one whose
metadata cannot be read is nobody's (``ThreadUnreadable`` for every caller). Every
read of a thread's data through this library (its pointer, a checkpoint of its lineage by
ID, its history, its transcript, the records of its runs and stored responses) takes a
``Caller`` and refuses another origin with ``Forbidden`` before anything is returned or
run. The adapter decides who the caller is (a principal, a function key, an adapter's
channel); the library decides what that caller may read, so a route cannot forget it.

A checkpoint's blob metadata names its thread (``thread_id``, set by every thread turn's
save), so a checkpoint read by ID is the thread's: it answers its thread's origin only.
A checkpoint without a thread (``/api/runs`` without one) is anyone's who holds its ID,
as before origins existed; ``runs.RunService`` never resumes a thread's checkpoint outside
its thread, so no thread-less copy of a thread's state is ever made (docs/security.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

from ..base.errors import CheckpointNotFound, Forbidden, ThreadUnreadable
from ..checkpoints.info import CheckpointInfo
from ..checkpoints.store import CheckpointStore
from .metadata_record import ThreadMetadata
from .pointers import ThreadHead, ThreadPointers

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks, named as a thread records its maker: ``api`` (a function key),
    ``principal:<id>``, ``slack:<team>:<channel>``, ``github:<repository id>``.

    A plain value, no request: whatever protocol the call came in by names it."""

    origin: str
    # The app's own maintenance (an operator's script, a test's set-up): reads every thread.
    MAINTENANCE: ClassVar[Caller]

    def may_use(self, head: ThreadHead) -> bool:
        """Whether the pointer lets this caller in (one without an origin: anyone, as far as
        the pointer tells; ``owned_head`` then asks an unclaimed thread's metadata)."""
        return self is Caller.MAINTENANCE or head.accepts(self.origin)

    def may_use_record(self, origin: str | None) -> bool:
        """Whether this caller started a run whose record names ``origin`` (a record from
        before origins, without one: anyone's)."""
        return self is Caller.MAINTENANCE or origin is None or origin == self.origin


Caller.MAINTENANCE = Caller("\x00maintenance")  # no origin a request can carry (not a valid ID)


def refuse_unless_owner(head: ThreadHead, caller: Caller) -> ThreadHead:
    """``head``, if ``caller`` made its thread; ``Forbidden`` otherwise."""
    if not caller.may_use(head):
        logger.info("Refused a caller of another origin on thread %s", head.thread_id)
        raise Forbidden("You may not use this thread.")
    return head


def refuse_unless_run_owner(origin: str | None, caller: Caller) -> None:
    """``Forbidden`` unless ``caller`` started the run whose record names ``origin``."""
    if not caller.may_use_record(origin):
        raise Forbidden("You may not use this run.")


async def owned_head(pointers: ThreadPointers, thread_id: str, caller: Caller) -> ThreadHead:
    """The thread's pointer, if ``caller`` made the thread (else ``Forbidden``). A thread no
    turn has claimed is its metadata's creator's: one more read, for such a thread only."""
    head = refuse_unless_owner(await pointers.read(thread_id), caller)
    if head.unclaimed and caller is not Caller.MAINTENANCE:
        await refuse_unless_metadata_origin(pointers, thread_id, caller.origin)
    return head


async def refuse_unless_metadata_origin(pointers: ThreadPointers, thread_id: str, origin: str | None) -> None:
    """``Forbidden`` if the thread's metadata was created by another origin than ``origin``
    (a thread no turn has claimed; no metadata, or metadata from before origins: anyone's).
    ``ThreadUnreadable`` for every caller if the metadata cannot be read: its creator is
    unknown, so nobody may read, change or claim the thread until an operator repairs the
    record or erases the thread as maintenance."""
    metadata = await ThreadMetadata(pointers.container).get(thread_id)
    if metadata.unreadable:
        raise ThreadUnreadable(
            f"Thread '{thread_id}' has metadata this app cannot read, so whose it is cannot be told; "
            "nothing was run or changed. An operator must repair or remove it."
        )
    recorded = metadata.origin
    if recorded is not None and recorded != origin:
        logger.info("Refused a caller of another origin on unclaimed thread %s", thread_id)
        raise Forbidden("You may not use this thread.")


def origin_to_record(head: ThreadHead, caller: Caller) -> str | None:
    """The origin a metadata record created now keeps: the thread's, once a turn claimed it
    (None for a legacy thread, anyone's), else the caller's (none for maintenance)."""
    if not head.unclaimed:
        return head.origin
    return None if caller is Caller.MAINTENANCE else caller.origin


async def checkpoint_info(
    pointers: ThreadPointers, store: CheckpointStore, checkpoint_id: str, caller: Caller
) -> CheckpointInfo:
    """A checkpoint's metadata, read by its ID: a thread's checkpoint only for that thread's
    origin (``Forbidden``), and only while the thread is there (a pointer gone or being
    deleted: ``CheckpointNotFound``, as the checkpoint soon is). One HEAD, then the pointer
    for a thread's checkpoint."""
    info = await store.get_info(checkpoint_id)
    if info.thread_id is None:
        return info
    head = refuse_unless_owner(await pointers.read(info.thread_id), caller)
    if head.etag is None or head.deleting:
        raise CheckpointNotFound(f"Checkpoint '{checkpoint_id}' was not found.")
    return info
