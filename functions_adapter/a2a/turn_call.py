"""The seam: every A2A call that runs, reads or stops a turn goes through these three functions.

Today they drive a thread turn as a background run exactly as MCP's ``start_turn``/``get_run``
do (``turns.build_turn`` + ``background_api``), with the caller's headers for the owner
check, the authorizer and the idempotency scope. When the protocol-neutral turn call lands,
only this module changes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastapi import Request

from functions_adapter import keyed_call
from functions_adapter.api import background_api, thread_api
from functions_adapter.authorization import caller_origin
from functions_adapter.turns import build_turn
from functions_adapter.wiring import build_service, load_settings
from resumable.base import strict_json
from resumable.base.errors import PayloadTooLarge

# Headers the caller may have sent for the A2A request itself, never meant for the turn.
_PRIVATE = {"prefer", "idempotency-key", "content-length", "content-type"}


def _as_request(method: str, path: str, headers: Mapping[str, str]) -> Request:
    """The HTTP request this call stands for, as the route handlers read it."""
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    return Request({"type": "http", "method": method, "path": path, "query_string": b"", "headers": raw})


def _forwarded(headers: Mapping[str, str], **extra: str) -> dict[str, str]:
    return {**{k: v for k, v in headers.items() if k.lower() not in _PRIVATE}, **extra}


async def start_turn(
    headers: Mapping[str, str],
    *,
    thread_id: str,
    workflow: str,
    message: str | None,
    responses: dict[str, Any] | None,
    key: str,
) -> dict[str, Any]:
    """Queue one turn on ``thread_id`` as a background run; ``key`` (the A2A messageId) is its
    Idempotency-Key, so a retried message answers the first run instead of running again."""
    settings = load_settings()
    fields = {"messages": message, "responses": responses, "background": True, "workflow": workflow}
    body = strict_json.dumps({k: v for k, v in fields.items() if v is not None})
    if len(body) > settings.max_request_bytes:
        raise PayloadTooLarge(f"The message is over the {settings.max_request_bytes}-byte limit.")
    await thread_api.gate_headers(headers, settings, "threads/{thread_id}/runs", thread_id)
    turn = build_turn(settings, build_service(settings), body, thread_id=thread_id, origin=caller_origin(headers))
    request = _as_request("POST", f"/api/threads/{thread_id}/runs", _forwarded(headers, **{"idempotency-key": key}))
    dedupe = keyed_call.dedupe_key(request, settings, always_key=True)
    response = await background_api.accept(request, body, turn, settings=settings, dedupe=dedupe)
    return json.loads(bytes(response.body))


async def run_status(headers: Mapping[str, str], run_id: str, *, wait_seconds: int = 0) -> dict[str, Any]:
    """``GET /api/runs/{id}``'s document (``RunNotFound`` for another origin's run)."""
    request = _as_request("GET", f"/api/runs/{run_id}", _forwarded(headers, prefer=f"wait={wait_seconds}"))
    return json.loads(bytes((await background_api.get_status(request, run_id)).body))


async def cancel_run(headers: Mapping[str, str], run_id: str) -> dict[str, Any]:
    """``POST /api/runs/{id}/cancel``'s document."""
    request = _as_request("POST", f"/api/runs/{run_id}/cancel", _forwarded(headers))
    return json.loads(bytes((await background_api.cancel(request, run_id)).body))
