"""A stored synchronous response's record: written before its turn commits, settled by
what the commit did, so nothing of a turn outlives a DELETE of its thread.

* Before the commit (the run owner's commit hook), the record is created as ``running``
  with a commit intent: the checkpoint about to be committed and the exact response, the
  shape a background run's attempt writes. A DELETE of the thread that starts after the
  turn's pointer swap therefore finds the record and removes it with the rest; one that
  fenced the pointer first makes the swap fail, and the record is discarded.
* After the commit, it moves to ``succeeded`` only if it still exists: a DELETE in
  between removed it, and it is never written again.
* A commit known not to have happened: the record is deleted.
* An outcome nobody could tell (storage failed during the commit): the record stays;
  whoever reads it next resolves it (``resolved``) the way a background run's lapsed
  attempt is judged, by asking whether the intent's checkpoint committed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import uuid

from resumable import RunService
from resumable.background import CommitCheck, CommitIntent, RunRecord, RunRecords, may_still_land
from resumable.background import records as rr
from resumable.base import ResumeError
from resumable.storage.record_store import DELETE, Stored

logger = logging.getLogger(__name__)


class PendingRecord:
    """One synchronous response's record, from before its commit until it is settled."""

    def __init__(self, records: RunRecords, record: RunRecord) -> None:
        self._records = records
        self._record = record
        self._stored: Stored[RunRecord] | None = None

    async def write(self, checkpoint_id: str, stamp: str, result: bytes) -> None:
        """Create the record with the intent (before the commit: a failure refuses it).
        ``result``: the run's result, the bytes ``POST /api/runs`` would answer."""
        intent = CommitIntent(uuid.uuid4().hex, checkpoint_id, stamp, result, time.time())
        started = self._record.created_at
        running = dataclasses.replace(
            self._record, status=rr.RUNNING, started_at=started, attempts=1, commits=(intent,)
        )
        self._stored = await self._records.create(running)

    async def committed(self, result: bytes, finished_at: float) -> None:
        """The turn committed: ``succeeded``, unless the record was deleted meanwhile."""
        if self._stored is None:
            return
        try:
            await self._records.update(
                self._record.run_id, lambda r: _succeeded(r, result, finished_at), current=self._stored
            )
        except ResumeError:  # still ``running`` with its intent: the next read resolves it
            logger.warning("Response %s committed; its record is settled on its next read", self._record.run_id)

    async def discard(self) -> None:
        """The turn did not commit: nothing of it stays."""
        if self._stored is None:
            return
        try:
            await self._records.update(self._record.run_id, _unsettled_gone, current=self._stored)
        except ResumeError:  # its next read finds the intent not committed and deletes it
            logger.warning("Could not delete the record of response %s, which did not commit", self._record.run_id)


def _succeeded(current: RunRecord | None, result: bytes, finished_at: float) -> RunRecord | None:
    if current is None or current.status != rr.RUNNING:
        return None
    done = current.finished(rr.SUCCEEDED, result=result)
    return dataclasses.replace(done, finished_at=finished_at, commits=())


def _unsettled_gone(current: RunRecord | None) -> object:
    return DELETE if current is not None and current.status == rr.RUNNING else None


def _unsettled(record: RunRecord) -> bool:
    """A synchronous response's record whose commit was never settled."""
    if record.status != rr.RUNNING or not record.commits:
        return False
    return not json.loads(record.accepted).get("background")


async def resolved(records: RunRecords, service: RunService, found: Stored[RunRecord]) -> Stored[RunRecord] | None:
    """``found``, with an unsettled synchronous response settled: ``succeeded`` if its
    checkpoint committed; deleted (None) once it cannot commit any more; else as it is."""
    record = found.value
    if not _unsettled(record):
        return found
    body = await CommitCheck(service.ledger).committed(record)
    if body is not None:
        at = record.commits[0].at
        return await records.update(record.run_id, lambda r: _succeeded(r, body, at), current=found)
    if may_still_land(found) > 0:
        return found
    return await records.update(record.run_id, _unsettled_gone, current=found)
