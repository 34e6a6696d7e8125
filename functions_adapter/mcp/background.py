"""``start_turn`` and ``get_run``: a turn as a background run, for turns longer than an MCP
client waits on one tool call.

They are ``POST /api/threads/{id}/runs`` with ``"background": true`` and ``GET /api/runs/{id}``
(``Prefer: wait=N``), run through those routes' own handlers: the call becomes the HTTP
request it stands for (method, path, the MCP request's headers; no body on the wire), so the
accept, the authorizer on the run's thread and the status document are theirs, not copies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastapi import Request

from functions_adapter import thread_access
from functions_adapter.api import background_api
from functions_adapter.authorization import caller_origin
from functions_adapter.mcp.contract import GET_RUN, START_TURN
from functions_adapter.mcp.tools import ToolResult, arguments_of, reply_text, turn_body
from functions_adapter.turns import build_turn
from functions_adapter.wiring import build_service, load_settings
from resumable.base.errors import InvalidRequest

MAX_WAIT_SECONDS = 60


def _as_request(method: str, path: str, headers: Mapping[str, str]) -> Request:
    """The HTTP request this tool call stands for, as the route handlers read it."""
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    scope = {"type": "http", "method": method, "path": path, "query_string": b"", "headers": raw}
    return Request(scope)


async def start_turn(arguments: Any, headers: Mapping[str, str]) -> ToolResult:
    args = arguments_of(START_TURN, arguments)
    thread_id = args["thread_id"]
    settings = load_settings()
    body = turn_body(args, settings, background=True)
    await thread_access.gate_headers(headers, settings, "threads/{thread_id}/runs", thread_id)
    turn = build_turn(settings, build_service(settings), body, thread_id=thread_id, origin=caller_origin(headers))
    # Without the caller's prefer/idempotency headers: the route must not read a key or a
    # preference the MCP client never meant for it.
    request = _as_request("POST", f"/api/threads/{thread_id}/runs", {})
    response = await background_api.accept(request, body, turn, settings=settings, dedupe=None)
    accepted = json.loads(bytes(response.body))
    run = {"run_id": accepted["run_id"], "status": accepted["status"], "thread_id": thread_id}
    return ToolResult(f"Started run {accepted['run_id']} on thread {thread_id}; follow it with get_run.", run)


async def get_run(arguments: Any, headers: Mapping[str, str]) -> ToolResult:
    args = arguments_of(GET_RUN, arguments)
    wait = args.get("wait_seconds", 0)
    if isinstance(wait, bool) or not isinstance(wait, int) or not 0 <= wait <= MAX_WAIT_SECONDS:
        raise InvalidRequest(f"'wait_seconds' must be a whole number from 0 to {MAX_WAIT_SECONDS}.")
    run_id = args["run_id"]
    forwarded = {k: v for k, v in headers.items() if k.lower() != "prefer"}
    request = _as_request("GET", f"/api/runs/{run_id}", {**forwarded, "prefer": f"wait={wait}"})
    status = json.loads(bytes((await background_api.get_status(request, run_id)).body))
    result = status.get("result")
    if status["status"] == "succeeded" and isinstance(result, dict):
        text = reply_text(result)
    elif status.get("error"):
        text = f"Run {run_id}: {status['status']} ({status['error'].get('code')})."
    else:
        text = f"Run {run_id}: {status['status']}."
    return ToolResult(text, status)
