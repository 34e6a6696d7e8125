"""Cleanup that a cancelled caller cannot cut short.

When an ASGI server cancels a response after the client disconnects, the
cancellation can be delivered again at every ``await`` in the caller's ``finally``
blocks, so an ``await store.release(...)`` there may never complete. Work passed
to ``finish_even_if_cancelled`` runs as a task of its own: the caller may be
cancelled while waiting for it, but the work itself goes on to the end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")

# Strong references: the event loop keeps only weak ones to running tasks.
_running: set[asyncio.Task[Any]] = set()


def _forget(task: asyncio.Task[Any]) -> None:
    _running.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.error("Cleanup failed", exc_info=task.exception())


async def finish_even_if_cancelled(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to its end in its own task; wait for it unless cancelled meanwhile."""
    task = asyncio.get_running_loop().create_task(work)
    _running.add(task)
    task.add_done_callback(_forget)
    return await asyncio.shield(task)


async def wait_for_cleanups() -> None:
    """Wait for every cleanup still running (tests and scripts, before their loop ends)."""
    while _running:
        await asyncio.gather(*list(_running), return_exceptions=True)
