"""One owner for one call's whole lifetime, whatever drives it (JSON, SSE, a queue).

``RunOwner`` prepares the run (through its runner: load, validate, hydrate), runs it,
collects or streams its events, has it saved (and a thread advanced), settles its
``Claim``, reports the outcome, and cleans up, all in ``_finish``:

* its helper tasks (the claim's renewer or watcher) belong to one task owner: the caller's
  ``asyncio.TaskGroup`` (a background attempt), or a ``TaskScope`` that ``_finish`` closes
  (a synchronous call, whose stream outlives the request's task);
* a collected (JSON) run finishes in the caller's task, with claim settling shielded;
* a stream finishes in the ``EventPump``'s own task, which a server's cancellation of the
  response cannot interrupt (it can only cancel the run);
* a background attempt (``drive``) runs and finishes in the attempt's task.

Whatever is raised below is mapped at this boundary (``boundary.library_error``), so the
claim always settles with a documented code. A call run to its answer (``result``,
``stream``) has a failure after its commit point resolved here (``commit_outcome``), for
every protocol: committed after all is answered as success, an unknown outcome is never
answered as retryable. A background attempt (``drive``) judges its own (its lease's intent).
No other layer has a ``finally`` that matters for correctness.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, aclosing
from typing import Any

from ..base import strict_json
from ..base.boundary import library_error
from ..base.errors import ResumeError
from ..base.task_scope import TaskScope
from .claim import Claim, TaskOwner
from .commit_outcome import CommitOutcome
from .event_pump import EventPump, IdleTick
from .runs import Event, Runner, RunRequest

# Told the outcome once the call is over: None for success, else the error code.
Outcome = Callable[[str | None], None]
# Takes each event of a driven run (a background attempt's event log).
Sink = Callable[[str, dict[str, Any]], None]


class RunOwner:
    def __init__(
        self,
        runner: Runner,
        request: RunRequest,
        *,
        claim: Claim | None = None,
        on_finish: Outcome | None = None,
        tasks: TaskOwner | None = None,
    ) -> None:
        self._runner = runner
        self._request = request
        self._outcome = CommitOutcome(claim, runner.is_committed)
        self._claim: Claim | None = self._outcome
        self._on_finish = on_finish
        self._stack = AsyncExitStack()
        self._scope = TaskScope() if tasks is None else None
        self._tasks: TaskOwner = tasks if tasks is not None else self._scope  # type: ignore[assignment]

    @property
    def _hook(self) -> Any:
        if self._claim is self._outcome:
            return self._outcome  # a hook that also hears when a save failed (``runs.CommitHook``)
        return self._claim.before_commit if self._claim is not None else None

    def _start(self) -> None:
        if self._claim is not None:
            self._claim.start(self._tasks)

    async def result(self) -> bytes:
        """Run to the end; the exact response bytes. Errors propagate as ``ResumeError``."""
        self._start()
        try:
            body = await self._runner.run_to_json(self._request, before_commit=self._hook)
        except BaseException as exc:
            error = library_error(exc)
            try:
                await self._finish(None, error)
                if self._outcome.reported(error) is None:
                    return self._outcome.response  # it committed after all
                await self._raise(exc, finished=error)
            finally:
                del error  # the raised error's traceback holds this frame (see ``_raise``)
        await self._finish(body, None)
        return body

    async def stream(self, *, keepalive_seconds: float) -> AsyncIterator[Event | IdleTick]:
        """Open the stream (what can be refused is refused here, as a plain error), then
        return its events, with ``IdleTick`` whenever the run is silent for a while."""
        events = await self._open()
        return EventPump(self._owned(events), keepalive_seconds=keepalive_seconds).read()

    async def drive(self, sink: Sink) -> None:
        """Run in this task, handing each event to ``sink`` (a background attempt).

        Every failure settles the claim with its error and ends here; only cancellation
        propagates.
        """
        self._claim = self._outcome.inner  # the attempt's lease judges its own commit
        try:
            events = await self._open()
        except ResumeError:
            return
        async with aclosing(self._owned(events)) as owned:
            async for name, data in owned:
                sink(name, data)

    async def _open(self) -> AsyncIterator[Event]:
        self._start()
        try:
            return await self._runner.open_stream(self._request, before_commit=self._hook, cleanup=self._stack)
        except BaseException as exc:
            await self._raise(exc)
            raise  # unreachable: _raise always raises

    async def _raise(self, exc: BaseException, *, finished: BaseException | None = None) -> Any:
        """Finish with ``exc`` as the library reports it (unless ``finished`` with it
        already), then raise what the caller is told.

        The raised error's traceback holds this frame, whose locals hold the error: a
        cycle that would keep every frame of the failed call (its workflow, its
        checkpoint) alive until the cycle collector ran. The locals are dropped on the way out.
        """
        error = finished or library_error(exc)
        try:
            if finished is None:
                await self._finish(None, error)
            if self._claim is self._outcome:
                error = self._outcome.reported(error) or error
            if error is exc:
                raise exc
            raise error from exc
        finally:
            del error, exc, finished

    async def _owned(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """Runs in the task that drives the stream: the one ``finally`` of a streamed call."""
        body: bytes | None = None
        error: BaseException | None = None
        finished = False
        try:
            async for name, data in events:
                told: Event = (name, data)
                if name == "done":
                    body = strict_json.dumps(data)
                elif name == "error":
                    error = _StreamError(data.get("error", {}))
                    if self._claim is self._outcome:  # resolved before the client hears of it
                        finished = True
                        await self._finish(None, error)
                        told = self._reported_event(error, data)
                yield told
        except BaseException as exc:
            error = library_error(exc)
            raise
        finally:
            try:
                if not finished:
                    await self._finish(body, error if body is None else None)
            finally:
                # The error propagating (a cancellation) has this frame in its traceback:
                # holding it here would be a cycle that keeps the whole call alive.
                error = None

    def _reported_event(self, error: BaseException, data: dict[str, Any]) -> Event:
        """A stream's ``error`` event as the client hears it: ``done`` with the response if
        the turn committed after all; ``outcome_unknown`` if nobody can tell."""
        reported = self._outcome.reported(error)
        if reported is None:
            return "done", strict_json.loads(self._outcome.response)
        if isinstance(reported, ResumeError) and reported is not error:
            return "error", reported.to_body()
        return "error", data

    async def _finish(self, body: bytes | None, error: BaseException | None) -> None:
        try:
            if self._claim is not None:
                await (self._claim.succeeded(body) if body is not None else self._claim.failed(error))
        finally:
            try:
                await self._stack.aclose()
                if self._scope is not None:
                    await self._scope.aclose()
            finally:
                if self._on_finish is not None:
                    self._on_finish(None if error is None else _code(error))


class _StreamError(Exception):
    """An ``error`` event the stream ended with (its code and message)."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.code = str(error.get("code", "internal_error"))
        self.message = str(error.get("message", ""))
        super().__init__(self.code)


def _code(error: BaseException) -> str:
    if isinstance(error, (ResumeError, _StreamError)):
        return error.code
    return "cancelled" if not isinstance(error, Exception) else "internal_error"
