"""A completion callback's delivery state: one typed record per run, ``callbacks/<run_id>.json``.

Kept apart from the run record so that a callback's attempts never race the run's own
writes, and changed only through ``RecordStore.update`` (``callback_deliveries`` holds
the state machine). The run record keeps only the callback URL.

* ``outcome``: ``pending`` until one final outcome (``delivered``, ``stopped``,
  ``gave_up``) is written; a final outcome is never changed again.
* ``attempts``: each POST made (time, HTTP status or error class).
* ``first_at``: when the callback was scheduled (``CALLBACK_MAX_SECONDS`` counts from it);
  ``next_at``: the earliest time the next attempt may run, by the writer's clock, and
  ``wait``: the same as seconds after the write that set it, which other instances read
  against the record's age on the storage service's clock (None: a record from before it).
* ``claim`` (a ``DeliveryLease``): the delivery that is POSTing now (its queue message ID, and until when the
  claim holds): a duplicate delivery of the same attempt finds it and does not POST.
* ``reason``: why it gave up (``max_attempts``, ``max_seconds``, ``server_misconfigured``,
  ``queue_deliveries_exhausted``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from azure.storage.blob.aio import ContainerClient

from ..storage import layout
from ..storage.record_store import RecordStore

PREFIX = layout.CALLBACKS
PENDING, DELIVERED, STOPPED, GAVE_UP = "pending", "delivered", "stopped", "gave_up"
OUTCOMES = frozenset({PENDING, DELIVERED, STOPPED, GAVE_UP})


@dataclass(frozen=True, slots=True)
class Attempt:
    """One POST: its HTTP status, or the class of error that kept it from getting one."""

    at: float
    status: int | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "status": self.status} if self.error is None else {"at": self.at, "error": self.error}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attempt:
        if not isinstance(data, dict):
            raise TypeError("attempt")
        status, error = data.get("status"), data.get("error")
        if (status is not None and type(status) is not int) or (error is not None and not isinstance(error, str)):
            raise TypeError("attempt")
        return cls(_number(data["at"]), status, error)


@dataclass(frozen=True, slots=True)
class DeliveryLease:
    """The delivery POSTing now: held from ``at`` until ``until`` (then taken over)."""

    token: str
    at: float
    until: float

    def to_json(self) -> dict[str, Any]:
        return {"token": self.token, "at": self.at, "until": self.until}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DeliveryLease:
        if not isinstance(data, dict):
            raise TypeError("claim")
        return cls(_text(data["token"]), _number(data["at"]), _number(data["until"]))


@dataclass(frozen=True, slots=True)
class CallbackDelivery:
    VERSION: ClassVar[int] = 1
    url: str
    thread_id: str | None
    outcome: str
    attempts: tuple[Attempt, ...]
    first_at: float
    next_at: float
    claim: DeliveryLease | None = None
    reason: str | None = None
    wait: float | None = None

    @property
    def final(self) -> bool:
        return self.outcome != PENDING

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "thread_id": self.thread_id,  # deleted with its thread, as runs are
            "outcome": self.outcome,
            "attempts": [attempt.to_json() for attempt in self.attempts],
            "first_at": self.first_at,
            "next_at": self.next_at,
            "claim": None if self.claim is None else self.claim.to_json(),
            "reason": self.reason,
            "wait": self.wait,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CallbackDelivery:
        outcome, thread_id, reason = data["outcome"], data.get("thread_id"), data.get("reason")
        if outcome not in OUTCOMES or not isinstance(data["attempts"], list):
            raise ValueError("outcome")
        if (thread_id is not None and not isinstance(thread_id, str)) or (
            reason is not None and not isinstance(reason, str)
        ):
            raise TypeError("thread_id or reason")
        claim = data.get("claim")
        return cls(
            url=_text(data["url"]),
            thread_id=thread_id,
            outcome=outcome,
            attempts=tuple(Attempt.from_json(attempt) for attempt in data["attempts"]),
            first_at=_number(data["first_at"]),
            next_at=_number(data["next_at"]),
            claim=None if claim is None else DeliveryLease.from_json(claim),
            reason=reason,
            wait=None if data.get("wait") is None else _number(data["wait"]),
        )


def callback_store(container: ContainerClient) -> RecordStore[CallbackDelivery]:
    """Callback records under ``callbacks/`` in ``container``."""
    return RecordStore(container, PREFIX, CallbackDelivery)


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("text")
    return value


def _number(value: object) -> float:
    if type(value) not in (int, float):
        raise TypeError("number")
    return float(value)  # type: ignore[arg-type]
