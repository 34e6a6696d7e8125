"""The seam: every A2A call that runs, reads or stops a turn goes through these three functions.

A task is a thread turn run as a background run: ``start_turn`` hands the shared turn call
(``turn_call.call_turn``) plain values, as MCP's ``start_turn`` does, so the authorizer gate,
the owner check, the idempotency scope and the background accept are the same as on every
other entry point; ``run_status`` and ``cancel_run`` read and stop the run through the
shared run access (``background_submit.authorized_run``), which refuses another origin's run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from functions_adapter import keyed_call
from functions_adapter.a2a import push_format
from functions_adapter.background_submit import authorized_run, run_control, status_json
from functions_adapter.callers import caller_origin
from functions_adapter.errors import PayloadTooLarge
from functions_adapter.turn_call import Queued, TurnCall, call_turn
from functions_adapter.wiring import load_settings
from resumable.base import strict_json
from resumable.core.idempotency import fingerprint
from resumable.threads.ownership import Caller

_ROUTE = "threads/{thread_id}/runs"


async def start_turn(
    headers: Mapping[str, str],
    *,
    thread_id: str,
    workflow: str,
    message: str | None,
    responses: dict[str, Any] | None,
    key: str,
    push: tuple[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    """Queue one turn on ``thread_id`` as a background run; ``key`` (the A2A messageId) is its
    Idempotency-Key, so a retried message answers the first run instead of running again.
    ``push`` (a push config's URL and parameters, ``push_format``) is the run's callback."""
    settings = load_settings()
    fields = {"messages": message, "responses": responses, "background": True, "workflow": workflow}
    fields["callback_url"] = None if push is None else push[0]
    body = strict_json.dumps({k: v for k, v in fields.items() if v is not None})
    if len(body) > settings.max_request_bytes:
        raise PayloadTooLarge(f"The message is over the {settings.max_request_bytes}-byte limit.")
    origin = caller_origin(headers)
    call = TurnCall(
        thread_id=thread_id,
        origin=origin,
        body=body,
        route=_ROUTE,
        authorizer_headers=headers,
        dedupe=keyed_call.dedupe_key({"idempotency-key": key}, origin, settings, always_key=True),
        fingerprint=fingerprint("POST", f"/api/threads/{thread_id}/runs", body),
        callback_format=None if push is None else push_format.FORMAT,
        callback_params={} if push is None else push[1],
    )
    outcome = await call_turn(call, settings)
    if not isinstance(outcome, Queued):  # the body asks for a background run: never a synchronous one
        raise TypeError("A2A turns run in the background.")
    return json.loads(outcome.accepted.body)


async def run_status(headers: Mapping[str, str], run_id: str, *, wait_seconds: int = 0) -> dict[str, Any]:
    """``GET /api/runs/{id}``'s document, after up to ``wait_seconds`` for the run to change
    (another origin's run: ``Forbidden``, as on that route)."""
    settings = load_settings()
    found = await authorized_run(settings, run_id, Caller(caller_origin(headers)), headers, "runs/{run_id}")
    return await status_json(settings, await run_control(settings).wait(found, wait_seconds))


async def cancel_run(headers: Mapping[str, str], run_id: str) -> dict[str, Any]:
    """``POST /api/runs/{id}/cancel``'s document."""
    settings = load_settings()
    found = await authorized_run(settings, run_id, Caller(caller_origin(headers)), headers, "runs/{run_id}/cancel")
    return await status_json(settings, await run_control(settings).cancel(found))
