"""The shape of a background run's record (``runs/<run_id>.json``): what it holds, typed.

* ``queued`` → ``running`` (an attempt holds ``lease``) → ``succeeded`` | ``failed`` |
  ``cancelled``.
* ``commits``: per attempt, the checkpoint it was about to commit and the exact response
  bytes, written under its lease before the commit itself (see ``commit_check``).
* ``tail``: the last attempt's events that its event log did not get (``run_events``).
* ``handoffs``: attempts that stopped near the invocation's time budget and handed the run on
  (``superstep`` durability): they do not count against ``MAX_ATTEMPTS``. ``progress_from``:
  the newest attempt known to have saved a progress checkpoint (``run_progress``).

Version 1 records (before the types) read as version 2; only ``RunRecords`` writes them.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from ..storage import layout
from .events import LoggedEvent

PREFIX = layout.RUNS
V1_LEASE_SECONDS = 60.0
QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "queued", "running", "succeeded", "failed", "cancelled"
TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELLED})
_STATUSES = frozenset({QUEUED, RUNNING}) | TERMINAL


def rfc3339(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: object) -> bytes:
    if not isinstance(text, str):
        raise TypeError("base64 text")
    return base64.b64decode(text, validate=True)


def _text(value: object, *, optional: bool = False) -> Any:
    if (value is None and optional) or isinstance(value, str):
        return value
    raise TypeError("text")


def _number(value: object, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("number")
    return float(value)


def _count(value: object) -> int:
    if type(value) is not int or value < 0:
        raise TypeError("count")
    return value


@dataclass(frozen=True, slots=True)
class Lease:
    """One attempt's hold on a run: its token, and for how long after the record's last
    change (its Last-Modified, the storage service's clock) the hold lasts unless renewed.

    Every write to a running record is the holder's (claim, renewal, commit intent) or a
    cancel request, so the last change is never older than the holder's last renewal: a
    duration from it is a lower bound of the holder's lease, judged on one clock."""

    token: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"token": self.token, "seconds": self.seconds}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Lease:
        # Version 1 kept an ``until`` on the writer's clock: read it as a full lease.
        return cls(_text(data["token"]), _number(data.get("seconds", V1_LEASE_SECONDS)))


@dataclass(frozen=True, slots=True)
class CommitIntent:
    """What an attempt (``token``) was about to commit: written before the commit itself."""

    token: str
    checkpoint_id: str
    stamp: str
    body: bytes
    at: float
    # ``superstep`` durability: the attempt's events not yet in its log, so that a run found
    # committed after a crash still shows them (its ``tail``); the attempt itself writes its
    # own outcome with its own tail.
    tail: tuple[LoggedEvent, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint_id": self.checkpoint_id,
            "stamp": self.stamp,
            "body": b64(self.body),
            "at": self.at,
            **({"tail": [event.to_json() for event in self.tail]} if self.tail else {}),
        }

    @classmethod
    def from_json(cls, token: str, data: Mapping[str, Any]) -> CommitIntent:
        tail = data.get("tail") or []
        if not isinstance(tail, list):
            raise TypeError("tail")
        return cls(
            token,
            _text(data["checkpoint_id"]),
            _text(data.get("stamp", "")),
            unb64(data["body"]),
            _number(data["at"]),
            tuple(LoggedEvent.from_json(item) for item in tail),
        )


@dataclass(frozen=True, slots=True)
class RunError:
    """Why a run failed (or was cancelled): a stable code and a caller-safe message."""

    code: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunError:
        return cls(_text(data["code"]), _text(data.get("message", "")))


