"""Server-sent event framing (one JSON object per event)."""

from __future__ import annotations

from typing import Any

from resumable.base import strict_json

MEDIA_TYPE = "text/event-stream"
# A comment line: clients ignore it, proxies see bytes and keep the connection open.
KEEPALIVE = b": keep-alive\n\n"


def sse_event(name: str, data: dict[str, Any], *, event_id: int | str | None = None) -> bytes:
    """One SSE frame. Compact JSON never holds a raw newline, so ``data`` is one line."""
    head = b"" if event_id is None else b"id: " + str(event_id).encode() + b"\n"
    return head + b"event: " + name.encode() + b"\ndata: " + strict_json.dumps(data) + b"\n\n"
