"""The record an Idempotency-Key (or webhook-id) names, and its three states.

* ``in_progress``: a request holds the key (``token``), renewed at ``claimed_at``. For a
  call that commits by creating a checkpoint (``/api/runs``), it also names that
  checkpoint (``checkpoint_id``, planned at the claim): the checkpoint then carries the
  response (``embedded``), and its existence is the commit.
* ``committing``: the holder is about to commit ``checkpoint_id`` (on ``thread_id``),
  and ``body`` is the exact response it will give.
* ``completed``: the response (``status``, ``body``) every retry gets, until
  ``expires_at``. A background accept stores its 202 here, with the ``run_id`` it named.

Each state has the fields it must have, with their JSON types: a record of another
shape was not written by this app, and is refused rather than read as some other request.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ..base.errors import (
    IdempotencyKeyReused,
    IdempotencyRecordUnreadable,
    InvalidRequest,
    RequestInProgress,
    ResumeError,
    WebhookIdReused,
)
from ..storage import layout
from ..storage.blob_records import RecordUnreadable
from ..storage.record_store import RecordErrors, Stored
from ..storage.service_clock import lapsed

logger = logging.getLogger(__name__)
IN_PROGRESS, COMMITTING, COMPLETED = "in_progress", "committing", "completed"
MAX_KEY_LENGTH = 255
_NUMBER = (int, float)
_SHAPES: dict[str, dict[str, type | tuple[type, ...]]] = {
    IN_PROGRESS: {"fingerprint": str, "claimed_at": _NUMBER, "token": str},
    COMMITTING: {
        "fingerprint": str,
        "claimed_at": _NUMBER,
        "token": str,
        "checkpoint_id": str,
        "thread_id": (str, type(None)),
        "status": int,
        "body": str,
    },
    COMPLETED: {"fingerprint": str, "status": int, "body": str, "expires_at": _NUMBER},
}
_OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "checkpoint_id": (str, type(None)),
    "thread_id": (str, type(None)),
    "run_id": (str, type(None)),
    "claimed_at": (*_NUMBER, type(None)),
}


@dataclass(frozen=True, slots=True)
class KeyRecord:
    VERSION: ClassVar[int] = 1
    state: str
    fingerprint: str
    token: str | None = None
    claimed_at: float | None = None
    checkpoint_id: str | None = None
    thread_id: str | None = None
    status: int | None = None
    body: bytes | None = None
    expires_at: float | None = None
    run_id: str | None = None

    def held_by(self, token: str) -> bool:
        return self.state in (IN_PROGRESS, COMMITTING) and self.token == token

    def completed(self, *, expires_at: float, status: int | None = None, body: bytes | None = None) -> KeyRecord:
        """This record's response, final (the claim's token and times go)."""
        return KeyRecord(
            COMPLETED,
            self.fingerprint,
            status=self.status if status is None else status,
            body=self.body if body is None else body,
            thread_id=self.thread_id,  # so deleting a thread finds its records
            expires_at=expires_at,
            run_id=self.run_id,
        )

    def renewed(self, now: float) -> KeyRecord:
        return dataclasses.replace(self, claimed_at=now)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"state": self.state, "fingerprint": self.fingerprint}
        for name in ("token", "claimed_at", "checkpoint_id", "status", "expires_at", "run_id"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        if self.state != IN_PROGRESS:
            data["thread_id"] = self.thread_id
        if self.body is not None:
            data["body"] = base64.b64encode(self.body).decode()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KeyRecord:
        shape = _SHAPES.get(data.get("state"))  # type: ignore[arg-type]
        if shape is None:
            raise ValueError("unknown state")
        for name, expected in {**_OPTIONAL, **shape}.items():
            value = data.get(name)
            if (name in shape or value is not None) and (not isinstance(value, expected) or isinstance(value, bool)):
                raise TypeError(f"field {name!r} is missing or has the wrong type")
        body = data.get("body")
        return cls(
            state=data["state"],
            fingerprint=data["fingerprint"],
            token=data.get("token"),
            claimed_at=data.get("claimed_at"),
            checkpoint_id=data.get("checkpoint_id"),
            thread_id=data.get("thread_id"),
            status=data.get("status"),
            body=None if body is None else base64.b64decode(body, validate=True),
            expires_at=data.get("expires_at"),
            run_id=data.get("run_id"),
        )


# A response of up to this many bytes travels in the checkpoint it commits, so the commit
# needs no ``committing`` write; a larger one is written to the record first, as for threads.
EMBED_LIMIT = 64 * 1024
# The key, in a checkpoint's ``metadata``, of the response its commit gave.
EMBEDDED = "idempotency_response"


def embed(fingerprint: str, body: bytes) -> dict[str, Any]:
    """Checkpoint metadata that carries a call's response (its commit is the checkpoint)."""
    return {EMBEDDED: {"fingerprint": fingerprint, "status": 200, "body": body.decode("utf-8")}}


def embedded(metadata: Any, fingerprint: str) -> tuple[int, bytes] | None:
    """The (status, body) a committed checkpoint carries for this request; None if it
    carries none, or one of another request (never replayed as this one's)."""
    found = metadata.get(EMBEDDED) if isinstance(metadata, dict) else None
    if not isinstance(found, dict) or found.get("fingerprint") != fingerprint:
        return None
    status, body = found.get("status"), found.get("body")
    if type(status) is not int or not isinstance(body, str):
        return None
    return status, body.encode("utf-8")


# What a key names: the caller's Idempotency-Key, or a signed delivery's webhook-id.
IDEMPOTENCY_KEY = "idempotency-key"
WEBHOOK_ID = "webhook-id"