CANCELLED_ERROR = RunError("cancelled", "The run was cancelled.")


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A background run, as its record holds it."""

    VERSION: ClassVar[int] = 2
    run_id: str
    body: bytes
    fingerprint: str
    accepted: bytes
    created_at: float
    status: str = QUEUED
    thread_id: str | None = None
    checkpoint_id: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    attempts: int = 0
    lease: Lease | None = None
    commits: tuple[CommitIntent, ...] = ()
    cancel_requested: bool = False
    result: bytes | None = None
    error: RunError | None = None
    trace: Mapping[str, str] = field(default_factory=dict)
    callback_url: str | None = None
    # Who renders the callback's payload (None: ``run.completed``) and what that renderer
    # needs (a protocol's push token, say): stored as given, deleted with the record.
    callback_format: str | None = None
    callback_params: Mapping[str, str] = field(default_factory=dict)
    # A keyed retry was answered this run's 202 while it was queued: a failing accept's
    # undo leaves it to run (``accept.py``).
    replayed: bool = False
    # The last attempt's events that its log did not get (see ``run_events``).
    tail: tuple[LoggedEvent, ...] = ()
    # The accepted request's origin (``RunRequest.origin``): the run's turn carries it, so a
    # thread refuses a run of another origin as it refuses a synchronous turn.
    origin: str | None = None
    handoffs: int = 0
    progress_from: int = 0

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def holder(self) -> str | None:
        """The token of the attempt holding the lease, if any."""
        return None if self.lease is None else self.lease.token

    def finished(
        self,
        status: str,
        *,
        result: bytes | None = None,
        error: RunError | None = None,
        tail: tuple[LoggedEvent, ...] = (),
    ) -> RunRecord:
        """This record moved to a terminal status (the lease goes with it)."""
        return dataclasses.replace(
            self, status=status, lease=None, finished_at=time.time(), result=result, error=error, tail=tail
        )

    def status_json(self) -> dict[str, Any]:
        """The status document ``GET /api/runs/{id}`` returns."""
        return {
            "run_id": self.run_id,
            "status": self.status,
            "thread_id": self.thread_id,
            "created_at": rfc3339(self.created_at),
            "started_at": rfc3339(self.started_at),
            "finished_at": rfc3339(self.finished_at),
            "attempts": self.attempts,
            "result": None if self.result is None else json.loads(self.result),
            "error": None if self.error is None else self.error.to_json(),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "thread_id": self.thread_id,
            "checkpoint_id": self.checkpoint_id,
            "body": b64(self.body),
            "fingerprint": self.fingerprint,
            "accepted": b64(self.accepted),
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "attempts": self.attempts,
            "lease": None if self.lease is None else self.lease.to_json(),
            "commits": {intent.token: intent.to_json() for intent in self.commits},
            "cancel_requested": self.cancel_requested,
            "result": None if self.result is None else b64(self.result),
            "error": None if self.error is None else self.error.to_json(),
            "trace": dict(self.trace),
            "callback_url": self.callback_url,
            **({"callback_format": self.callback_format} if self.callback_format is not None else {}),
            **({"callback_params": dict(self.callback_params)} if self.callback_params else {}),
            "tail": [event.to_json() for event in self.tail],
            **({"replayed": True} if self.replayed else {}),
            "origin": self.origin,
            **({"handoffs": self.handoffs} if self.handoffs else {}),
            **({"progress_from": self.progress_from} if self.progress_from else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        status = data["status"]
        if status not in _STATUSES:
            raise ValueError("status")
        attempts = data.get("attempts", 0)
        if type(attempts) is not int:
            raise TypeError("attempts")
        lease, commits, error = data.get("lease"), data.get("commits") or {}, data.get("error")
        trace, callback, tail = data.get("trace") or {}, data.get("callback"), data.get("tail") or []
        if not isinstance(commits, dict) or not isinstance(trace, dict) or not isinstance(tail, list):
            raise TypeError("commits")
        if callback is not None and not isinstance(callback, dict):
            raise TypeError("callback")
        callback_params = data.get("callback_params") or {}
        if not isinstance(callback_params, dict):
            raise TypeError("callback_params")
        callback_url = data.get("callback_url", (callback or {}).get("url"))  # version 1 kept the URL there
        return cls(
            run_id=_text(data["run_id"]),
            body=unb64(data["body"]),
            fingerprint=_text(data.get("fingerprint", "")),
            accepted=unb64(data["accepted"]),
            created_at=_number(data["created_at"]),
            status=status,
            thread_id=_text(data.get("thread_id"), optional=True),
            checkpoint_id=_text(data.get("checkpoint_id"), optional=True),
            started_at=_number(data.get("started_at"), optional=True),
            finished_at=_number(data.get("finished_at"), optional=True),
            attempts=attempts,
            lease=None if lease is None else Lease.from_json(lease),
            commits=tuple(CommitIntent.from_json(_text(token), entry) for token, entry in commits.items()),
            cancel_requested=data.get("cancel_requested") is True,
            result=None if data.get("result") is None else unb64(data["result"]),
            error=None if error is None else RunError.from_json(error),
            trace={_text(k): _text(v) for k, v in trace.items()},
            callback_url=_text(callback_url, optional=True),
            callback_format=_text(data.get("callback_format"), optional=True),
            callback_params={_text(k): _text(v) for k, v in callback_params.items()},
            tail=tuple(LoggedEvent.from_json(item) for item in tail),
            replayed=data.get("replayed") is True,
            origin=_text(data.get("origin"), optional=True),
            handoffs=_count(data.get("handoffs", 0)),
            progress_from=_count(data.get("progress_from", 0)),
        )
