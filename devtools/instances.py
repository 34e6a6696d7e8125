"""A second app instance in the same test process: its own per-process state, same storage.

What a worker process keeps to itself is its checkpoint and head caches
(``resumable.checkpoints.cache``) and its per-thread turn locks
(``resumable.core.thread_turns.process_locks``). ``Instance.active()`` swaps those for the
instance's own while its requests run, so a request made inside it behaves as one served
by another worker on the same storage account: it sees no cached head, and no lock held by
this process's turns. Everything else (the storage clients, the registered functions) is
shared, as it is between two workers' copies of the same code.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from resumable.checkpoints import cache as checkpoint_cache
from resumable.core import thread_turns


@dataclass
class Instance:
    """One worker's process state; the first ``Instance`` made is usually left implicit."""

    checkpoints: checkpoint_cache.CheckpointCache = field(default_factory=checkpoint_cache.CheckpointCache)
    heads: checkpoint_cache.HeadCache = field(default_factory=checkpoint_cache.HeadCache)
    locks: dict[str, object] = field(default_factory=dict)
    users: dict[str, int] = field(default_factory=dict)

    @contextmanager
    def active(self) -> Iterator[None]:
        """Run what is inside as this instance; the process's own state comes back after."""
        locks = thread_turns.process_locks
        saved = (checkpoint_cache._checkpoints, checkpoint_cache._heads, locks._locks, locks._users)
        checkpoint_cache._checkpoints, checkpoint_cache._heads = self.checkpoints, self.heads
        locks._locks, locks._users = self.locks, self.users  # type: ignore[assignment]
        try:
            yield
        finally:
            checkpoint_cache._checkpoints, checkpoint_cache._heads, locks._locks, locks._users = saved


__all__ = ["Instance"]
