"""Idempotency-Key handling: the first completed response is stored and replayed.

A record per key (``idempotency/<sha256(key)>.json``) moves through two states:

* ``in_progress``, created create-only when a request claims the key. A second
  request with the key while it is held gets 409 ``request_in_progress``. A claim
  older than ``CLAIM_SECONDS`` belongs to a worker that died and can be taken over.
* ``completed``, holding the response's status and exact bytes. A retry with the
  same body gets those bytes back and runs nothing; a different body gets 422.

Errors release the claim instead, so a rejected request leaves no record and the
caller's retry is judged afresh. Records expire after the TTL.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from azure.storage.blob.aio import ContainerClient

from .blob_records import BlobRecords, Record, RecordConflict
from .errors import IdempotencyKeyReused, InvalidRequest, RequestInProgress, ResumeError

logger = logging.getLogger(__name__)
PREFIX = "idempotency/"
MAX_KEY_LENGTH = 255
# Azure's front end ends an HTTP request after 230 s, so no run holds a claim longer.
CLAIM_SECONDS = 300


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


@dataclass(frozen=True, slots=True)
class Claim:
    """This request holds the key; it must ``complete`` or ``release`` it."""

    name: str
    fingerprint: str
    record: Record


class IdempotencyStore:
    def __init__(self, container: ContainerClient, *, ttl_seconds: int) -> None:
        self._records = BlobRecords(container, PREFIX)
        self._ttl = ttl_seconds

    async def begin(self, key: str, request_fingerprint: str) -> Claim | StoredResponse:
        """Claim the key, or return the stored response of an earlier identical request."""
        name = hashlib.sha256(validate_key(key).encode()).hexdigest()
        # A token of this attempt: if the create's answer is lost and the SDK's retry
        # meets the record, the token shows it is this request's own claim.
        token = uuid.uuid4().hex
        for _ in range(3):
            now = time.time()
            claim = {"state": "in_progress", "fingerprint": request_fingerprint, "claimed_at": now, "token": token}
            try:
                return Claim(name, request_fingerprint, await self._records.create(name, claim))
            except RecordConflict:
                existing = await self._records.get(name)
            if existing is None:
                continue  # deleted meanwhile: try to create again
            data = existing.data
            if data.get("token") == token and data.get("state") == "in_progress":
                return Claim(name, request_fingerprint, existing)
            expired = now > float(data.get("expires_at", now + 1))
            stale_claim = data.get("state") == "in_progress" and now - float(data.get("claimed_at", 0)) > CLAIM_SECONDS
            if expired or stale_claim:
                try:
                    return Claim(name, request_fingerprint, await self._records.replace(name, claim, existing.etag))
                except RecordConflict:
                    continue
            if data.get("fingerprint") != request_fingerprint:
                raise IdempotencyKeyReused("This Idempotency-Key was used with a different request.")
            if data.get("state") == "completed":
                return StoredResponse(int(data["status"]), base64.b64decode(data["body"]))
            raise RequestInProgress("A request with this Idempotency-Key is still running; retry later.")
        raise RequestInProgress("The Idempotency-Key is contended; retry later.")

    async def complete(self, claim: Claim, status: int, body: bytes) -> None:
        """Store the response; a lost claim (taken over as stale) is left alone.

        Never raises: the call has already succeeded, and failing it now would tell the
        caller to retry work that is done. If storage fails here, the claim stays
        ``in_progress`` and retries get 409 until it goes stale (``CLAIM_SECONDS``).
        """
        record: dict[str, Any] = {
            "state": "completed",
            "fingerprint": claim.fingerprint,
            "status": status,
            "body": base64.b64encode(body).decode(),
            "expires_at": time.time() + self._ttl,
        }
        try:
            await self._records.replace(claim.name, record, claim.record.etag)
        except RecordConflict:
            pass
        except ResumeError:
            logger.warning("Could not store the response for an Idempotency-Key; its claim will go stale")

    async def release(self, claim: Claim) -> None:
        """Give the key back so a retry runs again. Never raises (it runs on error paths)."""
        try:
            await self._records.delete(claim.name, etag=claim.record.etag)
        except ResumeError:
            logger.warning("Could not release an Idempotency-Key; its claim will go stale")
