"""Idempotency keys: one run per key, and its response replayed to every retry.

A record per key (``idempotency/<sha256(key)>.json``) moves through three states:

* ``in_progress``: created create-only when a request claims the key, and renewed
  every ``RENEW_SECONDS`` while the request runs. A second request with the key gets
  409 ``request_in_progress``. A claim not renewed for ``CLAIM_SECONDS`` belongs to a
  worker that died and may be taken over.
* ``committing``: written (compare-and-swap on the claim) just before the run commits,
  with the ID of the checkpoint it is about to commit and the exact response bytes.
  Whoever later finds this state checks whether that checkpoint was committed: if it
  was, the stored response is the answer and nothing runs again; if not, the claim is
  judged like ``in_progress``. This is what keeps a committed turn from running twice
  when the last write below is lost.
* ``completed``: the response's status and exact bytes. A retry with the same request
  gets those bytes back; a different request with the key gets 422.

Errors release the claim (delete), so a rejected request leaves no record and the
caller's retry is judged afresh. Records expire after the TTL.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from azure.storage.blob.aio import ContainerClient

from . import layout
from .blob_records import BlobRecords, Record, RecordConflict, RecordUnreadable
from .errors import (
    ClaimLost,
    IdempotencyKeyReused,
    IdempotencyRecordUnreadable,
    InvalidRequest,
    RequestInProgress,
    ResumeError,
    WebhookIdReused,
)

logger = logging.getLogger(__name__)
PREFIX = layout.IDEMPOTENCY
MAX_KEY_LENGTH = 255
# A live request renews its claim every RENEW_SECONDS; one not renewed for CLAIM_SECONDS
# is taken to belong to a worker that died.
CLAIM_SECONDS = 300
RENEW_SECONDS = 60

# Answers whether a checkpoint was committed (saved, and for a thread turn, in the
# thread's lineage); ``RunService.is_committed`` is the one the app uses.
CommitCheck = Callable[[str, str | None], Awaitable[bool]]


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


@dataclass(frozen=True, slots=True)
class StoredResponse:
    status: int
    body: bytes


@dataclass(slots=True)
class Claim:
    """This request holds the key; it must ``complete`` or ``release`` it.

    ``record`` is replaced on each write, so it always holds the ETag to match next.
    """

    name: str
    fingerprint: str
    record: Record
    token: str


# The fields each state must have, with their JSON types: a record of another shape was
# not written by this app, and is refused rather than read as "some other request".
_NUMBER = (int, float)
_SHAPES: dict[str, dict[str, type | tuple[type, ...]]] = {
    "in_progress": {"fingerprint": str, "claimed_at": _NUMBER, "token": str},
    "committing": {
        "fingerprint": str,
        "claimed_at": _NUMBER,
        "token": str,
        "checkpoint_id": str,
        "thread_id": (str, type(None)),
        "status": int,
        "body": str,
    },
    "completed": {"fingerprint": str, "status": int, "body": str, "expires_at": _NUMBER},
}


def _check_shape(data: dict[str, Any]) -> None:
    shape = _SHAPES.get(data.get("state"))  # type: ignore[arg-type]
    if shape is None:
        raise RecordUnreadable("unknown state")
    for field_name, expected in shape.items():
        value = data.get(field_name)
        if not isinstance(value, expected) or isinstance(value, bool):
            raise RecordUnreadable(f"field {field_name!r} is missing or has the wrong type")


def _stored(data: dict[str, Any]) -> StoredResponse:
    try:
        return StoredResponse(int(data["status"]), base64.b64decode(data["body"], validate=True))
    except (KeyError, TypeError, ValueError) as exc:
        raise IdempotencyRecordUnreadable("The stored response for this Idempotency-Key cannot be read.") from exc


class IdempotencyStore:
    def __init__(self, container: ContainerClient, *, ttl_seconds: int, committed: CommitCheck) -> None:
        self._records = BlobRecords(container, PREFIX)
        self._ttl = ttl_seconds
        self._committed = committed

    async def _get(self, name: str) -> Record | None:
        try:
            record = await self._records.get(name)
            if record is not None:
                _check_shape(record.data)
        except RecordUnreadable as exc:
            logger.error("Idempotency record %s%s.json is unreadable: %s", PREFIX, name, exc)
            raise IdempotencyRecordUnreadable("The record for this Idempotency-Key cannot be read.") from exc
        return record

    async def begin(self, key: str, request_fingerprint: str, *, kind: str = IDEMPOTENCY_KEY) -> Claim | StoredResponse:
        """Claim the key, or return the stored response of an earlier identical request.

        ``kind`` keeps the two namespaces apart: an Idempotency-Key never matches a
        webhook-id with the same text.
        """
        validate_key(key)
        name = hashlib.sha256(key.encode() if kind == IDEMPOTENCY_KEY else f"{kind}\n{key}".encode()).hexdigest()
        # A token of this attempt: if the create's answer is lost and the SDK's retry
        # meets the record, the token shows it is this request's own claim.
        token = uuid.uuid4().hex
        for _ in range(3):
            now = time.time()
            claim = {"state": "in_progress", "fingerprint": request_fingerprint, "claimed_at": now, "token": token}
            try:
                return Claim(name, request_fingerprint, await self._records.create(name, claim), token)
            except RecordConflict:
                existing = await self._get(name)
            if existing is None:
                continue  # deleted meanwhile: try to create again
            data = existing.data
            state = data.get("state")
            if data.get("token") == token and state == "in_progress":
                return Claim(name, request_fingerprint, existing, token)
            if state == "completed" and now > float(data.get("expires_at", now + 1)):
                with contextlib.suppress(RecordConflict):
                    taken = await self._records.replace(name, claim, existing.etag)
                    return Claim(name, request_fingerprint, taken, token)
                continue
            if data.get("fingerprint") != request_fingerprint:
                if kind == WEBHOOK_ID:
                    raise WebhookIdReused("This webhook-id was already delivered with a different request.")
                raise IdempotencyKeyReused("This Idempotency-Key was used with a different request.")
            if state == "completed":
                return _stored(data)
            if state == "committing" and await self._committed(str(data.get("checkpoint_id")), data.get("thread_id")):
                # The run committed but its last write was lost: its response is final.
                await self._finish(name, data, existing.etag)
                return _stored(data)
            if now - float(data.get("claimed_at", 0)) > CLAIM_SECONDS:
                with contextlib.suppress(RecordConflict):
                    taken = await self._records.replace(name, claim, existing.etag)
                    return Claim(name, request_fingerprint, taken, token)
                continue
            raise RequestInProgress("A request with this Idempotency-Key is still running; retry later.")
        raise RequestInProgress("The Idempotency-Key is contended; retry later.")

    async def renew(self, claim: Claim) -> None:
        """Show the claim is alive; ``ClaimLost`` if it was taken over meanwhile."""
        data = {**claim.record.data, "claimed_at": time.time()}
        try:
            claim.record = await self._records.replace(claim.name, data, claim.record.etag)
        except RecordConflict as exc:
            raise ClaimLost("This request's Idempotency-Key claim was taken over; it was not applied.") from exc

    async def committing(self, claim: Claim, checkpoint_id: str, thread_id: str | None, body: bytes) -> None:
        """Record what is about to be committed; ``ClaimLost`` (commit nothing) if not ours."""
        data = {
            **claim.record.data,
            "state": "committing",
            "claimed_at": time.time(),
            "checkpoint_id": checkpoint_id,
            "thread_id": thread_id,
            "status": 200,
            "body": base64.b64encode(body).decode(),
        }
        try:
            claim.record = await self._records.replace(claim.name, data, claim.record.etag)
        except RecordConflict as exc:
            raise ClaimLost("This request's Idempotency-Key claim was taken over; it was not applied.") from exc

    async def _finish(self, name: str, data: dict[str, Any], etag: str) -> Record | None:
        record = {
            "state": "completed",
            "thread_id": data.get("thread_id"),  # so deleting a thread finds its records
            "fingerprint": data["fingerprint"],
            "status": data["status"],
            "body": data["body"],
            "expires_at": time.time() + self._ttl,
        }
        try:
            return await self._records.replace(name, record, etag)
        except RecordConflict:
            return None
        except ResumeError:
            # Still ``committing``: whoever reads it next checks the commit and replays.
            logger.warning("Could not mark an Idempotency-Key completed; the next retry will")
            return None

    async def complete(self, claim: Claim, status: int, body: bytes) -> None:
        """Store the response. Never raises: the call has already succeeded.

        If storage fails here, the record stays ``committing`` (or ``in_progress``, for a
        response that committed nothing) and the next retry settles it.
        """
        data = {**claim.record.data, "status": status, "body": base64.b64encode(body).decode()}
        record = await self._finish(claim.name, data, claim.record.etag)
        if record is not None:
            claim.record = record

    async def abandon(self, claim: Claim) -> None:
        """The request failed: release the key, unless what it was committing did commit.

        A failure after the commit point (a pointer write whose answer was lost, say)
        must not free the key, or a retry would run the turn a second time. When the
        check cannot be made, the record stays ``committing`` for the next retry to settle.
        """
        data = claim.record.data
        if data.get("state") == "committing":
            try:
                committed = await self._committed(str(data["checkpoint_id"]), data.get("thread_id"))
            except ResumeError:
                logger.warning("Could not tell whether a failed request committed; its key stays held")
                return
            if committed:
                await self.complete(claim, int(data["status"]), base64.b64decode(data["body"]))
                return
        await self.release(claim)

    async def release(self, claim: Claim) -> None:
        """Give the key back so a retry runs again. Never raises (it runs on error paths)."""
        try:
            await self._records.delete(claim.name, etag=claim.record.etag)
        except ResumeError:
            logger.warning("Could not release an Idempotency-Key; its claim will go stale")
