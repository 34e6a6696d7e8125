"""A background run's events, kept so that a caller can join the stream at any time.

Each attempt's events have IDs ``"<attempt>.<seq>"``. They are written in batches, never
one write per event:

* while the run goes on, every ``FLUSH_SECONDS``, to an append blob of the attempt's own
  (``runs/<run_id>/events-<attempt>.jsonl``, one JSON line per event), created at its
  first flush: a run that ends within one period never creates it;
* what is still buffered when the run settles (the ``tail``) rides in the run record's
  outcome write, which the attempt makes anyway. The log then holds events ``1..k`` and
  the record ``k+1..n``; the outcome write comes after every append, so a reader that
  sees the outcome finds the whole log already written.

A reader follows a log by byte offset, so reconnecting from a ``Last-Event-ID`` re-reads
nothing it does not need.

Under ``superstep`` durability (``progress``) the writer holds events back: only events up
to the last saved progress checkpoint (``advance``) are flushed, so a log never shows an
event of a superstep that a later attempt will redo. Events saved with a progress
checkpoint but not yet flushed ride in it, and the attempt that continues from it writes
them first (``carry``), so no event is lost or repeated across attempts.

A log holds the thread's text, so it must never outlive its thread's DELETE. It carries
its run and thread in its metadata (a delete finds it even without the run's record), it
is only ever *created* here, and nothing is appended to it until a read of the run's
record after the create has found it: a record gone means the run was deleted meanwhile,
and the writer deletes the log it made (a read that fails is made again at the next flush).
DELETE removes a run's record before it lists the run's logs, so whichever comes first,
the log goes (``threads/delete.py``). Appends never create: a log deleted under a run
ends its writing. What a crash leaves between the two is found by housekeeping
(``threads/event_sweep.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob.aio import ContainerClient

from ..base import strict_json
from ..base.errors import ResumeError
from ..storage import layout
from ..storage.failures import create_container_if_missing, storage_unavailable_on_failure

logger = logging.getLogger(__name__)
FLUSH_SECONDS = 0.2
# One append is at most 4 MiB; a batch over this is split.
_MAX_APPEND = 4 * 1024 * 1024


def log_name(run_id: str, attempt: int) -> str:
    return layout.run_events_blob(run_id, attempt)


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    attempt: int
    seq: int
    name: str
    data: dict[str, Any]

    @property
    def event_id(self) -> str:
        return f"{self.attempt}.{self.seq}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.event_id, "event": self.name, "data": self.data}

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> LoggedEvent:
        attempt, seq = (int(part) for part in str(item["id"]).split("."))
        name, data = item["event"], item["data"]
        if not isinstance(name, str) or not isinstance(data, dict):
            raise TypeError("event")
        return cls(attempt, seq, name, data)


class _LogGone(Exception):
    """The run (its thread) was deleted: the log must not exist, and nothing more is written."""


class EventWriter:
    """Buffers one attempt's events and writes them in batches; a failed append is logged,
    never fatal to the run. ``take_tail`` ends the log: what is left goes to the caller."""

    def __init__(self, container: ContainerClient, run_id: str, attempt: int, *, thread_id: str | None = None) -> None:
        self._blob = container.get_blob_client(log_name(run_id, attempt))
        self._record = container.get_blob_client(layout.record_blob(layout.RUNS, run_id))
        self._metadata = {"run_id": run_id, **({"thread_id": thread_id} if thread_id else {})}
        self._container = container
        self._attempt = attempt
        self._seq = 0
        self._buffer: list[LoggedEvent] = []
        self._created = False
        self._checked = False  # the run's record was seen after the log's create
        self._lock = asyncio.Lock()
        self._sealed = asyncio.Event()
        # Held back beyond this seq (None: nothing held back, ``turn`` durability).
        self._watermark: int | None = None

    @property
    def seq(self) -> int:
        """The seq of the last event added."""
        return self._seq

    def hold_back(self) -> None:
        """Flush only what ``advance`` released (``superstep`` durability)."""
        if self._watermark is None:
            self._watermark = self._seq

    def advance(self, seq: int) -> None:
        """Events up to ``seq`` are in a saved progress checkpoint: they may be flushed."""
        if self._watermark is not None:
            self._watermark = max(self._watermark, seq)

    async def buffered(self) -> tuple[LoggedEvent, ...]:
        """A copy of every event not yet in the log, held back or not (after any flush in
        progress has landed): a commit intent carries it under ``superstep`` durability, so a
        crash after the commit, which leaves no outcome write and nothing to redo, loses none."""
        if self._watermark is None:
            return ()
        async with self._lock:
            return tuple(self._buffer)

    async def unflushed(self, upto: int) -> list[LoggedEvent]:
        """The buffered events up to ``upto`` (after any flush in progress has landed)."""
        async with self._lock:
            return [event for event in self._buffer if event.seq <= upto]

    def carry(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        """Write an earlier attempt's events its log never got, as this attempt's first
        events: they belong to supersteps already done, so they are released at once."""
        for name, data in events:
            self.add(name, data)
        self.advance(self._seq)

    def add(self, name: str, data: dict[str, Any]) -> None:
        if self._sealed.is_set():
            return
        self._seq += 1
        self._buffer.append(LoggedEvent(self._attempt, self._seq, name, data))

    async def flush_periodically(self) -> None:
        """Flush every ``FLUSH_SECONDS`` until the log is sealed (run it in the attempt's task group)."""
        while not self._sealed.is_set():
            try:
                await asyncio.wait_for(self._sealed.wait(), FLUSH_SECONDS)
            except TimeoutError:
                await self.flush()

    async def flush(self) -> None:
        async with self._lock:
            if not self._sealed.is_set():
                await self._append(self._take(released=True))

    async def take_tail(self) -> tuple[LoggedEvent, ...]:
        """Seal the log (a flush in progress finishes first) and return what it did not get."""
        async with self._lock:
            self._sealed.set()
            return tuple(self._take())

    async def close(self) -> None:
        """Seal the log with everything written to it (an attempt that ends without an outcome).

        Held-back events are dropped: the attempt that goes on redoes their superstep."""
        async with self._lock:
            if not self._sealed.is_set():
                self._sealed.set()
                await self._append(self._take(released=True))

    async def append_late(self, events: tuple[LoggedEvent, ...]) -> None:
        """Write a tail whose outcome write failed, so joiners still see it (best effort)."""
        async with self._lock:
            await self._append(list(events))

    def _take(self, *, released: bool = False) -> list[LoggedEvent]:
        if released and self._watermark is not None:
            mark = self._watermark
            taken = [event for event in self._buffer if event.seq <= mark]
            self._buffer = [event for event in self._buffer if event.seq > mark]
            return taken
        taken, self._buffer = self._buffer, []
        return taken

    async def _append(self, events: list[LoggedEvent]) -> None:
        lines = [strict_json.dumps(event.to_json()) + b"\n" for event in events]
        count = len(lines)
        try:
            with storage_unavailable_on_failure("append events"):
                if lines and not self._created:
                    await self._create()
                if lines and not self._checked:
                    await self._check_run()
                while lines:
                    batch, size = [], 0
                    while lines and (not batch or size + len(lines[0]) <= _MAX_APPEND):
                        size += len(lines[0])
                        batch.append(lines.pop(0))
                    await self._blob.append_block(b"".join(batch))
        except ResumeError:
            logger.warning("Could not append %d events to a run's log; joiners miss them", count)
        except (ResourceNotFoundError, _LogGone):
            # Deleted with its thread (or the run's record is gone): never write it again.
            self._sealed.set()
            logger.info("A run's event log was deleted with its thread; %d events are not written", count)

    async def _create(self) -> None:
        try:
            await self._blob.create_append_blob(metadata=self._metadata)
        except ResourceNotFoundError:
            await create_container_if_missing(self._container)
            await self._blob.create_append_blob(metadata=self._metadata)
        self._created = True

    async def _check_run(self) -> None:
        """After the create, before any text: is the run's record still there? If not, its
        thread was deleted, and the delete may have listed the run's logs before this one
        landed: delete it. A check that fails is made again before the next batch."""
        if not await self._record.exists():
            self._sealed.set()
            with contextlib.suppress(ResourceNotFoundError):
                await self._blob.delete_blob()
            raise _LogGone
        self._checked = True


class EventReader:
    """Reads an attempt's log from a byte offset; only complete lines count."""

    def __init__(self, container: ContainerClient, run_id: str) -> None:
        self._container = container
        self._run_id = run_id

    async def read(self, attempt: int, offset: int) -> tuple[list[LoggedEvent], int]:
        blob = self._container.get_blob_client(log_name(self._run_id, attempt))
        with storage_unavailable_on_failure("read events"):
            try:
                raw = await (await blob.download_blob(offset=offset)).readall()
            except ResourceNotFoundError:
                return [], offset
            except HttpResponseError as exc:
                if exc.status_code == 416:  # nothing past the offset yet
                    return [], offset
                raise
        end = raw.rfind(b"\n") + 1
        events = [LoggedEvent.from_json(json.loads(line)) for line in raw[:end].splitlines()]
        return events, offset + end


__all__ = ["EventReader", "EventWriter", "LoggedEvent", "log_name"]
