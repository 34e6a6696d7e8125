"""The MCP tools, protocol-neutral: arguments and the call's headers in, a ``ToolResult`` out.

``run_turn`` is ``POST /api/threads/{id}/runs`` without HTTP: the arguments become a
``TurnCall`` and go through the same ``turn_call.call_turn`` (the authorizer gate on route
``threads/{thread_id}/runs``, the turn factory, the ``RunOwner``), so a turn through MCP
commits, refuses and costs exactly what that route's turn does. ``get_thread`` is
``GET /api/threads/{id}``'s body. A refusal is a result with ``is_error`` and our error code,
never an exception: MCP clients show tool errors to the model, while a protocol error would
end the call.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind

from functions_adapter import thread_access
from functions_adapter.callers import caller_origin
from functions_adapter.mcp.contract import GET_RUN, GET_THREAD, RUN_TURN, START_TURN
from functions_adapter.mcp.results import ToolResult, arguments_of, error_result, reply_text, turn_of
from functions_adapter.settings import SettingsError
from functions_adapter.turn_call import Ran, call_turn
from functions_adapter.wiring import MISCONFIGURED, load_settings
from resumable.base import InvalidRequest, ResumeError, ServerMisconfigured, tracing
from resumable.threads import Caller

logger = logging.getLogger(__name__)


async def run_turn(arguments: Any, headers: Mapping[str, str]) -> ToolResult:
    args = arguments_of(RUN_TURN, arguments)
    thread_id = args["thread_id"]
    settings = load_settings()
    outcome = await call_turn(turn_of(args, headers, settings, background=False), settings)
    if not isinstance(outcome, Ran) or outcome.result is None:  # no key, no stream, no background here
        raise ResumeError("The turn did not run to a result.")
    result = json.loads(outcome.result)
    structured = {
        "thread_id": thread_id,
        "checkpoint_id": result["checkpoint_id"],
        "previous_checkpoint_id": result["previous_checkpoint_id"],
        "status": result["status"],
        "pending_requests": result["pending_requests"],
        # A first turn, or one that restarted an expired thread (THREAD_EXPIRED=restart).
        "thread_created": bool(result.get("thread_created")) or result["previous_checkpoint_id"] is None,
    }
    return ToolResult(reply_text(result), structured)


async def get_thread(arguments: Any, headers: Mapping[str, str]) -> ToolResult:
    thread_id = arguments_of(GET_THREAD, arguments)["thread_id"]
    settings = load_settings()
    await thread_access.gate(headers, settings, "threads/{thread_id}", thread_id)
    body, _ = await thread_access.thread_view(settings, thread_id, Caller(caller_origin(headers)))
    head = body["checkpoint_id"] or "none"
    return ToolResult(f"Thread {thread_id}: {body['turns']} turn(s), head checkpoint {head}.", body)


async def _start_turn(arguments: Any, headers: Mapping[str, str]) -> ToolResult:
    from functions_adapter.mcp import background  # noqa: PLC0415 - on first use, as the HTTP routes load background runs

    return await background.start_turn(arguments, headers)


async def _get_run(arguments: Any, headers: Mapping[str, str]) -> ToolResult:
    from functions_adapter.mcp import background  # noqa: PLC0415 - on first use

    return await background.get_run(arguments, headers)


HANDLERS: dict[str, Callable[[Any, Mapping[str, str]], Awaitable[ToolResult]]] = {
    RUN_TURN: run_turn,
    GET_THREAD: get_thread,
    START_TURN: _start_turn,
    GET_RUN: _get_run,
}


async def call_tool(name: str, arguments: Any, headers: Mapping[str, str]) -> ToolResult:
    """Run tool ``name`` as one request: a SERVER span (the caller's ``traceparent`` its
    parent), a request ID, one log line; every failure is an error result."""
    started = time.perf_counter()
    span = tracing.tracer.start_span(
        f"mcp {name}",
        context=propagate.extract(dict(headers)),
        kind=SpanKind.SERVER,
        attributes={"mcp.tool": name},
    )
    with trace.use_span(span, end_on_exit=True):
        request_id = tracing.new_request_id(span)
        result = await _guarded(name, arguments, headers)
        code = result.structured["error"]["code"] if result.is_error else None
        if code is not None:
            span.set_attribute("error.type", code)
    logger.info(
        "mcp tool completed",
        extra={
            "request_id": request_id,
            "tool": name,
            "error_code": code,
            "duration_ms": round((time.perf_counter() - started) * 1000, 1),
        },
    )
    return result


async def _guarded(name: str, arguments: Any, headers: Mapping[str, str]) -> ToolResult:
    """As ``request_trace.guarded`` maps an HTTP handler's failures: documented errors as
    such, a late configuration error as ``server_misconfigured``, anything else as
    ``internal_error`` (details only in the log)."""
    handler = HANDLERS.get(name)
    try:
        if handler is None:
            raise InvalidRequest(f"No tool is named {name!r}.", details={"tools": sorted(HANDLERS)})
        return await handler(arguments if arguments is not None else {}, headers)
    except ResumeError as exc:
        return error_result(exc)
    except SettingsError as exc:  # raised late, e.g. by a workflow factory reading its settings
        logger.error("Configuration error: %s", exc)
        return error_result(ServerMisconfigured(MISCONFIGURED))
    except Exception:
        logger.exception("Unhandled error in MCP tool %s", name)
        return error_result(ResumeError("An internal error occurred."))
