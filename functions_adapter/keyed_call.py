"""One keyed-call path for every protocol (``/api/runs``, a thread's runs, ``/api/responses``):
which header makes a retry "the same request", then begin → replay → claim.

``begin`` either returns the stored response of an earlier identical request (the caller
replays it in its own protocol's shape, and nothing runs), or a claim held for this run
(``HeldClaim``, settled by the run's owner), or None when the request carries no key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from functions_adapter.callers import API_ORIGIN
from functions_adapter.settings import Settings
from functions_adapter.wiring import idempotency_store
from resumable import RunService
from resumable.core.held_claim import HeldClaim
from resumable.core.idempotency import WEBHOOK_ID, StoredResponse


@dataclass(frozen=True, slots=True)
class DedupeKey:
    """A request's key: ``scope`` is the caller's origin (None: the app's function-key
    callers, whose records keep the names they had before scopes), so a key is one
    caller's alone: the replay happens before the thread's origin is checked, and another
    caller sending the same key and body must get its own outcome, not someone else's."""

    key: str
    kind: str
    ttl_seconds: int
    scope: str | None = None


@dataclass(frozen=True, slots=True)
class Claimed:
    """This request holds its key: ``claim`` for the run's owner to settle, and the
    checkpoint ID the claim planned (a call without a thread must save under it)."""

    claim: HeldClaim
    planned_checkpoint_id: str | None


IDEMPOTENCY_KEY = "idempotency-key"


def dedupe_key(
    headers: Mapping[str, str], origin: str, settings: Settings, *, always_key: bool = False
) -> DedupeKey | None:
    """What makes a retry "the same request".

    With Standard Webhooks signatures on, the verified ``webhook-id``: a signed delivery
    captured in transit could otherwise be sent again, within the signature's tolerance
    window, with a fresh Idempotency-Key; keyed by its signed message ID, it replays the
    first response instead (the Standard Webhooks advice). Otherwise the first header of
    ``IDEMPOTENCY_HEADERS`` that the request carries (``Idempotency-Key``, then
    ``webhook-id`` by default; ``X-GitHub-Delivery`` first with the GitHub scheme), each a
    namespace of its own, so one header's value never matches another's.

    ``always_key``: an ``Idempotency-Key`` is honoured even when ``IDEMPOTENCY_HEADERS``
    leaves it out (the Responses routes: an OpenAI client sends no other key).

    ``origin``: the caller's (``callers.origin_of``), the key's scope.
    """
    scope = None if origin == API_ORIGIN else origin
    if settings.webhook_secrets and settings.webhook_scheme == "standard":
        return delivery_key(headers["webhook-id"], origin, settings)
    for header in settings.idempotency_headers:
        key = headers.get(header)
        if key is not None:
            return DedupeKey(key, header, settings.idempotency_ttl_seconds, scope)
    key = headers.get(IDEMPOTENCY_KEY) if always_key else None
    return None if key is None else DedupeKey(key, IDEMPOTENCY_KEY, settings.idempotency_ttl_seconds, scope)


def delivery_key(key: str, origin: str, settings: Settings) -> DedupeKey:
    """A sender's delivery ID as the key of the turn it starts, in the namespace the app
    dedupes first: the verified ``webhook-id``'s with Standard Webhooks signatures on (kept
    at least twice the signature's tolerance window), else ``IDEMPOTENCY_HEADERS``' first."""
    scope = None if origin == API_ORIGIN else origin
    if settings.webhook_secrets and settings.webhook_scheme == "standard":
        ttl = max(settings.idempotency_ttl_seconds, 2 * settings.webhook_tolerance_seconds)
        return DedupeKey(key, WEBHOOK_ID, ttl, scope)
    return DedupeKey(key, settings.idempotency_headers[0], settings.idempotency_ttl_seconds, scope)


async def begin(
    request_fingerprint: str,
    *,
    settings: Settings,
    service: RunService,
    dedupe: DedupeKey | None,
    plan_checkpoint: bool = False,
) -> StoredResponse | Claimed | None:
    """Claim the request's key, or find the earlier identical request's response.

    ``request_fingerprint`` is of the method, the path and the body as the caller sent it
    (``body.fingerprint_of``), so a key reused with another route or body is refused (422),
    whatever the protocol.
    """
    if dedupe is None:
        return None
    store = idempotency_store(settings, service, ttl_seconds=dedupe.ttl_seconds, scope=dedupe.scope)
    begun = await store.begin(dedupe.key, request_fingerprint, kind=dedupe.kind, plan_checkpoint=plan_checkpoint)
    if isinstance(begun, StoredResponse):
        return begun
    return Claimed(HeldClaim(store, begun), begun.planned_checkpoint_id)
