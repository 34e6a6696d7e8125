"""A warm instance's memory: recently written or read checkpoints, and thread heads.

Checkpoints are immutable and create-only, so a copy kept by ID never goes stale. What
can change is whether the checkpoint still *exists*, and the cache must never answer for
one that another instance could no longer read. The app removes checkpoints in three
ways, and the rule follows them:

* **Retention** deletes a blob idle (unread) for ``checkpointRetentionDays`` (at least a
  day, and at least a day after it was created). The cache answers only for checkpoints
  created less than ``RETENTION_SAFE_SECONDS`` (23 h) ago.
* **Deleting a thread**, and the sweeps of checkpoints no thread reaches, remove only
  checkpoints tagged with a thread, and each first rewrites the thread's pointer. By ID
  (``/api/runs``, a fork, a background run) the cache answers only for checkpoints of no
  thread; a thread turn may take its head from the cache only when it commits by a
  compare-and-swap on the very pointer version that named that head, which fails if a
  delete or a sweep rewrote it meanwhile.
* Nothing else deletes checkpoints. A blob deleted by hand, behind the app's back, is
  seen by every instance within ``FRESH_SECONDS`` (5 min): an entry answers only that
  long after this instance last wrote or read the blob in storage (hits do not extend it).

What is kept is the blob as stored (its bytes and metadata, the MAC's tag among them),
not the decoded checkpoint: every use goes through the same MAC check and guarded
decoder as a download, under the settings of the request that uses it, and no two
requests ever share a mutable checkpoint. Decoding is cheap next to a storage round trip
(about 0.05 ms for 20 KB); copying decoded state for each user would cost as much.

The byte bound counts what an entry really occupies (``footprint``: the bytes object, the
metadata dict and its strings, the key, the entry's own objects), not the blob's length,
so ``CHECKPOINT_CACHE_BYTES`` bounds the cache's share of the process (a test compares it
with ``tracemalloc``). Once the cache is full, every insert pushes out about a checkpoint's
worth of bytes, and freeing an object runs in the thread that drops its last reference: an
entry of ``RELEASE_OFF_LOOP_BYTES`` or more that the cache lets go of (pushed out or
forgotten), and everything a resize drops, is freed on the codec thread (``transfers.release``),
not on the event loop; a smaller entry is freed on the spot, which costs less. Nothing else of a
finished run stays: the run's workflow, executors and decoded checkpoints are freed by
reference counting when its call ends (``af_internals.unlink_handlers``,
``boundary.release_frames``).
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from . import transfers

# Flex Consumption instances have 2 GB (or 512 MB, or 4 GB): 128 MiB holds thousands of
# typical (2-50 KB) checkpoints and leaves room for a burst of large ones in flight.
DEFAULT_CACHE_BYTES = 128 * 1024 * 1024
FRESH_SECONDS = 300.0
RETENTION_SAFE_SECONDS = 23 * 3600.0
MAX_HEADS = 10_000
# From this size an evicted entry is freed on the codec thread. Below it, freeing on the
# loop costs less than the hop: a full cache's insert of 1 or 4 MiB, eviction and free
# included, takes 0.03-0.05 ms on the loop, the hop adds 0.02-0.2 ms (a thread's wake-up);
# freeing a 24 MiB entry there took up to 1.7 ms (bench/results.md, "the loop with a full cache").
RELEASE_OFF_LOOP_BYTES = 8 * 1024 * 1024
# What one entry costs beyond its data, metadata and ID: the LRU's node and key tuple,
# the (value, cost) pair, the ``CachedBlob`` and its two floats (CPython 3.13, 64-bit).
ENTRY_OVERHEAD = 320
_V = TypeVar("_V")


@dataclass(frozen=True, slots=True)
class CachedBlob:
    """A checkpoint blob as stored, and when storage last vouched for it."""

    data: bytes
    metadata: dict[str, str]
    thread_id: str | None
    created: float  # epoch seconds: when the blob was created
    seen: float  # time.monotonic() of this instance's last write or read of it in storage

    def usable(self) -> bool:
        return time.monotonic() - self.seen < FRESH_SECONDS and time.time() - self.created < RETENTION_SAFE_SECONDS


class _Lru(Generic[_V]):
    """An LRU map bounded by a total cost. What it lets go of, it returns rather than drops:
    the caller chooses the thread that frees it."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.size = 0
        self._items: OrderedDict[tuple[str, str], tuple[_V, int]] = OrderedDict()

    def get(self, key: tuple[str, str]) -> _V | None:
        found = self._items.get(key)
        if found is None:
            return None
        self._items.move_to_end(key)
        return found[0]

    def put(self, key: tuple[str, str], value: _V, cost: int) -> list[_V]:
        """Keep ``value``; the entries it replaced or pushed out, least recent first."""
        dropped = self.pop(key)
        if cost > self.capacity // 4:  # one huge entry would flush everything else
            return dropped
        self._items[key] = (value, cost)
        self.size += cost
        while self.size > self.capacity:
            _, (old, old_cost) = self._items.popitem(last=False)
            dropped.append(old)
            self.size -= old_cost
        return dropped

    def pop(self, key: tuple[str, str]) -> list[_V]:
        found = self._items.pop(key, None)
        if found is None:
            return []
        self.size -= found[1]
        return [found[0]]

    def clear(self) -> list[_V]:
        dropped = [value for value, _ in self._items.values()]
        self._items.clear()
        self.size = 0
        return dropped


