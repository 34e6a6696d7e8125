"""Inbound webhook signatures: Standard Webhooks (the default), GitHub and Slack.

* ``standard``: the sender signs ``"{webhook-id}.{webhook-timestamp}.{raw body}"`` with
  HMAC-SHA256 and sends ``webhook-signature: v1,<base64>`` (several, space-separated,
  during key rotation).
* ``github``: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>``. GitHub
  signs no timestamp and not ``X-GitHub-Delivery``, so a captured delivery stays valid:
  with this scheme ``X-GitHub-Delivery`` is the first idempotency header by default, which
  catches a copy sent as it was, though not one given a new delivery ID.
* ``slack``: ``X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:{timestamp}:{raw body}">``
  with ``X-Slack-Request-Timestamp`` inside the tolerance (5 minutes by default).

Secrets are ``whsec_<base64>``, or any other string used as UTF-8 bytes. Every scheme
compares in constant time, and runs before the body is parsed or storage is touched.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping, Sequence

from functions_adapter.errors import InvalidSignature
from resumable.base.ids import is_ascii_digits

_SECRET_PREFIX = "whsec_"  # noqa: S105 - the format's prefix, not a secret
_MAX_ID_LENGTH = 255


def secret_bytes(secret: str) -> bytes:
    if secret.startswith(_SECRET_PREFIX):
        try:
            return base64.b64decode(secret.removeprefix(_SECRET_PREFIX), validate=True)
        except binascii.Error:
            raise ValueError("A whsec_ secret must be base64 after its prefix.") from None
    return secret.encode()


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value a sender would send (used by tests and docs)."""
    digest = hmac.new(secret_bytes(secret), f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


SCHEMES = ("standard", "github", "slack")


def verify(
    headers: Mapping[str, str],
    body: bytes,
    secrets: Sequence[str],
    *,
    tolerance_seconds: int,
    now: float | None = None,
    scheme: str = "standard",
) -> None:
    """Raise ``InvalidSignature`` unless a current secret signed this exact body (recently,
    where the scheme signs a timestamp)."""
    if scheme == "github":
        _verify_hex(headers.get("x-hub-signature-256", ""), "sha256=", secrets, body)
        return
    if scheme == "slack":
        raw_timestamp = headers.get("x-slack-request-timestamp", "")
        _check_timestamp(raw_timestamp, tolerance_seconds, now)
        _verify_hex(headers.get("x-slack-signature", ""), "v0=", secrets, f"v0:{raw_timestamp}:".encode() + body)
        return
    _verify_standard(headers, body, secrets, tolerance_seconds=tolerance_seconds, now=now)


def _check_timestamp(raw_timestamp: str, tolerance_seconds: int, now: float | None) -> int:
    if not is_ascii_digits(raw_timestamp) or len(raw_timestamp) > 12:
        raise InvalidSignature("Missing or malformed signature timestamp header.")
    timestamp = int(raw_timestamp)
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_seconds:
        raise InvalidSignature("The webhook timestamp is outside the accepted window.")
    return timestamp


def _verify_hex(offered: str, prefix: str, secrets: Sequence[str], signed: bytes) -> None:
    """``<prefix><hex HMAC-SHA256 of signed>`` (GitHub's and Slack's form)."""
    if not offered.startswith(prefix):
        raise InvalidSignature("Missing or malformed webhook signature header.")
    candidate = offered.removeprefix(prefix).strip().lower().encode()
    for secret in secrets:
        expected = hmac.new(secret_bytes(secret), signed, hashlib.sha256).hexdigest().encode()
        if hmac.compare_digest(expected, candidate):
            return
    raise InvalidSignature("The webhook signature does not match.")


def _verify_standard(
    headers: Mapping[str, str], body: bytes, secrets: Sequence[str], *, tolerance_seconds: int, now: float | None
) -> None:
    message_id = headers.get("webhook-id", "")
    raw_timestamp = headers.get("webhook-timestamp", "")
    offered = headers.get("webhook-signature", "")
    if not message_id or not raw_timestamp or not offered:
        raise InvalidSignature("Missing webhook-id, webhook-timestamp or webhook-signature header.")
    id_ok = len(message_id) <= _MAX_ID_LENGTH and all(" " < ch <= "~" for ch in message_id)
    if not id_ok or not is_ascii_digits(raw_timestamp) or len(raw_timestamp) > 12:
        raise InvalidSignature("Malformed webhook-id or webhook-timestamp header.")
    timestamp = _check_timestamp(raw_timestamp, tolerance_seconds, now)
    candidates = [part.partition(",")[2] for part in offered.split() if part.startswith("v1,")]
    for secret in secrets:
        expected = sign(secret, message_id, timestamp, body).partition(",")[2]
        # Each comparison is constant-time, so timing reveals nothing about the secret.
        if any(hmac.compare_digest(expected.encode(), c.encode()) for c in candidates):
            return
    raise InvalidSignature("The webhook signature does not match.")
