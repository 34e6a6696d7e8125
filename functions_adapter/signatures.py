"""Inbound webhook signatures in the Standard Webhooks style.

The sender signs ``"{webhook-id}.{webhook-timestamp}.{raw body}"`` with HMAC-SHA256
and sends ``webhook-signature: v1,<base64>`` (several, space-separated, during key
rotation). Secrets are ``whsec_<base64>``, or any other string used as UTF-8 bytes.
Checked before the body is parsed or storage is touched.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping, Sequence

from resumable.errors import InvalidSignature
from resumable.ids import is_ascii_digits

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


def verify(
    headers: Mapping[str, str],
    body: bytes,
    secrets: Sequence[str],
    *,
    tolerance_seconds: int,
    now: float | None = None,
) -> None:
    """Raise ``InvalidSignature`` unless a current secret signed this exact body recently."""
    message_id = headers.get("webhook-id", "")
    raw_timestamp = headers.get("webhook-timestamp", "")
    offered = headers.get("webhook-signature", "")
    if not message_id or not raw_timestamp or not offered:
        raise InvalidSignature("Missing webhook-id, webhook-timestamp or webhook-signature header.")
    id_ok = len(message_id) <= _MAX_ID_LENGTH and all(" " < ch <= "~" for ch in message_id)
    if not id_ok or not is_ascii_digits(raw_timestamp) or len(raw_timestamp) > 12:
        raise InvalidSignature("Malformed webhook-id or webhook-timestamp header.")
    timestamp = int(raw_timestamp)
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_seconds:
        raise InvalidSignature("The webhook timestamp is outside the accepted window.")
    candidates = [part.partition(",")[2] for part in offered.split() if part.startswith("v1,")]
    for secret in secrets:
        expected = sign(secret, message_id, timestamp, body).partition(",")[2]
        # Each comparison is constant-time, so timing reveals nothing about the secret.
        if any(hmac.compare_digest(expected.encode(), c.encode()) for c in candidates):
            return
    raise InvalidSignature("The webhook signature does not match.")
