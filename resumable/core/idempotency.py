"""Idempotency keys: one run per key, and its response replayed to every retry.

A record per key and caller (``idempotency/<sha256>.json``, ``record_name``) moves through three states:

* ``in_progress``: created when a request claims the key, renewed every
  ``RENEW_SECONDS`` while it runs (a second request gets 409 ``request_in_progress``);
  one not renewed for ``CLAIM_SECONDS`` belongs to a dead worker and may be taken over.
* ``committing``: written just before a thread turn commits, with the checkpoint it is
  about to commit and the exact response. Whoever finds it checks that commit: if it
  happened, the stored response is the answer and nothing runs again (a lost last write
  cannot make a committed turn run twice); if not, it is judged like ``in_progress``.
  A call without a thread (``/api/runs``) commits by creating a checkpoint, so its claim
  names that checkpoint from the start and the checkpoint carries the response: the same
  check, one write fewer. Every holder of the key, a taker-over too, saves under that one
  create-only ID, so no two of them can both commit.
* ``completed``: the status and exact bytes every identical retry gets (another request
  with the key: 422).

Errors release the claim (delete), so a retry is judged afresh. Records expire after the
TTL. A background accept stores its 202 as ``completed`` at once (``accept_once``). Every
write goes through ``RecordStore.update``: a write whose answer was lost counts as written.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..base.errors import ClaimLost, IdempotencyRecordUnreadable, RequestInProgress, ResumeError
from ..storage import layout
from ..storage.record_store import DELETE, RecordStore, Stored
from .commit_ledger import CommitLedger
from .idempotency_record import (
    COMMITTING,
    COMPLETED,
    IDEMPOTENCY_KEY,
    IN_PROGRESS,
    RECORD_ERRORS,
    WEBHOOK_ID,
    CheckCommit,
    KeyClaim,
    KeyRecord,
    StoredResponse,
    abandoned,
    embedded,
    expired,
    fingerprint,
    judge,
    record_name,
    reused_error,
    stored_response,
    validate_key,
)

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from azure.storage.blob.aio import ContainerClient

logger = logging.getLogger(__name__)
PREFIX = layout.IDEMPOTENCY
# A live request renews its claim every RENEW_SECONDS; one not renewed for CLAIM_SECONDS
# is taken to belong to a worker that died.
CLAIM_SECONDS = 300
RENEW_SECONDS = 60


class IdempotencyStore:
    def __init__(
        self, container: ContainerClient, *, ttl_seconds: int, ledger: CommitLedger, scope: str | None = None
    ) -> None:
        """``scope``: whose keys these are (``record_name``): a key names another record
        in every scope."""
        self._scope = scope
        self._records = RecordStore(container, PREFIX, KeyRecord, RECORD_ERRORS)
        self._ttl = ttl_seconds
        # Whether a claim's checkpoint committed: the one ledger (``commit_ledger``).
        self._ledger = ledger

    async def _update(self, name: str, change: Callable[..., object], **kwargs: object) -> Stored[KeyRecord] | None:
        return await self._records.update(name, change, **kwargs)  # type: ignore[arg-type]

    async def _claim_or_replay(
        self, name: str, kind: str, wanted: KeyRecord, *, on_completed: Callable[[KeyRecord], None]
    ) -> Stored[KeyRecord] | None:
        """Write ``wanted`` where the key is free (absent, expired, or abandoned), else judge
        the record: a replay (``on_completed``), a reuse (422/409), or in progress (409).

        Whether a claim was abandoned, or a response expired, is judged on the record exactly
        as read, by its age on the storage service's clock (``update(stored=True)``), never
        by comparing this instance's clock with a time another instance wrote; a takeover is
        written by compare-and-swap over that read."""
        verified: set[str] = set()  # committing checkpoints found not committed
        change = functools.partial(
            judge,
            wanted=wanted,
            kind=kind,
            verified=verified,
            claim_seconds=CLAIM_SECONDS,
            ttl_seconds=self._ttl,
            on_completed=on_completed,
        )
        # Optimistic: most keys are new, so create first (one write); an existing record
        # costs the failed create and one read.
        start: dict[str, object] = {"current": None}
        for _ in range(3):
            try:
                return await self._update(name, change, stored=True, **start)
            except CheckCommit as pending:
                start = {}
                final = await self._outcome(pending.record)
                if final is not None:
                    # The run committed but its last write was lost: its response is final.
                    await self._finish(name, final)
                    on_completed(final)
                    return None
                if not abandoned(pending.stored, CLAIM_SECONDS):
                    raise RequestInProgress(
                        "A request with this Idempotency-Key is still running; retry later."
                    ) from None
                verified.add(str(pending.record.checkpoint_id))
        raise RequestInProgress("The Idempotency-Key is contended; retry later.")

    async def _outcome(self, record: KeyRecord) -> KeyRecord | None:
        """``record`` with its final response if the checkpoint it names was committed, else None."""
        if record.state == COMMITTING:
            return record if await self._ledger.committed(str(record.checkpoint_id), record.thread_id) else None
        found = await self._ledger.saved_metadata(str(record.checkpoint_id))
        if found is None:
            return None
        response = embedded(found, record.fingerprint)
        if response is None:
            logger.error("Checkpoint %s, planned by an Idempotency-Key, has no response for it", record.checkpoint_id)
            raise IdempotencyRecordUnreadable("The stored response for this Idempotency-Key cannot be read.")
        return dataclasses.replace(record, status=response[0], body=response[1])

    async def begin(
        self, key: str, request_fingerprint: str, *, kind: str = IDEMPOTENCY_KEY, plan_checkpoint: bool = False
    ) -> KeyClaim | StoredResponse:
        """Claim the key, or return the stored response of an earlier identical request.
        ``plan_checkpoint``: the call commits by creating a checkpoint (no thread), and must
        save under the one its claim names (``KeyClaim.planned_checkpoint_id``)."""
        name = record_name(key, kind, self._scope)
        token = uuid.uuid4().hex
        replay: list[StoredResponse] = []
        planned = str(uuid.uuid4()) if plan_checkpoint else None
        claim = KeyRecord(IN_PROGRESS, request_fingerprint, token=token, claimed_at=time.time(), checkpoint_id=planned)
        written = await self._claim_or_replay(
            name, kind, claim, on_completed=lambda r: replay.append(stored_response(r))
        )
        if replay:
            return replay[0]
        if written is None or not written.value.held_by(token):
            raise RequestInProgress("The Idempotency-Key is contended; retry later.")
        return KeyClaim(name, request_fingerprint, written, token)

    async def peek(self, key: str, request_fingerprint: str, *, kind: str) -> StoredResponse | None:
        """An earlier identical request's final response, or None; a reused key is refused.
        Writes nothing: an unfinished claim is judged by ``begin`` or ``accept_once``."""
        found = await self._records.get(record_name(key, kind, self._scope))
        if found is None:
            return None
        record = found.value
        if record.state == COMPLETED and expired(found, self._ttl):
            return None
        if record.fingerprint != request_fingerprint:
            raise reused_error(kind)
        return stored_response(record) if record.state == COMPLETED else None

    async def accept_once(
        self, key: str, request_fingerprint: str, response: StoredResponse, *, kind: str, thread_id: str | None
    ) -> StoredResponse | None:
        """Store a background accept's response for the key: None if it was stored now
        (the run is this request's to create), or the earlier identical accept's response."""
        name = record_name(key, kind, self._scope)
        replay: list[StoredResponse] = []
        accepted = KeyRecord(
            COMPLETED,
            request_fingerprint,
            claimed_at=time.time(),
            status=response.status,
            body=response.body,
            thread_id=thread_id,
            run_id=response.run_id,
            expires_at=time.time() + self._ttl,
        )
        await self._claim_or_replay(name, kind, accepted, on_completed=lambda r: replay.append(stored_response(r)))
        return replay[0] if replay else None

    async def forget_accept(self, key: str, kind: str, run_id: str) -> None:
        """Release a background accept's key whose run was never created (the accept failed)."""
        await self._update(
            record_name(key, kind, self._scope), lambda r: DELETE if r is not None and r.run_id == run_id else None
        )

    async def _change_claim(self, claim: KeyClaim, change: Callable[[KeyRecord], KeyRecord | object]) -> None:
        """Apply ``change`` while the record is still this claim's; ``ClaimLost`` otherwise."""

        def ours(current: KeyRecord | None) -> KeyRecord | object:
            if current is None or not current.held_by(claim.token):
                raise ClaimLost("This request's Idempotency-Key claim was taken over; it was not applied.")
            return change(current)

        written = await self._update(claim.name, ours, current=claim.record)
        if written is not None:
            claim.record = written

    async def renew(self, claim: KeyClaim) -> None:
        """Show the claim is alive; ``ClaimLost`` if it was taken over meanwhile."""
        await self._change_claim(claim, lambda record: record.renewed(time.time()))

    async def committing(self, claim: KeyClaim, checkpoint_id: str, thread_id: str | None, body: bytes) -> None:
        """Record what is about to be committed; ``ClaimLost`` (commit nothing) if not ours."""
        change = {"claimed_at": time.time(), "checkpoint_id": checkpoint_id, "thread_id": thread_id}
        await self._change_claim(
            claim, lambda record: dataclasses.replace(record, state=COMMITTING, status=200, body=body, **change)
        )

    async def _finish(self, name: str, record: KeyRecord, current: Stored[KeyRecord] | None = None) -> None:
        """Mark ``record``'s claim completed, if the record is still that claim."""
        expires_at = time.time() + self._ttl

        def completed(now: KeyRecord | None) -> KeyRecord | None:
            if now is None or not now.held_by(str(record.token)):
                return None
            return record.completed(expires_at=expires_at)

        try:
            kwargs = {} if current is None else {"current": current}
            await self._update(name, completed, **kwargs)
        except ResumeError:
            # Still ``committing``: whoever reads it next checks the commit and replays.
            logger.warning("Could not mark an Idempotency-Key completed; the next retry will")

    async def complete(self, claim: KeyClaim, status: int, body: bytes) -> None:
        """Store the response. Never raises: the call has already succeeded.

        If storage fails here, the record stays ``committing`` (or ``in_progress``, for a
        response that committed nothing) and the next retry settles it.
        """
        record = dataclasses.replace(claim.record.value, status=status, body=body)
        await self._finish(claim.name, record, claim.record)

    async def abandon(self, claim: KeyClaim, *, committing: bool = False) -> None:
        """The request failed: release the key, unless what it was committing did commit.

        A failure after the commit point (a pointer write whose answer was lost, say)
        must not free the key, or a retry would run the turn a second time. When the
        check cannot be made, the record stays as it is for the next retry to settle.
        ``committing``: the call saved (or tried to) its planned checkpoint, whose
        existence is the commit; if it exists, its response (whoever saved it) is final.
        """
        record = claim.record.value
        if record.state == COMMITTING or committing:
            try:
                final = await self._outcome(record)
            except ResumeError:
                logger.warning("Could not tell whether a failed request committed; its key stays held")
                return
            if final is not None:
                await self._finish(claim.name, final, claim.record)
                return
        await self.release(claim)

    async def release(self, claim: KeyClaim) -> None:
        """Give the key back so a retry runs again. Never raises (it runs on error paths)."""
        try:
            await self._change_claim(claim, lambda record: DELETE)
        except ResumeError:
            logger.warning("Could not release an Idempotency-Key; its claim will go stale")


__all__ = [
    "IDEMPOTENCY_KEY",
    "WEBHOOK_ID",
    "IdempotencyStore",
    "KeyClaim",
    "StoredResponse",
    "fingerprint",
    "record_name",
    "validate_key",
]
