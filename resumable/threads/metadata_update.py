"""Updating a thread's metadata so that no interleaving with its deletion brings it back.

The metadata (``thread-meta/<id>.json``) and the pointer are two blobs, so a metadata write
cannot be made conditional on the pointer. A delete (``delete.py``) tombstones the pointer
first, removes the metadata near its end, and removes the pointer last. An update that
read the thread before the delete started therefore either:

* finds the metadata it read gone when it writes: its write is conditioned on the ETag it
  read (create-only if it read none), so it fails instead of creating a new record, and
  the update is ``ThreadNotFound``;
* or lands while the delete is under way or after it finished (a thread with turns but no
  metadata has nothing to condition on): it then reads the pointer again, finds it
  tombstoned or gone, removes its own write (only if nothing wrote on top of it; a later
  writer does the same) and is ``ThreadNotFound``;
* or lands before the tombstone, and the delete removes it with the rest.

So an update of a thread that is gone or being deleted is ``ThreadNotFound`` whatever the
order, and nothing it wrote outlives the delete.

The same second read of the pointer catches a first turn of another origin that claimed
the thread while this write (on a thread no turn had claimed) was under way: the write is
removed the same way and the update is ``Forbidden``. A record this update creates keeps
its writer's origin (``ownership.origin_to_record``), and the pointer of a thread no turn
has claimed records it too (``_claim``, creating an empty pointer if there is none): a
first turn of another origin already under way then loses its compare-and-swap, and every
later one is refused on the pointer, so the thread can never end up with metadata of one
origin under a pointer of another.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..base.cancel_safe import finish_even_if_cancelled
from ..base.errors import Forbidden, ThreadNotFound
from .metadata_record import Metadata, ThreadMetadata
from .ownership import Caller, origin_to_record
from .pointers import Pointer, ThreadHead, ThreadPointers

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from azure.storage.blob.aio import ContainerClient


async def update_unless_deleted(
    container: ContainerClient,
    pointers: ThreadPointers,
    thread_id: str,
    values: dict[str, str],
    *,
    read: Metadata,
    head: ThreadHead,
    caller: Caller,
    if_match: str | None = None,
) -> Metadata:
    """Replace the metadata ``caller`` read (``read``, with the pointer as ``head``; both
    read after the caller's ownership was checked) unless the thread is deleted or being
    deleted (``ThreadNotFound``) or a turn of another origin claimed it meanwhile
    (``Forbidden``); nothing of a refused write stays. ``if_match``: an ETag (or ``*``)
    the read must have, never applied on top of a concurrent write (412)."""
    gone = ThreadNotFound(f"Thread '{thread_id}' does not exist (or was deleted).")
    if head.deleting:
        raise gone
    records = ThreadMetadata(container)
    origin = origin_to_record(head, caller)  # the record keeps the one it was created with
    written = await records.replace_as_read(thread_id, values, read=read, origin=origin, if_match=if_match)
    after = await pointers.read(thread_id)
    deleted = after.deleting or (head.etag is not None and after.etag is None)
    if not deleted and after.unclaimed and written.origin is not None:
        after = await _claim(pointers, after, written.origin)
        deleted = after.deleting  # a delete that began since: its mark is what the claim met
    if deleted or not caller.may_use(after):
        await finish_even_if_cancelled(records.delete(thread_id, etag=written.etag))
        if deleted:
            raise gone
        raise Forbidden("You may not use this thread.")
    return written


async def _claim(pointers: ThreadPointers, head: ThreadHead, origin: str) -> ThreadHead:
    """Record ``origin`` on a pointer no turn has claimed (creating an empty one if there is
    none), by compare-and-swap on ``head``: a first turn that read the thread before this
    write, found no metadata and so no owner, then fails its own swap instead of claiming a
    thread whose metadata is someone else's. The pointer as it is afterwards."""

    def claimed(pointer: Pointer) -> Pointer:
        return dataclasses.replace(pointer, origin=origin) if pointer.origin is None and not pointer.turns else pointer

    after = await pointers.update(claimed, current=head)
    return after if after is not None else await pointers.read(head.thread_id)


__all__ = ["update_unless_deleted"]
