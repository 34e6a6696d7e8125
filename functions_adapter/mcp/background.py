"""``start_turn`` and ``get_run``: a turn as a background run, for turns longer than an MCP
client waits on one tool call.

They are ``POST /api/threads/{id}/runs`` with ``"background": true`` and ``GET /api/runs/{id}``
(``Prefer: wait=N``) without HTTP: the same turn call (``turn_call.call_turn``: the gate, the
background accept) and the same reads of the run (``background_submit.authorized_run``, the
status document), given plain values, so they are those routes' own, not copies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from functions_adapter.background_submit import authorized_run, run_control, status_json
from functions_adapter.callers import caller_origin
from functions_adapter.mcp.contract import GET_RUN, START_TURN
from functions_adapter.mcp.results import ToolResult, arguments_of, reply_text, turn_of
from functions_adapter.turn_call import Queued, call_turn
from functions_adapter.wiring import load_settings
from resumable.background import records as rr
from resumable.base import InvalidRequest, ResumeError
from resumable.threads import Caller

MAX_WAIT_SECONDS = 60


async def start_turn(arguments: Any, headers: Mapping[str, str]) -> ToolResult:
    args = arguments_of(START_TURN, arguments)
    thread_id = args["thread_id"]
    settings = load_settings()
    outcome = await call_turn(turn_of(args, headers, settings, background=True), settings)
    if not isinstance(outcome, Queued) or outcome.accepted.run_id is None:  # unkeyed: never a replay
        raise ResumeError("The run was not queued.")
    run_id = outcome.accepted.run_id
    run = {"run_id": run_id, "status": rr.QUEUED, "thread_id": thread_id}
    return ToolResult(f"Started run {run_id} on thread {thread_id}; follow it with get_run.", run)


async def get_run(arguments: Any, headers: Mapping[str, str]) -> ToolResult:
    args = arguments_of(GET_RUN, arguments)
    wait = args.get("wait_seconds", 0)
    if isinstance(wait, bool) or not isinstance(wait, int) or not 0 <= wait <= MAX_WAIT_SECONDS:
        raise InvalidRequest(f"'wait_seconds' must be a whole number from 0 to {MAX_WAIT_SECONDS}.")
    run_id = args["run_id"]
    settings = load_settings()
    found = await authorized_run(settings, run_id, Caller(caller_origin(headers)), headers, "runs/{run_id}")
    status = await status_json(settings, await run_control(settings).wait(found, wait))
    result = status.get("result")
    if status["status"] == "succeeded" and isinstance(result, dict):
        text = reply_text(result)
    elif status.get("error"):
        text = f"Run {run_id}: {status['status']} ({status['error'].get('code')})."
    else:
        text = f"Run {run_id}: {status['status']}."
    return ToolResult(text, status)
