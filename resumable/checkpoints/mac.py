"""An HMAC over each checkpoint blob, checked before the blob is parsed.

Defence in depth behind the pickle guard: with ``CHECKPOINT_MAC_KEYS`` set, a blob that
this app did not write (someone else with write access to the container, but not the
key) is refused without being parsed at all. The tag is HMAC-SHA256 over the exact blob
bytes, stored in the blob's metadata at upload (no extra storage operation) as
``<key id>:<base64 tag>``; the download returns it with the body.

Rotation: the first key signs, every key verifies. Add the new key first, then, once
no checkpoint signed by the old key is still needed, drop it.

What it does not stop: anyone holding a key can sign anything; a leaked key must be
removed from the setting. Replaying an older genuine blob under another name fails
(the body names its own checkpoint ID); under its own name, it is the same checkpoint.
Blob metadata other than the tag (listings use it) and thread pointers are not signed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass, field

METADATA_KEY = "checkpoint_mac"
MIN_KEY_BYTES = 16
_KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")


class MacConfigError(ValueError):
    """``CHECKPOINT_MAC_KEYS`` is malformed: reported as a configuration error."""


class MacMismatch(Exception):
    """The blob's tag is missing or wrong; the reason is for logs only."""


@dataclass(frozen=True, slots=True)
class MacKey:
    key_id: str
    secret: bytes = field(repr=False)


def parse_mac_keys(raw: str) -> tuple[MacKey, ...]:
    """``kid:base64key[,kid2:base64key...]``; the first signs. Empty means off."""
    keys: list[MacKey] = []
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        key_id, sep, encoded = entry.partition(":")
        if not sep or not _KEY_ID.fullmatch(key_id):
            raise MacConfigError("each entry must be '<key id>:<base64 key>', key IDs [A-Za-z0-9_-]{1,32}")
        try:
            secret = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise MacConfigError(f"key {key_id!r} is not valid base64") from None
        if len(secret) < MIN_KEY_BYTES:
            raise MacConfigError(f"key {key_id!r} is {len(secret)} bytes; at least {MIN_KEY_BYTES} are required")
        if any(k.key_id == key_id for k in keys):
            raise MacConfigError(f"key ID {key_id!r} appears twice")
        keys.append(MacKey(key_id, secret))
    return tuple(keys)


class CheckpointMac:
    """Signs with the first key and verifies with any; inactive without keys."""

    def __init__(self, keys: tuple[MacKey, ...]) -> None:
        self._keys = {key.key_id: key.secret for key in keys}
        self._signing = keys[0] if keys else None

    @property
    def active(self) -> bool:
        return self._signing is not None

    def sign(self, data: bytes) -> dict[str, str]:
        """Blob metadata carrying the tag (empty when no key is configured)."""
        if self._signing is None:
            return {}
        tag = base64.b64encode(_tag(self._signing.secret, data)).decode("ascii")
        return {METADATA_KEY: f"{self._signing.key_id}:{tag}"}

    def verify(self, data: bytes, metadata: dict[str, str | None]) -> None:
        """Raise ``MacMismatch`` unless ``metadata`` holds a valid tag for ``data``."""
        if self._signing is None:
            return
        stored = metadata.get(METADATA_KEY) or ""
        key_id, sep, encoded = stored.partition(":")
        if not sep:
            raise MacMismatch("no checkpoint MAC in the blob's metadata")
        secret = self._keys.get(key_id)
        if secret is None:
            raise MacMismatch(f"signed with unknown key ID {key_id[:32]!r}")
        try:
            tag = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise MacMismatch("the MAC is not base64") from None
        if not hmac.compare_digest(tag, _tag(secret, data)):
            raise MacMismatch(f"the MAC (key ID {key_id!r}) does not match the blob")


def _tag(secret: bytes, data: bytes) -> bytes:
    return hmac.new(secret, data, hashlib.sha256).digest()
