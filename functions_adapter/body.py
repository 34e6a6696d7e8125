"""A POST's body at the edge, for every protocol: read under the size cap, its signature
checked, its media type JSON; cheapest and least revealing first, before anything is parsed
or stored."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request

from functions_adapter import signatures as webhook_signature
from functions_adapter.errors import PayloadTooLarge, UnsupportedMediaType
from functions_adapter.http_responses import JSON_MEDIA_TYPE
from functions_adapter.params import capped_number
from functions_adapter.settings import Settings
from resumable.core.idempotency import fingerprint


def require_json(content_type: str | None) -> None:
    """``application/json``, with parameters such as ``charset`` allowed; 415 otherwise.

    A cross-site HTML form can send ``text/plain`` or a form encoding without a CORS
    preflight; refusing them keeps browsers from posting runs on a user's behalf.
    """
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type != JSON_MEDIA_TYPE:
        raise UnsupportedMediaType("Send the body as JSON, with 'Content-Type: application/json'.")


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refusing (413) anything over ``limit`` without reading it all."""
    declared = request.headers.get("content-length")
    if declared is not None and capped_number(declared, "Content-Length", cap=limit) > limit:
        raise PayloadTooLarge(f"The body is over the {limit}-byte limit.")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"The body is over the {limit}-byte limit.")
        chunks.append(chunk)
    return b"".join(chunks)


def verify_signature(headers: Mapping[str, str], body: bytes, settings: Settings) -> None:
    """With ``WEBHOOK_SECRET`` set, the body's signature (401 before anything is parsed)."""
    if settings.webhook_secrets:
        webhook_signature.verify(
            headers,
            body,
            settings.webhook_secrets,
            tolerance_seconds=settings.webhook_tolerance_seconds,
            scheme=settings.webhook_scheme,
        )


def fingerprint_of(request: Request, body: bytes) -> str:
    """What a retry under the same key must match: the method, the path and the body as sent."""
    return fingerprint(request.method, request.url.path, body)
