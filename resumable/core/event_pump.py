"""Drive a run's event stream in a task of its own; the HTTP response only reads from it.

Why a task of its own: when a client disconnects, the ASGI server cancels the task
that sends the response, and (Starlette with ASGI spec < 2.4) re-delivers that
cancellation at every ``await`` in the body iterator's ``finally`` blocks. Cleanup
that must happen (releasing an Idempotency-Key, a thread's lock) would then never
finish. Here the run, its save and all of that cleanup happen in the pump's task; the
reader's ``finally`` only cancels the pump, which needs no ``await``. The pump starts
at once, so a response whose body is never read still runs to its end and settles.

The reader also sends a keep-alive comment whenever the run has been silent for
``keepalive_seconds``, so proxies with idle timeouts do not cut a thinking run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

logger = logging.getLogger(__name__)
_END = object()
# Strong references: the loop keeps only weak ones, and a pump whose response is never
# read must still run its call to the end.
_pumping: set[asyncio.Task[None]] = set()


class IdleTick:
    """Yielded by ``EventPump.read`` when nothing happened for a keep-alive interval."""


IDLE = IdleTick()


class EventPump:
    def __init__(self, source: AsyncIterator[Any], *, keepalive_seconds: float) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._keepalive = keepalive_seconds
        self._task = asyncio.get_running_loop().create_task(_pump(source, self._queue))
        _pumping.add(self._task)
        self._task.add_done_callback(_pumping.discard)

    async def read(self) -> AsyncIterator[Any]:
        """The source's items as they come, with ``IDLE`` after each silent interval.

        Leaving early (a disconnect, a cancellation) cancels the run; its cleanup then
        runs in the pump's task, out of the reader's cancellation.
        """
        try:
            while True:
                try:
                    item = await asyncio.wait_for(self._queue.get(), self._keepalive)
                except TimeoutError:
                    yield IDLE
                    continue
                if item is _END:
                    return
                yield item
        finally:
            if not self._task.done():
                self._task.cancel()
                # Waiting is a courtesy (a caller that closes the stream sees its cleanup
                # done); if this reader is itself cancelled, the pump finishes regardless.
                await asyncio.wait({self._task})

    async def finished(self) -> None:
        """Wait for the pump's task to end (tests)."""
        await asyncio.gather(self._task, return_exceptions=True)


async def _pump(source: AsyncIterator[Any], queue: asyncio.Queue[Any]) -> None:
    """The pump's task. A function, not a method: a cancelled task keeps its
    ``CancelledError``, whose traceback holds this frame; were ``self`` among its
    locals, pump, task and error would form a cycle that outlives the call."""
    try:
        async with aclosing(source):  # type: ignore[type-var]
            async for item in source:
                queue.put_nowait(item)
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("An event stream failed outside its own error handling")
    finally:
        queue.put_nowait(_END)
