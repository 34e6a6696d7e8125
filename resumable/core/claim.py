"""What a run's owner holds while the run goes on, and settles once: one protocol.

Two things implement it: ``HeldClaim`` (an Idempotency-Key claim on a synchronous call) and
``RunLease`` (a background attempt's lease on its run record). ``RunOwner`` knows only this:

* ``start(tasks)``: keep the claim alive (a renewer or a watcher) in a task created in
  ``tasks``, the call's task owner. The task ends when the claim settles, and never
  outlives its owner, which cancels and awaits it at the latest when the call ends.
* ``before_commit(checkpoint_id, thread_id, body, stamp=...)``: called after the response
  is rendered and before the checkpoint is saved: the last moment to refuse the commit
  (raising refuses it, and nothing is saved).
* ``succeeded(body)`` / ``failed(error)``: settle exactly once, to the end even if the
  caller is cancelled meanwhile (a dropped stream must not leave a key or a run locked).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol


class TaskOwner(Protocol):
    """Creates tasks it then owns: ``asyncio.TaskGroup`` or ``task_scope.TaskScope``."""

    def create_task(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]: ...


class Claim(Protocol):
    def start(self, tasks: TaskOwner) -> None: ...

    async def before_commit(
        self, checkpoint_id: str, thread_id: str | None, body: bytes, *, stamp: str = ""
    ) -> None: ...

    async def succeeded(self, body: bytes) -> None: ...

    async def failed(self, error: BaseException | None = None) -> None: ...


__all__ = ["Claim", "TaskOwner"]
