"""The one answer to "did checkpoint X commit?".

Three places need it: an idempotent replay (a key whose last write was lost names the
checkpoint it was committing), a background run's commit check (an attempt's intent names
one), and a fork (its checkpoint must be in the thread's lineage). Each asks here, so the
rule is written once:

* **A call without a thread** commits by creating its checkpoint: it committed iff the
  checkpoint exists. When several attempts save under one planned ID, ``stamp`` (the
  checkpoint's timestamp, as the attempt recorded it) says whose save it is.
* **A thread turn** commits by moving the thread's pointer to its checkpoint. It committed
  iff the checkpoint exists and is the head, or is in the pointer's recent lineage, or is
  further back on the head's ``previous_checkpoint_id`` chain: a turn that committed and
  was then built upon stays committed.

The lineage is decided by parent links, never by the timestamps the instances wrote (their
wall clocks may disagree by minutes). A lineage is a chain, so the walk back from the
oldest recent checkpoint stops, "not committed", when it reaches the checkpoint's parent
without passing the checkpoint (another child of that parent holds its place), or a
checkpoint stored before it: an ancestor is always stored before its descendants, read on
the blobs' creation times, the storage service's clock (whole seconds: equal proves
nothing). When the recent list is the whole lineage, or holds the parent, no walk is needed.
"""

from __future__ import annotations

from typing import Any

from ..base.errors import CheckpointNotFound
from ..checkpoints.info import CheckpointInfo
from ..checkpoints.store import CheckpointStore
from ..threads.pointers import ThreadPointers

# How far back the walk goes past the pointer's recent window.
LINEAGE_WALK_LIMIT = 1000


class CommitLedger:
    """Whether a checkpoint was committed, from the checkpoints and the thread's pointer."""

    def __init__(self, store: CheckpointStore, pointers: ThreadPointers) -> None:
        self._store = store
        self._pointers = pointers

    async def _info(self, checkpoint_id: str) -> CheckpointInfo | None:
        try:
            return await self._store.get_info(checkpoint_id)
        except CheckpointNotFound:
            return None

    async def committed(self, checkpoint_id: str, thread_id: str | None = None, *, stamp: str = "") -> bool:
        """Whether ``checkpoint_id`` was committed (on ``thread_id``, for a thread turn).

        ``stamp``: the timestamp the committing attempt gave the checkpoint; a checkpoint
        under that ID with another timestamp is another attempt's (empty: any). Storage
        failures propagate: "cannot tell" is never "not committed"."""
        target = await self._info(checkpoint_id)
        if target is None or (stamp and target.timestamp != stamp):
            return False
        if thread_id is None:
            return True
        head = await self._pointers.read(thread_id)
        if checkpoint_id == head.checkpoint_id or checkpoint_id in head.recent:
            return True
        if head.turns <= len(head.recent) or target.previous_checkpoint_id in head.recent:
            return False  # the recent list is the whole lineage, or holds the parent's child
        return await self._older_lineage_holds(head.recent[-1] if head.recent else None, target)

    async def _older_lineage_holds(self, cursor: str | None, target: CheckpointInfo) -> bool:
        """Whether ``target`` is on the chain of parents from ``cursor`` (the oldest recent)."""
        for _ in range(LINEAGE_WALK_LIMIT):
            if cursor is None or cursor == target.previous_checkpoint_id:
                return False  # reached the parent without passing the checkpoint
            info = await self._info(cursor)
            if info is None:
                return False
            if info.checkpoint_id == target.checkpoint_id:
                return True
            if _stored_before(info, target):
                return False  # every checkpoint further back is older still
            cursor = info.previous_checkpoint_id
        return False

    async def saved_metadata(self, checkpoint_id: str) -> dict[str, Any] | None:
        """A call without a thread that planned ``checkpoint_id``: the metadata it committed
        with (its response travels in it), None if it did not commit. Read whole, with the
        MAC and guard of a resume: the response is only trusted from a checkpoint we wrote."""
        try:
            return (await self._store.load(checkpoint_id)).metadata
        except CheckpointNotFound:
            return None


def _stored_before(info: CheckpointInfo, target: CheckpointInfo) -> bool:
    """``info``'s blob was created strictly before ``target``'s, by the storage service's
    clock (whole seconds: equal times prove nothing). Unknown times prove nothing either."""
    if info.stored_at is None or target.stored_at is None:
        return False
    return info.stored_at < target.stored_at


__all__ = ["LINEAGE_WALK_LIMIT", "CommitLedger"]
