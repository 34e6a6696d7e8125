"""What the adapters share: their secrets, a verified body, and the turn a delivery starts."""

from __future__ import annotations

import json
import logging
import os
from typing import Any, NamedTuple

from fastapi import Request, Response

from functions_adapter import keyed_call, signatures
from functions_adapter.body import read_body
from functions_adapter.turn_call import TurnCall, call_turn
from functions_adapter.turn_response import render_outcome
from functions_adapter.wiring import load_settings
from resumable.base import InvalidRequest, ServerMisconfigured
from resumable.core.idempotency import fingerprint

logger = logging.getLogger(__name__)
# What App Service leaves in a setting when it cannot read the Key Vault secret behind it.
_KEY_VAULT_REFERENCE = "@Microsoft.KeyVault("


class Delivery(NamedTuple):
    """What a sender's delivery asks for: a turn on ``thread`` with ``text``, by ``origin``."""

    thread: str
    text: str
    origin: str


def secrets(setting: str) -> list[str]:
    """The secret(s) in ``setting``, space-separated while rotating.

    Empty, or a Key Vault reference the platform could not resolve (its text is no secret),
    is a configuration error: 500, never a check against a known string.
    """
    values = os.environ.get(setting, "").split()
    if not values or any(value.startswith(_KEY_VAULT_REFERENCE) for value in values):
        logger.error("Configuration error: %s is empty or an unresolved Key Vault reference", setting)
        raise ServerMisconfigured()
    return values


async def verified_body(request: Request, setting: str, scheme: str) -> bytes:
    """The body, once the secret in ``setting`` verified it: 413 over ``MAX_REQUEST_BYTES``,
    401 for a bad signature, both before anything is parsed or stored."""
    settings = load_settings()
    body = await read_body(request, settings.max_request_bytes)
    signatures.verify(
        request.headers,
        body,
        secrets(setting),
        tolerance_seconds=settings.webhook_tolerance_seconds,
        scheme=scheme,
    )
    return body


def parsed(body: bytes) -> dict[str, Any]:
    """A verified body as a JSON object; anything else is the sender's mistake (400)."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise InvalidRequest("The delivery's body must be a JSON object.")
    return data


async def start_turn(delivery: Delivery, key: str) -> Response:
    """The delivery's turn, through the one turn call (``turn_call.call_turn``), as
    ``POST /api/threads/{thread}/runs`` would take it: a background turn with a callback,
    keyed by the sender's delivery ID, so the sender's retry replays the first answer. Its
    origin is the delivery's, named by this code only; the thread authorizer is not asked
    (the sender's signature authenticated the delivery, and its origin confines the thread)."""
    settings = load_settings()
    thread = delivery.thread
    body: dict[str, Any] = {"messages": delivery.text or "(empty message)", "background": True}
    answer_url = os.environ.get("ADAPTER_ANSWER_URL", "").strip()
    if answer_url:
        body["callback_url"] = answer_url
    raw = json.dumps(body).encode()
    path = f"/api/threads/{thread}/runs"
    call = TurnCall(
        thread_id=thread,
        origin=delivery.origin,
        body=raw,
        route="threads/{thread_id}/runs",
        authorizer_headers=None,
        dedupe=keyed_call.delivery_key(key, delivery.origin, settings),
        fingerprint=fingerprint("POST", path, raw),
    )
    return render_outcome(await call_turn(call, settings), async_preferred=False)
