"""The errors only a transport raises: the library never reads a body, a header or a path.

They join the library's tree under ``RequestRejected`` (drawn in ``resumable/base/errors.py``),
so ``status_map.py`` maps them like any other error and every error still has one family.
"""

from __future__ import annotations

from resumable.base import RequestRejected


class PayloadTooLarge(RequestRejected):
    """The body (or an MCP turn's arguments) is over the configured byte limit."""

    code = "payload_too_large"


class UnsupportedMediaType(RequestRejected):
    """A JSON route was sent something declared as other than ``application/json``."""

    code = "unsupported_media_type"


class InvalidSignature(RequestRejected):
    """The webhook signature is missing, stale or wrong (checked before any storage access)."""

    code = "invalid_signature"


class NotFound(RequestRejected):
    """Nothing is there by that name: what a host answers for a path no function serves (the
    console's files when the console is off, or a name that is not one of them)."""

    code = "not_found"


__all__ = ["InvalidSignature", "NotFound", "PayloadTooLarge", "UnsupportedMediaType"]
