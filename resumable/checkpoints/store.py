"""The narrow checkpoint store the rest of the library works against.

Core loads and saves, thread deletion and the sweeps delete, and every one of them reads
metadata a listing page at a time; nothing else. Keeping the surface this small (as Agent
Framework's ``CheckpointStorage`` is) puts the listing, the paging and the warm-instance
cache behind one implementation, so no caller can delete a checkpoint a cache still
answers for: whatever a store deletes, its cache forgets first.

Two implementations: ``BlobCheckpointStorage`` (``blob_store.py``, what the app runs on)
and ``MemoryCheckpointStore`` (``memory_store.py``, one process's memory). Both encode
through a ``CheckpointCodec``, so the size cap and the allowlist hold whatever the medium,
and both pass ``tests/library/test_checkpoint_store_contract.py``. Which codec reads a
stored checkpoint (each workflow version has its own allowlist, ``core/catalog.py``) is
given to a store when it is built (``codec_for``); nothing sets it on a store afterwards.
The protocol has methods only, so ``issubclass`` checks an implementation.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from agent_framework import WorkflowCheckpoint

from .info import CheckpointInfo


@runtime_checkable
class CheckpointStore(Protocol):
    """Immutable, create-only checkpoints by ID.

    Every ID is checked (``base.ids.validate_id``: ``InvalidRequest``) before anything is
    read or written. Storage that cannot be reached raises ``StorageUnavailable``.
    """

    async def save(
        self, checkpoint: WorkflowCheckpoint, *, thread_id: str | None = None, replaced_head: str | None = None
    ) -> str:
        """Create the checkpoint; its ID. Never overwrites: another checkpoint under the ID is
        ``CheckpointConflict`` (the same one again, a retry whose answer was lost, is not).
        Encoded by the codec, so an oversized one is ``CheckpointTooLarge`` and one the codec
        could not read back is ``CheckpointNotSaveable``, with nothing stored either way.
        ``thread_id`` tags a thread's (``CheckpointInfo.thread_id``); ``replaced_head`` is the
        head a fork moves away from, kept reachable (``CheckpointInfo.replaced_head_id``)."""
        ...

    async def load(self, checkpoint_id: str, *, head_of: str | None = None) -> WorkflowCheckpoint:
        """The checkpoint, verified and decoded; ``CheckpointNotFound`` if there is none,
        ``CheckpointUnreadable`` if the codec refuses it (over the cap, a type off the allowlist).
        ``head_of``: loaded as that thread's head (a cache may answer only then)."""
        ...

    async def load_described(
        self, checkpoint_id: str, *, head_of: str | None = None
    ) -> tuple[WorkflowCheckpoint, CheckpointInfo]:
        """``load``, and the checkpoint's metadata as ``get_info`` reports it, from the same
        read: a history page with each turn costs what one without them does."""
        ...

    async def delete(self, checkpoint_id: str) -> bool:
        """Delete it, here and from any cache; False if it was already gone."""
        ...

    async def get_info(self, checkpoint_id: str) -> CheckpointInfo:
        """Its metadata without its body; ``CheckpointNotFound`` if there is none."""
        ...

    async def info_page(self, token: str | None, size: int) -> tuple[list[CheckpointInfo], str | None]:
        """At most ``size`` checkpoints' metadata from ``token`` (None: the first page), in
        name order (``<checkpoint_id>.json``, byte by byte, as Blob Storage lists), and the
        next page's token (None: the end). A token is opaque: only this store reads it."""
        ...


__all__ = ["CheckpointStore"]
