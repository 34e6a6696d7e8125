"""One owner for one call's whole lifetime, whatever drives it (JSON, SSE, later a queue).

``RunOwner`` prepares the run (through its runner: load, validate, hydrate), runs it,
collects or streams its events, has it saved (and a thread advanced), settles the
Idempotency-Key claim, reports the outcome, and cleans up. Everything that must happen
at the end is registered on one ``AsyncExitStack`` and closed in one place:

* for a collected (JSON) run, in the caller's task, with claim settling shielded;
* for a stream, in the ``EventPump``'s own task, which a server's cancellation of the
  response cannot interrupt (it can only cancel the run).

No other layer has a ``finally`` that matters for correctness.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

from . import strict_json
from .errors import ResumeError
from .event_pump import EventPump, IdleTick
from .held_claim import HeldClaim
from .runs import Event, Runner, RunRequest

# Told the outcome once the call is over: None for success, else the error code.
Outcome = Callable[[str | None], None]


class RunOwner:
    def __init__(
        self,
        runner: Runner,
        request: RunRequest,
        *,
        claim: HeldClaim | None = None,
        on_finish: Outcome | None = None,
    ) -> None:
        self._runner = runner
        self._request = request
        self._claim = claim
        self._on_finish = on_finish
        self._stack = AsyncExitStack()

    @property
    def _hook(self) -> Any:
        return self._claim.before_commit if self._claim is not None else None

    def _start(self) -> None:
        if self._claim is not None:
            self._claim.start_renewing()

    async def result(self) -> bytes:
        """Run to the end; the exact response bytes. Errors propagate as ``ResumeError``."""
        self._start()
        try:
            body = await self._runner.run_to_json(self._request, before_commit=self._hook)
        except BaseException as exc:
            await self._finish(None, exc)
            raise
        await self._finish(body, None)
        return body

    async def stream(self, *, keepalive_seconds: float) -> AsyncIterator[Event | IdleTick]:
        """Open the stream (what can be refused is refused here, as a plain error), then
        return its events, with ``IdleTick`` whenever the run is silent for a while."""
        self._start()
        try:
            events = await self._runner.open_stream(self._request, before_commit=self._hook, cleanup=self._stack)
        except BaseException as exc:
            await self._finish(None, exc)
            raise
        return EventPump(self._owned(events), keepalive_seconds=keepalive_seconds).read()

    async def _owned(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """Runs in the pump's task: the one ``finally`` of a streamed call."""
        body: bytes | None = None
        error: BaseException | None = None
        try:
            async for name, data in events:
                if name == "done":
                    body = strict_json.dumps(data)
                elif name == "error":
                    error = _StreamError(data.get("error", {}))
                yield name, data
        except BaseException as exc:
            error = exc
            raise
        finally:
            await self._finish(body, error if body is None else None)

    async def _finish(self, body: bytes | None, error: BaseException | None) -> None:
        try:
            if self._claim is not None:
                await (self._claim.succeeded(body) if body is not None else self._claim.failed(error))
        finally:
            await self._stack.aclose()
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
