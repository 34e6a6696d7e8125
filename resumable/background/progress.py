"""A background attempt's progress checkpoints (``superstep`` durability).

After each superstep the framework hands its checkpoint to the run's storage
(``resume.ProgressCheckpoints``), which passes it here. It is encoded through the
workflow's codec (size cap, allowlist), signed like any checkpoint, and written as this
attempt's one progress blob, ``runs/<run_id>/progress-<attempt>.bin``: created once, then
replaced each superstep, each write conditional on the ETag of the one before, so a blob
deleted under the run (its thread's DELETE) is never written again. The thread's head is
not moved: the turn still commits once, at its end, as in ``turn`` durability.

No record write is needed per superstep: the blob's name says which attempt wrote it, and
only that attempt writes it. An attempt that claims a run whose earlier attempts may have
saved progress (``RunRecord.progress_from`` up to its own number) reads the newest of
them that continues from the same checkpoint (``base``): it was written by an attempt
whose lease lapsed (the claim's rule), and any progress blob is a state that attempt
reached at a superstep boundary, so a late write of a stalled attempt can only make the
blob newer, never wrong. Its input was applied before the first progress, so nothing is
applied twice.

The framework logs and ignores a failing ``CheckpointStorage.save``, so nothing is raised
from ``save``: the failure is kept and ``stop_reason`` stops the run at the next event
(the superstep boundary). A storage outage leaves the run for the next delivery
(``ProgressNotSaved``); a checkpoint the codec refuses fails the run with the codec's code.
The same check hands the run on (``HandedOn``) once the invocation's time budget is spent.

Events: the attempt's log holds back events past the last progress (``EventWriter``); the
ones not yet flushed ride in the blob, and the attempt that continues writes those its
predecessor's log lacks before a ``resumed`` event.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from agent_framework import Workflow, WorkflowCheckpoint
from azure.storage.blob.aio import ContainerClient

from ..base import strict_json
from ..base.errors import HandedOn, ProgressNotSaved, ResumeError, RunTakenOver
from ..checkpoints.codec import CheckpointCodec
from ..checkpoints.mac import CheckpointMac, MacMismatch
from ..checkpoints.transfers import off_loop
from ..core.resume import Continuation, fits
from ..storage import layout, sdk
from ..storage.failures import storage_unavailable_on_failure, upload_new
from .events import EventReader, EventWriter, LoggedEvent
from .schema import RunRecord

logger = logging.getLogger(__name__)
_VERSION = 1
_STEP = "superstep"  # blob metadata: which superstep the blob holds (tells our own lost write)


class RunProgress:
    """One attempt's progress checkpoints: ``resume.Progress``."""

    def __init__(
        self,
        container: ContainerClient,
        mac: CheckpointMac,
        record: RunRecord,
        writer: EventWriter,
        *,
        deadline: float | None = None,
    ) -> None:
        self._container = container
        self._mac = mac
        self._run_id = record.run_id
        self._attempt = record.attempts
        self._earliest = max(1, record.progress_from or 1)
        self._writer = writer
        self._deadline = deadline  # on ``time.monotonic``: the invocation's budget ends then
        self._blob = container.get_blob_client(layout.run_progress_blob(record.run_id, record.attempts))
        self._etag: str | None = None
        self._base: str | None = None
        self._stop: ResumeError | None = None
        self.used = False  # the attempt ran with ``superstep`` durability
        self.saved = 0  # progress checkpoints this attempt wrote
        self.resumed_from: int | None = None  # the superstep this attempt continued from

    # -- continuing ---------------------------------------------------------------------

    async def load(self, codec: CheckpointCodec, base: str | None, workflow: Workflow) -> Continuation | None:
        self._base = base
        self.used = True
        self._writer.hold_back()
        for attempt in range(self._attempt - 1, self._earliest - 1, -1):
            found = await self._read(attempt)
            if found is None:
                continue
            header, body = found
            if header.get("base") != base:
                continue  # progress of a turn on another head (it lost a race and ran again)
            checkpoint = codec.decode(body)
            if not fits(workflow, checkpoint):
                logger.warning("Run %s: progress %d is of another graph; the turn starts over", self._run_id, attempt)
                return None
            await self._carry(attempt, header)
            self.resumed_from = checkpoint.iteration_count
            logger.info("Run %s continues from superstep %d", self._run_id, checkpoint.iteration_count)
            return Continuation(checkpoint, header.get("produced") or {})
        return None

    async def _read(self, attempt: int) -> tuple[dict[str, Any], bytes] | None:
        blob = self._container.get_blob_client(layout.run_progress_blob(self._run_id, attempt))
        with storage_unavailable_on_failure("read progress"):
            try:
                downloaded = await blob.download_blob()
                data = await downloaded.readall()
            except sdk.ResourceNotFoundError:
                return None
        try:
            self._mac.verify(data, dict(downloaded.properties.metadata or {}))
        except MacMismatch:
            logger.warning("Run %s: progress checkpoint %d fails its signature; not used", self._run_id, attempt)
            return None
        head, _, body = data.partition(b"\n")
        header = json.loads(head)
        if not isinstance(header, dict) or header.get("v") != _VERSION:
            return None
        return header, body

    async def _carry(self, attempt: int, header: Mapping[str, Any]) -> None:
        """Write the events saved with the progress that ``attempt``'s log lacks, then the marker.

        An attempt between ``attempt`` and this one that continued from the same progress and
        died before saving its own has already written them (with its marker, in one append):
        then only the marker is written again."""
        reader = EventReader(self._container, self._run_id)
        step = header.get("superstep")
        marker = {"run_id": self._run_id, "from_attempt": attempt, "from_superstep": step}
        for between in range(attempt + 1, self._attempt):
            logged, _ = await reader.read(between, 0)
            if any(event.name == "resumed" and event.data == marker for event in logged):
                self._writer.carry([("resumed", marker)])
                return
        logged, _ = await reader.read(attempt, 0)
        shown = max((event.seq for event in logged), default=0)
        saved = [LoggedEvent.from_json(item) for item in header.get("events") or []]
        missing = [(event.name, event.data) for event in saved if event.seq > shown]
        self._writer.carry([*missing, ("resumed", marker)])

    # -- saving -------------------------------------------------------------------------

    async def save(self, checkpoint: WorkflowCheckpoint, produced: Mapping[str, Any], codec: CheckpointCodec) -> None:
        if self._stop is not None:
            return
        try:
            await self._save(checkpoint, produced, codec)
        except ProgressNotSaved as exc:
            self._stop = exc
        except ResumeError as exc:  # refused by the codec, or the blob was removed under the run
            self._stop = exc
        except Exception:
            logger.exception("Saving a progress checkpoint failed")
            self._stop = ProgressNotSaved("A progress checkpoint could not be saved; the run goes on later.")
        else:
            if self._deadline is not None and time.monotonic() >= self._deadline:
                self._stop = HandedOn("The invocation's time budget is spent; the run goes on in another one.")

    async def _save(self, checkpoint: WorkflowCheckpoint, produced: Mapping[str, Any], codec: CheckpointCodec) -> None:
        seq = self._writer.seq
        events = await self._writer.unflushed(seq)
        header = {
            "v": _VERSION,
            "base": self._base,
            "superstep": checkpoint.iteration_count,
            "produced": dict(produced),
            "events": [event.to_json() for event in events],
        }
        body = await off_loop(codec.encode, checkpoint)
        data = strict_json.dumps(header) + b"\n" + body
        metadata = {**self._mac.sign(data), _STEP: str(checkpoint.iteration_count)}
        try:
            with storage_unavailable_on_failure("save progress"):
                await self._write(data, metadata)
        except ResumeError as exc:
            if isinstance(exc, RunTakenOver):
                raise
            raise ProgressNotSaved("A progress checkpoint could not be saved; the run goes on later.") from exc
        self._writer.advance(seq)
        self.saved += 1

    async def _write(self, data: bytes, metadata: dict[str, str]) -> None:
        if self._etag is None:
            try:
                written = await upload_new(self._container, self._blob.blob_name, data, metadata=metadata)
            except sdk.ResourceExistsError:  # this very write, landed, its answer lost and retried
                await self._adopt(data, metadata)
                return
            self._etag = str(written["etag"])
            return
        try:
            written = await self._blob.upload_blob(
                data,
                overwrite=True,
                metadata=metadata,
                etag=self._etag,
                match_condition=sdk.MatchConditions.IfNotModified,
            )
        except sdk.ResourceNotFoundError:
            raise RunTakenOver("The run's progress checkpoint was removed (its thread was deleted).") from None
        except sdk.HttpResponseError as exc:
            if exc.status_code != 412:
                raise
            await self._adopt(data, metadata)  # a retry meeting its own landed write, or a removal
            return
        self._etag = str(written["etag"])

    async def _adopt(self, data: bytes, metadata: dict[str, str]) -> None:
        """The blob is there but this write's answer was lost: take it as ours if it is."""
        try:
            props = await self._blob.get_blob_properties()
        except sdk.ResourceNotFoundError:
            raise RunTakenOver("The run's progress checkpoint was removed (its thread was deleted).") from None
        mine = (props.metadata or {}).get(_STEP) == metadata[_STEP] and int(props.size or 0) == len(data)
        if not mine:
            raise RunTakenOver("The run's progress checkpoint was changed by another writer.")
        self._etag = str(props.etag)

    def stop_reason(self) -> ResumeError | None:
        return self._stop

    async def remove(self, record: RunRecord) -> None:
        """The run ended: remove what progress of it may be in storage. A run of one attempt
        knows its only blob (one DELETE, no listing); after a crash or a lost race, earlier
        attempts' blobs are found by listing the run's prefix."""
        if not self.used:
            return
        if record.attempts == 1 and self.resumed_from is None:
            if self.saved:
                with storage_unavailable_on_failure("delete progress"), contextlib.suppress(sdk.ResourceNotFoundError):
                    await self._blob.delete_blob()
            return
        await delete_progress(self._container, self._run_id)


async def delete_progress(container: ContainerClient, run_id: str) -> int:
    """Remove every progress checkpoint of a run (it ended, or its thread is deleted): one
    listing of the run's own prefix, then a delete per blob found. How many went."""
    removed = 0
    with storage_unavailable_on_failure("delete progress"):
        names = [
            blob.name
            async for blob in container.list_blobs(name_starts_with=layout.run_events_prefix(run_id))
            if layout.is_run_progress(blob.name)
        ]
        for name in names:
            try:
                await container.delete_blob(name)
                removed += 1
            except sdk.ResourceNotFoundError:
                pass
    return removed


__all__ = ["HandedOn", "ProgressNotSaved", "RunProgress", "delete_progress"]
