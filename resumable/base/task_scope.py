"""An owner for a call's helper tasks whose end is not a ``with`` block.

A synchronous call's stream is opened in the request's task and runs on in the event
pump's task, so no one ``async with asyncio.TaskGroup()`` spans it. ``TaskScope`` does
what the group's exit does, at the point the call's owner chooses (``RunOwner._finish``):
it cancels the tasks still running and waits for every one of them, even if the caller
is cancelled again meanwhile. It keeps strong references, so no task is collected early.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

logger = logging.getLogger(__name__)


class TaskScope:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def create_task(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]:
        if self._closed:
            coro.close()
            raise RuntimeError("this call's task scope is closed")
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._forget)
        return task

    def _forget(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("A call's helper task failed", exc_info=task.exception())

    async def aclose(self) -> None:
        """Cancel what still runs and wait for all of it (a repeated cancellation included)."""
        self._closed = True
        pending = {task for task in self._tasks if task is not asyncio.current_task()}
        for task in pending:
            task.cancel()
        interrupted = False
        while pending:
            try:
                await asyncio.wait(pending)
            except asyncio.CancelledError:
                interrupted = True
            pending = {task for task in pending if not task.done()}
        if interrupted:
            raise asyncio.CancelledError


__all__ = ["TaskScope"]
