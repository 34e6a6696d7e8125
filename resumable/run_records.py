"""Background runs' records: one JSON blob per run (``runs/<run_id>.json``), moved by CAS.

A record holds the request (its raw body), the run's status, the lease of the attempt
running it, what each attempt was about to commit, and the outcome:

* ``queued`` → ``running`` (an attempt holds ``lease``) → ``succeeded`` | ``failed`` |
  ``cancelled``. A lease not renewed by ``lease.until`` belongs to a crashed instance
  and may be taken over by the next delivery.
* ``commits`` maps each attempt's token to the checkpoint it was about to commit and
  the exact response bytes, written (CAS on the lease) before the commit. Whoever
  finds an unfinished record checks them: a committed one is the run's result, so a
  run that committed is never run again and never reports a second result.

Every write is a compare-and-swap on the record's ETag, so two deliveries of one
message, or a stalled attempt and its successor, cannot both change it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from azure.storage.blob.aio import ContainerClient

from . import layout
from .blob_records import BlobRecords, Record, RecordConflict, RecordUnreadable
from .errors import RunRecordUnreadable

PREFIX = layout.RUNS
QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "queued", "running", "succeeded", "failed", "cancelled"
TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELLED})
_STATUSES = frozenset({QUEUED, RUNNING}) | TERMINAL


def new_run_id() -> str:
    return uuid.uuid4().hex


def keyed_run_id(kind: str, key: str, route: str) -> str:
    """The run ID an Idempotency-Key (or webhook-id) names: a retry finds the same run."""
    return hashlib.sha256(f"{kind}\n{route}\n{key}".encode()).hexdigest()[:32]


def rfc3339(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


@dataclass(slots=True)
class RunRecord:
    """A record as read, with the ETag its next write must match."""

    run_id: str
    data: dict[str, Any]
    etag: str

    @property
    def status(self) -> str:
        return str(self.data["status"])

    @property
    def thread_id(self) -> str | None:
        return self.data.get("thread_id")

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def attempts(self) -> int:
        return int(self.data.get("attempts", 0))

    @property
    def lease_live(self) -> bool:
        lease = self.data.get("lease")
        return self.status == RUNNING and bool(lease) and float(lease["until"]) > time.time()

    @property
    def body(self) -> bytes:
        return unb64(self.data["body"])

    @property
    def accepted(self) -> bytes:
        return unb64(self.data["accepted"])

    def commits(self) -> list[dict[str, Any]]:
        return list(self.data.get("commits", {}).values())

    def to_json(self) -> dict[str, Any]:
        """The status document ``GET /api/runs/{id}`` returns."""
        data = self.data
        result = data.get("result")
        return {
            "run_id": self.run_id,
            "status": self.status,
            "thread_id": self.thread_id,
            "created_at": rfc3339(data.get("created_at")),
            "started_at": rfc3339(data.get("started_at")),
            "finished_at": rfc3339(data.get("finished_at")),
            "attempts": self.attempts,
            "result": None if result is None else json.loads(unb64(result)),
            "error": data.get("error"),
        }


def new_record(
    run_id: str,
    *,
    body: bytes,
    fingerprint: str,
    thread_id: str | None,
    checkpoint_id: str | None,
    accepted: bytes,
    created_at: float,
    traceparent: dict[str, str],
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "status": QUEUED,
        "thread_id": thread_id,
        "checkpoint_id": checkpoint_id,
        "body": b64(body),
        "fingerprint": fingerprint,
        "accepted": b64(accepted),
        "created_at": created_at,
        "started_at": None,
        "finished_at": None,
        "attempts": 0,
        "lease": None,
        "commits": {},
        "cancel_requested": False,
        "result": None,
        "error": None,
        "trace": traceparent,
    }


def finished(
    data: dict[str, Any], status: str, *, result: bytes | None = None, error: dict[str, str] | None = None
) -> dict[str, Any]:
    """``data`` moved to a terminal status (the lease goes with it)."""
    return {
        **data,
        "status": status,
        "lease": None,
        "finished_at": time.time(),
        "result": None if result is None else b64(result),
        "error": error,
    }


class RunRecords:
    """Run records beside the checkpoints, in the same container."""

    def __init__(self, container: ContainerClient) -> None:
        self._records = BlobRecords(container, PREFIX)

    @staticmethod
    def _checked(run_id: str, record: Record | None) -> RunRecord | None:
        if record is None:
            return None
        if record.data.get("status") not in _STATUSES or not isinstance(record.data.get("body"), str):
            raise RunRecordUnreadable("This run's record cannot be read.")
        return RunRecord(run_id, record.data, record.etag)

    async def get(self, run_id: str) -> RunRecord | None:
        try:
            return self._checked(run_id, await self._records.get(run_id))
        except RecordUnreadable as exc:
            raise RunRecordUnreadable("This run's record cannot be read.") from exc

    async def create(self, run_id: str, data: dict[str, Any]) -> RunRecord:
        """Create-only; ``RecordConflict`` when the run already exists."""
        record = await self._records.create(run_id, data)
        return RunRecord(run_id, record.data, record.etag)

    async def replace(self, record: RunRecord, data: dict[str, Any]) -> RunRecord:
        """CAS on ``record``'s ETag; ``RecordConflict`` if it changed meanwhile."""
        written = await self._records.replace(record.run_id, data, record.etag)
        return RunRecord(record.run_id, written.data, written.etag)


__all__ = [
    "CANCELLED",
    "FAILED",
    "QUEUED",
    "RUNNING",
    "SUCCEEDED",
    "TERMINAL",
    "RecordConflict",
    "RunRecord",
    "RunRecordUnreadable",
    "RunRecords",
    "finished",
    "keyed_run_id",
    "new_record",
    "new_run_id",
]
