"""Following a background run's events: the log from any point, then live, then its end.

``follow`` yields the run's events in order, whether the run is queued, running or
finished: each attempt's log (``run_events``), a ``restarted`` event (ID ``<attempt>.0``)
when a later attempt took over, the last attempt's tail from its record, and finally the
event the run ended with (``done``, ``error`` or ``cancelled``), written from the settled
record so that it always agrees with the run's status. Each round reads the record first,
then the log: once the record is terminal, every append of its attempt has landed.

It always ends: a run whose record disappears (its thread was deleted, or retention
removed it) ends with an ``error`` event, code ``run_not_found``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from ..base.errors import RunNotFound
from ..core.event_pump import IDLE, IdleTick
from .events import EventReader, LoggedEvent
from .records import RunRecords
from .schema import CANCELLED, FAILED, SUCCEEDED, RunRecord

POLL_SECONDS = 0.5
TERMINAL_EVENTS = frozenset({"done", "error", "cancelled"})


def terminal_event(record: RunRecord) -> tuple[str, dict[str, Any]] | None:
    """The event a finished run's stream ends with: ``done``, ``error`` or ``cancelled``."""
    if record.status == SUCCEEDED:
        return "done", record.status_json()["result"]
    if record.status == FAILED:
        return "error", {"error": None if record.error is None else record.error.to_json()}
    if record.status == CANCELLED:
        return "cancelled", {"run_id": record.run_id, "status": CANCELLED}
    return None


async def follow(
    records: RunRecords,
    reader: EventReader,
    run_id: str,
    after: tuple[int, int] = (0, 0),
    *,
    idle_seconds: float | None = None,
    poll_seconds: float = POLL_SECONDS,
) -> AsyncIterator[LoggedEvent | IdleTick]:
    """The run's events after event ``after`` (attempt, seq), to its end; ``IDLE`` whenever
    nothing happened for ``idle_seconds`` (for keep-alives)."""
    attempt, last = max(after[0], 1), after[1]
    offset = 0
    quiet_since = time.monotonic()
    while True:
        stored = await records.get(run_id)
        if stored is None:
            gone = RunNotFound("The run's record is gone: its thread was deleted, or it expired.")
            yield LoggedEvent(attempt, last + 1, "error", gone.to_body())
            return
        record = stored.value
        events: list[LoggedEvent] = []
        if record.attempts >= attempt:
            events, offset = await reader.read(attempt, offset)
        final = record.terminal and record.attempts <= attempt
        if final:
            events.extend(event for event in record.tail if event.attempt == attempt)
        fresh = [event for event in events if event.seq > last]
        for event in fresh:
            last = event.seq
            yield event
            if event.name in TERMINAL_EVENTS:  # logs written before tails ended with their last event
                return
        if final:
            end = terminal_event(record)
            if end is not None:
                yield LoggedEvent(attempt, last + 1, *end)
            return
        if fresh:
            quiet_since = time.monotonic()
            continue
        if record.attempts > attempt:  # a later attempt took over: follow it
            attempt, last, offset = attempt + 1, 0, 0
            yield LoggedEvent(attempt, 0, "restarted", {"run_id": run_id, "attempt": attempt})
            continue
        if idle_seconds is not None and time.monotonic() - quiet_since >= idle_seconds:
            quiet_since = time.monotonic()
            yield IDLE
        await asyncio.sleep(poll_seconds)


__all__ = ["POLL_SECONDS", "follow", "terminal_event"]
