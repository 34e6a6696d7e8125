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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.cancel_safe import finish_even_if_cancelled
from ..base.errors import ThreadNotFound
from .admin import Metadata, ThreadMetadata
from .pointers import ThreadHead, ThreadPointers

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
) -> Metadata:
    """Replace the metadata the caller read (``read``, with the pointer as ``head``) unless
    the thread is deleted or being deleted (``ThreadNotFound``; nothing of this write stays)."""
    gone = ThreadNotFound(f"Thread '{thread_id}' does not exist (or was deleted).")
    if head.deleting:
        raise gone
    records = ThreadMetadata(container)
    written = await records.replace_as_read(thread_id, values, read=read)
    after = await pointers.read(thread_id)
    if after.deleting or (head.etag is not None and after.etag is None):
        await finish_even_if_cancelled(records.delete(thread_id, etag=written.etag))
        raise gone
    return written


__all__ = ["update_unless_deleted"]
