"""What a full cache costs the event loop: an insert that evicts, a forget, a resize.

Dropping the last reference of an object frees it on the spot, in whatever thread drops
it; on the loop, every request on the worker waits for that, and freeing tens of MiB
takes milliseconds. So the cache hands large entries it lets go of to the codec thread
(``resumable/checkpoints/cache.py``), and frees small ones itself (cheaper than a hop).
These tests record *where* an entry's bytes are freed, not how long anything takes.
"""

from __future__ import annotations

import asyncio
import threading

from resumable.checkpoints import transfers
from resumable.checkpoints.cache import RELEASE_OFF_LOOP_BYTES, CachedBlob, CheckpointCache, footprint

LARGE = RELEASE_OFF_LOOP_BYTES
SMALL = 4 * 1024
FREED_IN: dict[str, str] = {}


class Traced(bytes):
    """Checkpoint bytes that note the thread that frees them."""

    name = ""

    def __del__(self) -> None:
        FREED_IN[self.name] = threading.current_thread().name


def entry(name: str, size: int = LARGE) -> CachedBlob:
    data = Traced(b"x" * size)
    data.name = name
    return CachedBlob(data, {"status": "idle"}, None, 9e18, 9e18)


def capacity_for(entries: int, size: int = LARGE) -> int:
    capacity = entries * footprint("id-0", entry("probe", size))
    FREED_IN.pop("probe")
    return capacity


def codec_thread(name: str) -> bool:
    return name.startswith("checkpoint-codec")


async def settled() -> None:
    """Wait for the codec thread to finish what was handed to it before (one thread, FIFO)."""
    await transfers.off_loop(lambda: None)


async def test_a_large_entry_evicted_on_the_loop_is_freed_on_the_codec_thread() -> None:
    FREED_IN.clear()
    cache = CheckpointCache(capacity_for(4))
    for i in range(4):
        cache.put("c", f"id-{i}", entry(f"old-{i}"))
    cache.put("c", "id-4", entry("new"))  # full: the least recent one goes
    await settled()
    assert set(FREED_IN) == {"old-0"}
    assert codec_thread(FREED_IN["old-0"])
    assert cache.find("c", "id-0", head_of=None) is None
    assert cache.find("c", "id-4", head_of=None) is not None


async def test_a_small_evicted_entry_is_freed_by_the_insert_itself() -> None:
    """A few microseconds on the loop: less than waking another thread to do it."""
    FREED_IN.clear()
    cache = CheckpointCache(capacity_for(4, SMALL))
    for i in range(5):
        cache.put("c", f"id-{i}", entry(f"small-{i}", SMALL))
    assert {"small-0": threading.current_thread().name} == FREED_IN


async def test_a_forgotten_entry_and_a_resized_cache_are_freed_on_the_codec_thread() -> None:
    FREED_IN.clear()
    cache = CheckpointCache(capacity_for(8))
    for i in range(3):
        cache.put("c", f"id-{i}", entry(f"kept-{i}"))
    cache.put("c", "small", entry("small", SMALL))
    cache.forget("c", "id-0")
    cache.resize(capacity_for(2))  # another size: the old entries go at once, small ones too
    await settled()
    assert set(FREED_IN) == {"kept-0", "kept-1", "kept-2", "small"}
    assert all(codec_thread(thread) for thread in FREED_IN.values())
    assert cache.size == 0


def test_without_a_running_loop_an_evicted_entry_is_freed_at_once() -> None:
    """Outside a loop nobody waits on the caller: no thread hop, memory back at once (the
    byte bound's ``tracemalloc`` test relies on it)."""
    FREED_IN.clear()
    cache = CheckpointCache(capacity_for(4))
    for i in range(5):
        cache.put("c", f"id-{i}", entry(f"e-{i}"))
    assert {"e-0": threading.current_thread().name} == FREED_IN


async def test_the_insert_does_not_wait_for_the_codec_thread() -> None:
    """The insert returns before the release has run: it runs behind the codec work queued
    ahead of it."""
    FREED_IN.clear()
    cache = CheckpointCache(capacity_for(4))
    for i in range(4):
        cache.put("c", f"id-{i}", entry("first" if i == 0 else f"next-{i}"))
    hold = threading.Event()
    blocked = asyncio.ensure_future(transfers.off_loop(hold.wait, 10.0))  # the codec thread is busy
    try:
        await asyncio.sleep(0)
        cache.put("c", "id-4", entry("last"))  # full: evicts "first"
        assert "first" not in FREED_IN  # not freed by the insert itself
    finally:
        hold.set()
        await blocked
    await settled()
    assert codec_thread(FREED_IN["first"])
