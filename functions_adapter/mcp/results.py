"""A tool call's values, shared by the tools: its arguments checked against the tool's
contract, the ``TurnCall`` they ask for (the turn in the runs routes' shape), and the
``ToolResult`` a tool answers (a refusal included, with the status the same refusal has over HTTP)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from functions_adapter.callers import caller_origin
from functions_adapter.errors import PayloadTooLarge
from functions_adapter.mcp.contract import TOOLS
from functions_adapter.settings import Settings
from functions_adapter.status_map import headers_of, status_of
from functions_adapter.turn_call import TurnCall
from resumable.base import InvalidRequest, ResumeError, strict_json


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


def turn_of(args: dict[str, Any], headers: Mapping[str, str], settings: Settings, *, background: bool) -> TurnCall:
    """The turn a ``run_turn``/``start_turn`` call asks for, on the thread route's gate and
    never keyed: an MCP call carries no key meant for the runs routes."""
    return TurnCall(
        thread_id=args["thread_id"],
        origin=caller_origin(headers),
        body=turn_body(args, settings, background=background),
        route="threads/{thread_id}/runs",
        authorizer_headers=headers,
    )
