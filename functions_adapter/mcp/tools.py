"""The MCP tools, protocol-neutral: arguments and the call's headers in, a ``ToolResult`` out.

``run_turn`` is ``POST /api/threads/{id}/runs`` without HTTP: the same authorizer gate (route
``threads/{thread_id}/runs``), the same turn factory (``turns.build_turn``) and the same
``RunOwner``, so a turn through MCP commits, refuses and costs exactly what that route's
turn does. ``get_thread`` is ``GET /api/threads/{id}``'s body. A refusal is a result with
``is_error`` and our error code, never an exception: MCP clients show tool errors to the
model, while a protocol error would end the call.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind

from functions_adapter import thread_access
from functions_adapter.authorization import caller_origin
from functions_adapter.mcp.contract import GET_RUN, GET_THREAD, RUN_TURN, START_TURN, TOOLS
from functions_adapter.settings import Settings, SettingsError
from functions_adapter.status_map import headers_of, status_of
from functions_adapter.turns import build_turn
from functions_adapter.wiring import MISCONFIGURED, build_service, load_settings
from resumable.base import strict_json, tracing
from resumable.base.errors import InvalidRequest, PayloadTooLarge, ResumeError, ServerMisconfigured
from resumable.core.run_owner import RunOwner
from resumable.threads.ownership import Caller

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool call's result: the text a model reads, the structured content a program reads."""

    text: str
    structured: dict[str, Any]
    is_error: bool = False

    def to_json(self) -> dict[str, Any]:
        """The MCP ``CallToolResult`` object."""
        return {
            "content": [{"type": "text", "text": self.text}],
            "structuredContent": self.structured,
            "isError": self.is_error,
        }


def error_result(error: ResumeError) -> ToolResult:
    """Our error body, plus the HTTP status the same refusal has on the HTTP routes (and
    ``retry_after`` seconds where that route would send ``Retry-After``)."""
    body: dict[str, Any] = {**error.to_body(), "status": status_of(error)}
    retry = headers_of(error).get("Retry-After")
    if retry is not None:
        body["retry_after"] = int(retry)
    return ToolResult(f"{error.code}: {error.message}", body, is_error=True)


def arguments_of(tool: str, arguments: Any) -> dict[str, Any]:
    """The arguments as an object with only the tool's properties, its required IDs strings."""
    if not isinstance(arguments, dict):
        raise InvalidRequest("The arguments must be an object.")
    allowed = {p.name for p in TOOLS[tool].properties}
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        raise InvalidRequest(f"Unknown argument(s): {', '.join(unknown)}.", details={"allowed": sorted(allowed)})
    for prop in TOOLS[tool].properties:
        if prop.required and not isinstance(arguments.get(prop.name), str):
            raise InvalidRequest(f"'{prop.name}' must be a string.")
    return arguments


def turn_body(args: dict[str, Any], settings: Settings, *, background: bool = False) -> bytes:
    """The body ``POST /api/threads/{id}/runs`` would get for this call (checked there, by
    the one parser); only the MCP-specific shapes are checked here."""
    message, responses = args.get("message"), args.get("responses")
    if message is not None and not isinstance(message, str):
        raise InvalidRequest("'message' must be a string.")
    if responses is not None and not isinstance(responses, dict):
        raise InvalidRequest("'responses' must be an object of {request_id: answer}.")
    workflow = args.get("workflow")
    if workflow is not None and not isinstance(workflow, str):
        raise InvalidRequest("'workflow' must be a string.")
    fields = {
        "messages": message,
        "responses": responses,
        "background": True if background else None,
        "workflow": workflow,
    }
    body = strict_json.dumps({k: v for k, v in fields.items() if v is not None})
    if len(body) > settings.max_request_bytes:
        raise PayloadTooLarge(f"The turn is over the {settings.max_request_bytes}-byte limit.")
    return body


def reply_text(body: dict[str, Any]) -> str:
    """A turn result's assistant messages, or what its pending requests ask."""
    replies = [m["content"] for m in body.get("messages", []) if m.get("role") == "assistant" and m.get("content")]
    if replies:
        return "\n\n".join(replies)
    pending = body.get("pending_requests") or []
    if pending:
        lines = [f"- {p['request_id']}: {json.dumps(p.get('data'))}" for p in pending]
        return "Waiting for answers (call run_turn with 'responses'):\n" + "\n".join(lines)
    return ""


async def run_turn(arguments: Any, headers: Mapping[str, str]) -> ToolResult:
    args = arguments_of(RUN_TURN, arguments)
    thread_id = args["thread_id"]
    settings = load_settings()
    body = turn_body(args, settings)
    await thread_access.gate_headers(headers, settings, "threads/{thread_id}/runs", thread_id)
    turn = build_turn(settings, build_service(settings), body, thread_id=thread_id, origin=caller_origin(headers))
    result = json.loads(await RunOwner(turn.runner, turn.request).result())
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
    await thread_access.gate_headers(headers, settings, "threads/{thread_id}", thread_id)
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
