"""Server-sent event framing (one JSON object per event)."""

from __future__ import annotations

import json
from typing import Any

MEDIA_TYPE = "text/event-stream"


def sse_event(name: str, data: dict[str, Any]) -> bytes:
    """One SSE frame. ``json.dumps`` never emits a newline, so ``data`` is one line."""
    payload = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"event: {name}\ndata: {payload}\n\n".encode()
