"""The narrow checkpoint store the rest of the library works against.

Core loads and saves, thread deletion and the sweeps delete, and every one of them reads
metadata a listing page at a time; nothing else. Keeping the surface this small (as Agent
Framework's ``CheckpointStorage`` is) puts the listing, the paging and the warm-instance
cache behind one implementation (``BlobCheckpointStorage``), so no caller can delete a
blob the cache still answers for: whatever a store deletes, its cache forgets first.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from agent_framework import WorkflowCheckpoint

from .info import CheckpointInfo


@runtime_checkable
class CheckpointStore(Protocol):
    """Immutable, create-only checkpoints by ID."""

    async def save(
        self, checkpoint: WorkflowCheckpoint, *, thread_id: str | None = None, replaced_head: str | None = None
    ) -> str:
        """Create the checkpoint (never overwrite one); its ID. ``thread_id`` tags a thread's."""
        ...

    async def load(self, checkpoint_id: str, *, head_of: str | None = None) -> WorkflowCheckpoint:
        """The checkpoint, verified and decoded; ``CheckpointNotFound`` if there is none.
        ``head_of``: loaded as that thread's head (a cache may answer only then)."""
        ...

    async def delete(self, checkpoint_id: str) -> bool:
        """Delete it, here and from any cache; False if it was already gone."""
        ...

    async def get_info(self, checkpoint_id: str) -> CheckpointInfo:
        """Its metadata without its body; ``CheckpointNotFound`` if there is none."""
        ...

    async def info_page(self, token: str | None, size: int) -> tuple[list[CheckpointInfo], str | None]:
        """At most ``size`` checkpoints' metadata from ``token`` (None: the first page),
        in name order, and the next page's token (None: the end)."""
        ...


__all__ = ["CheckpointStore"]
