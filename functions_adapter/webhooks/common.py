"""What the adapters share: their secrets, a verified body, and the turn a delivery starts."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from typing import Any, NamedTuple

from fastapi import Request, Response
from opentelemetry import propagate
from starlette.requests import Request as StarletteRequest

from functions_adapter import signatures
from functions_adapter.api import routes
from functions_adapter.authorization import ADAPTER_ORIGIN
from functions_adapter.body import read_body
from functions_adapter.settings import Settings
from functions_adapter.wiring import load_settings
from resumable.base.errors import InvalidRequest, ServerMisconfigured

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
    """Call the app's thread route in-process: a background turn with a callback, keyed by
    the sender's delivery ID, so the sender's retry replays the first answer. The turn
    carries the delivery's origin in its ASGI scope (``authorization.ADAPTER_ORIGIN``),
    where no client can put one."""
    settings = load_settings()
    thread = delivery.thread
    body: dict[str, Any] = {"messages": delivery.text or "(empty message)", "background": True}
    answer_url = os.environ.get("ADAPTER_ANSWER_URL", "").strip()
    if answer_url:
        body["callback_url"] = answer_url
    raw = json.dumps(body).encode()
    # The key goes in the first header the app dedupes on (IDEMPOTENCY_HEADERS), and the
    # trace goes on, so the turn's span joins the delivery's.
    headers = {"content-type": "application/json", settings.idempotency_headers[0]: key}
    headers.update(_signed(settings, key, raw))
    propagate.inject(headers)
    scope = {
        "type": "http",
        "method": "POST",
        "path": f"/api/threads/{thread}/runs",
        "headers": [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()],
        "query_string": b"",
        ADAPTER_ORIGIN: delivery.origin,
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    return await routes.handle_thread_run(StarletteRequest(scope, receive), thread)


def _signed(settings: Settings, key: str, raw: bytes) -> dict[str, str]:
    """With ``WEBHOOK_SECRET`` on, sign the in-process turn as the app's own scheme expects.

    The adapter has verified its sender with that sender's secret; the thread route checks
    every POST against ``WEBHOOK_SECRET``, so the adapter signs for it (in-process only: the
    signature never leaves this worker). With Standard Webhooks the key is the ``webhook-id``.
    """
    if not settings.webhook_secrets:
        return {}
    secret = signatures.secret_bytes(settings.webhook_secrets[0])
    now = str(int(time.time()))
    if settings.webhook_scheme == "github":
        return {"x-hub-signature-256": "sha256=" + hmac.new(secret, raw, hashlib.sha256).hexdigest()}
    if settings.webhook_scheme == "slack":
        signed = hmac.new(secret, f"v0:{now}:".encode() + raw, hashlib.sha256).hexdigest()
        return {"x-slack-request-timestamp": now, "x-slack-signature": "v0=" + signed}
    signature = signatures.sign(settings.webhook_secrets[0], key, int(now), raw)
    return {"webhook-id": key, "webhook-timestamp": now, "webhook-signature": signature}
