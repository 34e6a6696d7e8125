"""Checkpoint transfers on one worker: a bounded number in flight, big codec work off the loop.

Every request on a worker shares one event loop, and everything that is ready runs
before the loop gets back to anything else. 50 concurrent resumes each download, verify,
decode, encode and upload a checkpoint, and a health probe waits for the sum of their
steps: about 0.5 ms of the storage SDK's pipeline per call, plus the codec. Moving the
codec to threads alone does not cure that: JSON and the pickle scan hold the GIL, so
many codec threads mostly take turns with the loop, and each holds a checkpoint's bytes
and its decoded copy at once (``bench/loop_lag.py`` measures both).

So a worker lets ``MAX_IN_FLIGHT`` transfers (a download with its decode, or an encode
with its upload) run at a time, and runs codec work on one dedicated thread: every
encode (its size is known only once it is done), and decodes above ``OFF_LOOP_BYTES``.
The thread still takes turns with the loop for the GIL (``sys.getswitchinterval``, 5 ms),
and JSON's C code does not let go of it: a 1 MB ``json.dumps`` holds the loop about 1 ms.
A request waiting for its turn holds no checkpoint bytes yet. The run itself (the
workflow's executors) takes no slot: a model-backed workflow waits on its model for
seconds and must hold no one up. Nor is a transfer that waited
``MAX_WAIT_SECONDS`` (a hung storage call elsewhere): the slots smooth bursts, it never
stalls a request. The same thread frees the large entries the checkpoint cache lets go of (``release``).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Callable, MutableSequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

# Above this many bytes, decode runs on the codec thread. The hop costs about 0.1 ms;
# decoding 64 KiB costs several times that, and a 4 MiB checkpoint tens of ms.
OFF_LOOP_BYTES = 64 * 1024
# Transfers in flight per worker. 50 concurrent 1 MB resumes on Azurite: worst loop lag
# about 190 ms ungated, 30-45 ms at 4 to 8, with the same throughput (bench/results.md).
MAX_IN_FLIGHT = 6
MAX_WAIT_SECONDS = 1.0

_T = TypeVar("_T")
_slot_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()
_codec = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-codec")  # starts its thread on first use


def _slots() -> asyncio.Semaphore:
    """This loop's semaphore (one binds to one loop; tests run a loop per test)."""
    loop = asyncio.get_running_loop()
    slots = _slot_pools.get(loop)
    if slots is None:
        slots = _slot_pools[loop] = asyncio.Semaphore(MAX_IN_FLIGHT)
    return slots


@contextlib.asynccontextmanager
async def transfer_slot() -> AsyncIterator[None]:
    """Hold one of this worker's transfer slots, or go ahead after ``MAX_WAIT_SECONDS``."""
    slots = _slots()
    try:
        await asyncio.wait_for(slots.acquire(), MAX_WAIT_SECONDS)
    except TimeoutError:
        yield
        return
    try:
        yield
    finally:
        slots.release()


async def cpu(size: int, work: Callable[..., _T], *args: Any) -> _T:
    """Run ``work`` inline when ``size`` is small, on the codec thread when it is large."""
    if size < OFF_LOOP_BYTES:
        return work(*args)
    return await off_loop(work, *args)


async def off_loop(work: Callable[..., _T], *args: Any) -> _T:
    """Run ``work`` on the codec thread: for work whose size is known only once it is done
    (encoding a checkpoint), where guessing small would hold the loop for a large one."""
    return await asyncio.get_running_loop().run_in_executor(_codec, work, *args)


def release(garbage: MutableSequence[Any]) -> None:
    """Drop ``garbage``'s references on the codec thread, one item at a time, when called on a
    running loop: freeing a megabyte happens in whatever thread drops the last reference, and
    on the loop every request waits for it. One at a time, the loop can take the GIL back
    between items. Without a running loop (or after shutdown) they go here and now."""
    if not garbage:
        return
    try:
        asyncio.get_running_loop()
        _codec.submit(_drop_each, garbage)
    except RuntimeError:  # no running loop, or the executor is shut down
        garbage.clear()


def _drop_each(garbage: MutableSequence[Any]) -> None:
    while garbage:
        garbage.pop()