def validate_key(key: str) -> str:
    if not 1 <= len(key) <= MAX_KEY_LENGTH or not all(" " <= ch <= "~" for ch in key):
        raise InvalidRequest(f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} printable ASCII characters.")
    return key


def fingerprint(method: str, path: str, body: bytes) -> str:
    """What makes two requests "the same": route and exact body bytes."""
    return hashlib.sha256(f"{method} {path}\n".encode() + body).hexdigest()


def record_name(key: str, kind: str, scope: str | None = None) -> str:
    """The record's name: the namespaces never meet (an Idempotency-Key never matches a
    webhook-id with the same text, nor one caller's key another caller's).

    ``scope``: whose key it is (the caller's origin), so another caller sending the same key
    and body gets its own outcome, never the stored response of someone else's turn. None
    keeps the names records had before scopes (the app's function-key callers, one origin).
    A scoped name's text starts with a newline, which no unscoped one does (keys are
    printable, kinds are header names), and JSON keeps its parts apart.
    """
    validate_key(key)
    if scope is not None:
        text = "\n" + json.dumps([scope, kind, key])
    else:
        text = key if kind == IDEMPOTENCY_KEY else f"{kind}\n{key}"
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredResponse:
    status: int
    body: bytes
    run_id: str | None = None
    # When it was stored (a background accept's 202): how old the accept is.
    stored_at: float | None = None


@dataclass(slots=True)
class KeyClaim:
    """This request holds the key (``record`` holds the ETag its next write must match)."""

    name: str
    fingerprint: str
    record: Stored[KeyRecord]
    token: str

    @property
    def planned_checkpoint_id(self) -> str | None:
        """The checkpoint this call must save under, when its claim planned one."""
        value = self.record.value
        return value.checkpoint_id if value.state == IN_PROGRESS else None

    def carries_response(self, checkpoint_id: str, thread_id: str | None, body: bytes) -> dict[str, object] | None:
        """Checkpoint metadata that makes saving ``checkpoint_id`` this claim's commit record,
        or None when a ``committing`` write must record the commit instead."""
        if thread_id is None and checkpoint_id == self.planned_checkpoint_id and len(body) <= EMBED_LIMIT:
            return embed(self.fingerprint, body)
        return None


class CheckCommit(Exception):
    """The record names a checkpoint: whether it was committed needs a storage read."""

    def __init__(self, stored: Stored[KeyRecord]) -> None:
        self.stored = stored
        self.record = stored.value


def judge(
    stored: Stored[KeyRecord] | None,
    *,
    wanted: KeyRecord,
    kind: str,
    verified: set[str],
    claim_seconds: float,
    ttl_seconds: float,
    on_completed: Callable[[KeyRecord], None],
) -> KeyRecord | None:
    """What a request that wants the key (``wanted``) makes of its record as read
    (``stored``, with its age on the service's clock): ``wanted`` where the key is free
    (absent, expired, or abandoned), None after a replay (``on_completed``), or an error
    (reused, in progress). ``CheckCommit`` when a checkpoint it names is not among the
    ``verified`` (found not committed)."""
    if stored is None:
        return wanted
    current = stored.value
    if current.state == COMPLETED and expired(stored, ttl_seconds):
        return wanted
    if current.fingerprint != wanted.fingerprint:
        raise reused_error(kind)
    if current.state == COMPLETED:
        on_completed(current)
        return None
    if current.checkpoint_id is not None and current.checkpoint_id not in verified:
        raise CheckCommit(stored)  # committing, or in progress on a planned checkpoint
    if not abandoned(stored, claim_seconds):
        raise RequestInProgress("A request with this Idempotency-Key is still running; retry later.")
    # Its holder died without finishing; a planned checkpoint stays the key's.
    return dataclasses.replace(wanted, checkpoint_id=wanted.checkpoint_id and current.checkpoint_id)


def expired(stored: Stored[KeyRecord], ttl_seconds: float) -> bool:
    """Whether a ``completed`` record is past its TTL by the storage service's clock (it is
    never rewritten once completed, so its age counts from completion). Only once this
    instance's clock says so too: a clock running ahead never runs a request again early."""
    if time.time() <= float(stored.value.expires_at or 0):
        return False
    return lapsed(stored, ttl_seconds) is not False


def abandoned(stored: Stored[KeyRecord], claim_seconds: float) -> bool:
    """Whether a claim was left unrenewed for ``claim_seconds``, on the storage service's
    clock alone (``service_clock``): each renewal rewrites the record, so its age is the
    time since. Never this instance's clock against the holder's ``claimed_at``; an age
    the answer cannot tell never counts as abandoned."""
    return lapsed(stored, claim_seconds) is True


def reused_error(kind: str) -> ResumeError:
    if kind == WEBHOOK_ID:
        return WebhookIdReused("This webhook-id was already delivered with a different request.")
    return IdempotencyKeyReused("This Idempotency-Key was used with a different request.")


def stored_response(record: KeyRecord) -> StoredResponse:
    if record.status is None or record.body is None:
        raise IdempotencyRecordUnreadable("The stored response for this Idempotency-Key cannot be read.")
    return StoredResponse(record.status, record.body, record.run_id, record.claimed_at)


def _unreadable(name: str, exc: RecordUnreadable) -> IdempotencyRecordUnreadable:
    logger.error("Idempotency record %s%s.json is unreadable: %s", layout.IDEMPOTENCY, name, exc)
    return IdempotencyRecordUnreadable("The record for this Idempotency-Key cannot be read.")


RECORD_ERRORS = RecordErrors(
    unreadable=_unreadable,
    contended=lambda _name, _exc: RequestInProgress("The Idempotency-Key is contended; retry later."),
)
