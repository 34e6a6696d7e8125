"""A background run's events, kept so that a caller can join the stream at any time.

Each attempt appends its events to an append blob of its own
(``runs/<run_id>/events-<attempt>.jsonl``), one JSON line per event with the ID
``"<attempt>.<seq>"``. Writes are batched (every ``FLUSH_SECONDS`` and at the end),
so a chatty run costs a few appends a second, not one per token. A reader follows a
blob by byte offset, so reconnecting from a ``Last-Event-ID`` re-reads nothing it
does not need.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob.aio import ContainerClient

from . import layout, strict_json
from .cancel_safe import finish_even_if_cancelled
from .errors import ResumeError
from .storage import create_container_if_missing, storage_unavailable_on_failure

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


class EventWriter:
    """Appends one attempt's events; a failed append is logged, never fatal to the run."""

    def __init__(self, container: ContainerClient, run_id: str, attempt: int) -> None:
        self._blob = container.get_blob_client(log_name(run_id, attempt))
        self._container = container
        self._attempt = attempt
        self._seq = 0
        self._buffer: list[bytes] = []
        self._lock = asyncio.Lock()
        self._flusher: asyncio.Task[None] | None = None

    async def open(self) -> None:
        with storage_unavailable_on_failure("create event log"):
            try:
                await self._blob.create_append_blob()
            except ResourceNotFoundError:
                await create_container_if_missing(self._container)
                await self._blob.create_append_blob()
        self._flusher = asyncio.get_running_loop().create_task(self._flush_periodically())

    def add(self, name: str, data: dict[str, Any]) -> None:
        self._seq += 1
        line = {"id": f"{self._attempt}.{self._seq}", "event": name, "data": data}
        self._buffer.append(strict_json.dumps(line) + b"\n")

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            await self.flush()

    async def flush(self) -> None:
        async with self._lock:
            while self._buffer:
                batch, size = [], 0
                while self._buffer and (not batch or size + len(self._buffer[0]) <= _MAX_APPEND):
                    size += len(self._buffer[0])
                    batch.append(self._buffer.pop(0))
                try:
                    with storage_unavailable_on_failure("append events"):
                        await self._blob.append_block(b"".join(batch))
                except ResumeError:
                    logger.warning("Could not append %d events to a run's log; joiners miss them", len(batch))

    async def close(self) -> None:
        """Stop the periodic flush and write what is left, even if the caller is cancelled."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await finish_even_if_cancelled(self.flush())


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
        events: list[LoggedEvent] = []
        for line in raw[:end].splitlines():
            item = json.loads(line)
            event_attempt, seq = (int(part) for part in item["id"].split("."))
            events.append(LoggedEvent(event_attempt, seq, item["event"], item["data"]))
        return events, offset + end


__all__ = ["EventReader", "EventWriter", "LoggedEvent", "log_name"]