class CheckpointCache:
    """Checkpoint blobs by (container URL, checkpoint ID), bounded in bytes."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self._blobs: _Lru[CachedBlob] = _Lru(max_bytes)
        self.hits = self.misses = 0

    def resize(self, max_bytes: int) -> None:
        if max_bytes != self._blobs.capacity:
            transfers.release(self._blobs.clear())
            self._blobs = _Lru(max_bytes)

    @property
    def size(self) -> int:
        """The bytes the cache holds now, counted by ``footprint`` (at most its capacity)."""
        return self._blobs.size

    def put(self, scope: str, checkpoint_id: str, blob: CachedBlob) -> None:
        if self._blobs.capacity:
            _let_go(self._blobs.put((scope, checkpoint_id), blob, footprint(checkpoint_id, blob)))

    def find(self, scope: str, checkpoint_id: str, *, head_of: str | None) -> CachedBlob | None:
        """The blob, if the rule above lets the cache answer: by ID (``head_of`` None) only
        for a checkpoint of no thread; as the head of ``head_of`` only for that thread's."""
        blob = self._blobs.get((scope, checkpoint_id))
        if blob is None or not blob.usable() or blob.thread_id != head_of:
            self.misses += 1
            return None
        self.hits += 1
        return blob

    def forget(self, scope: str, checkpoint_id: str) -> None:
        _let_go(self._blobs.pop((scope, checkpoint_id)))


def _let_go(dropped: list[CachedBlob]) -> None:
    """Free small entries here (a few microseconds each, less than a hop to another thread)
    and hand large ones to the codec thread (freeing tens of MiB unmaps them: milliseconds)."""
    large = [blob for blob in dropped if len(blob.data) >= RELEASE_OFF_LOOP_BYTES]
    dropped.clear()  # before the hand-off: no reference may stay behind on this thread
    transfers.release(large)


def footprint(checkpoint_id: str, blob: CachedBlob) -> int:
    """The memory one entry holds: its bytes object, metadata dict and strings, ID and
    ``ENTRY_OVERHEAD`` (the container URL in the key is shared by every entry)."""
    metadata = sum(sys.getsizeof(key) + sys.getsizeof(value) for key, value in blob.metadata.items())
    thread = sys.getsizeof(blob.thread_id) if blob.thread_id is not None else 0
    return (
        sys.getsizeof(blob.data)
        + sys.getsizeof(blob.metadata)
        + metadata
        + sys.getsizeof(checkpoint_id)
        + thread
        + ENTRY_OVERHEAD
    )


class HeadCache:
    """Each thread's pointer as this instance last read or wrote it (with its ETag), so a
    turn can commit by compare-and-swap without reading it first; a stale one fails the
    swap, and the turn then reads the pointer and runs again."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._heads: _Lru[tuple[Any, float]] = _Lru(MAX_HEADS)

    def get(self, scope: str, thread_id: str) -> Any | None:
        found = self._heads.get((scope, thread_id)) if self.enabled else None
        if found is None or time.monotonic() - found[1] >= FRESH_SECONDS:
            return None
        return found[0]

    def put(self, scope: str, thread_id: str, head: Any) -> None:
        if self.enabled:
            self._heads.put((scope, thread_id), (head, time.monotonic()), 1)

    def forget(self, scope: str, thread_id: str) -> None:
        self._heads.pop((scope, thread_id))


_checkpoints = CheckpointCache()
_heads = HeadCache()


def shared(max_bytes: int) -> tuple[CheckpointCache, HeadCache]:
    """This process's caches, sized by ``CHECKPOINT_CACHE_BYTES`` (0 turns both off)."""
    _checkpoints.resize(max_bytes)
    _heads.enabled = max_bytes > 0
    return _checkpoints, _heads
