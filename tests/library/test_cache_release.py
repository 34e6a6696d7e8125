"""What a full cache costs the event loop: an insert that evicts, a forget, a resize.

Dropping the last reference of a large object frees it on the spot, in whatever thread
drops it; on the loop, every request on the worker waits for that. So the cache hands
what it lets go of to the codec thread (``resumable/checkpoints/cache.py``). These tests
record *where* an entry's bytes are freed, not how long anything takes.
"""

from __future__ import annotations

import asyncio
import threading

from resumable.checkpoints import gate
from resumable.checkpoints.cache import CachedBlob, CheckpointCache, footprint

FREED_IN: dict[str, str] = {}


class Traced(bytes):
    """Checkpoint bytes that note the thread that frees them."""

    name = ""

    def __del__(self) -> None:
        FREED_IN[self.name] = threading.current_thread().name


def entry(name: str, size: int = 1_000) -> CachedBlob:
    data = Traced(b"x" * size)
    data.name = name
    return CachedBlob(data, {"status": "idle"}, None, 9e18, 9e18)


def capacity_for(entries: int, size: int = 1_000) -> int:
    return entries * footprint("id-0", entry("probe", size))


async def settled() -> None:
    """Wait for the codec thread to finish what was handed to it before (one thread, FIFO)."""
    await gate.off_loop(lambda: None)


async def test_an_entry_evicted_on_the_loop_is_freed_on_the_codec_thread() -> None:
    FREED_IN.clear()
    cache = CheckpointCache(capacity_for(4))
    for i in range(4):
        cache.put("c", f"id-{i}", entry(f"old-{i}"))
    cache.put("c", "id-4", entry("new"))  # full: the least recent one goes
    await settled()
    assert {name for name in FREED_IN if name != "probe"} == {"old-0"}
    assert FREED_IN["old-0"].startswith("checkpoint-codec")
    assert cache.find("c", "id-0", head_of=None) is None
    assert cache.find("c", "id-4", head_of=None) is not None


async def test_an_insert_that_evicts_many_entries_frees_none_of_them_on_the_loop() -> None:
    """A large entry pushes out many small ones: the loop only unlinks them."""
    FREED_IN.clear()
    cache = CheckpointCache(capacity_for(40))
    for i in range(40):
        cache.put("c", f"small-{i}", entry(f"small-{i}"))
    cache.put("c", "large", entry("large", 8_000))
    await settled()
    evicted = {name: thread for name, thread in FREED_IN.items() if name.startswith("small-")}
    gone = {f"small-{i}" for i in range(40) if cache.find("c", f"small-{i}", head_of=None) is None}
    assert len(gone) > 1
    assert set(evicted) == gone
    assert {thread.split("_")[0] for thread in evicted.values()} == {"checkpoint-codec"}
    assert cache.size <= capacity_for(40)


async def test_a_forgotten_entry_and_a_resized_cache_are_freed_on_the_codec_thread() -> None:
    FREED_IN.clear()
    cache = CheckpointCache(capacity_for(8))
    for i in range(3):
        cache.put("c", f"id-{i}", entry(f"kept-{i}"))
    cache.forget("c", "id-0")
    cache.resize(capacity_for(2))  # another size: the old entries go at once
    await settled()
    assert {name for name in FREED_IN if name.startswith("kept-")} == {"kept-0", "kept-1", "kept-2"}
    assert {FREED_IN[f"kept-{i}"].split("_")[0] for i in range(3)} == {"checkpoint-codec"}
    assert cache.size == 0


def test_without_a_running_loop_an_evicted_entry_is_freed_at_once() -> None:
    """Outside a loop nobody waits on the caller: no thread hop, memory back at once (the
    byte bound's ``tracemalloc`` test relies on it)."""
    FREED_IN.clear()
    cache = CheckpointCache(capacity_for(2))
    for i in range(3):
        cache.put("c", f"id-{i}", entry(f"e-{i}"))
    assert FREED_IN.get("e-0") == threading.current_thread().name


async def test_the_loop_keeps_answering_while_evicted_entries_are_freed() -> None:
    """The loop does not wait for the codec thread: the insert returns before the release job
    has run, and the release job runs behind the codec work queued ahead of it."""
    FREED_IN.clear()
    cache = CheckpointCache(capacity_for(4))
    for i in range(4):
        cache.put("c", f"id-{i}", entry("first" if i == 0 else f"next-{i}"))
    hold = threading.Event()
    blocked = asyncio.ensure_future(gate.off_loop(hold.wait, 10.0))  # the codec thread is busy
    try:
        await asyncio.sleep(0)
        cache.put("c", "id-4", entry("last"))  # full: evicts "first"
        assert "first" not in FREED_IN  # not freed by the insert itself
    finally:
        hold.set()
        await blocked
    await settled()
    assert FREED_IN["first"].startswith("checkpoint-codec")
