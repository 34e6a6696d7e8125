"""The Functions MCP extension's side: the host's tool-call context in, its result envelope out.

The host (extension ``Microsoft.Azure.Functions.Extensions.Mcp``) serves
``/runtime/webhooks/mcp`` and invokes a tool trigger with the call's context as a JSON string:
``{"name", "arguments", "sessionid", "clientinfo", "transport": {"name", "sessionId",
"properties": {"headers": {...}}}}``. With ``useResultSchema`` on the trigger, the function
returns ``{"type": "call_tool_result", "content": "<CallToolResult JSON>"}`` and the host
passes that ``CallToolResult`` to the client as it is (text, ``structuredContent``,
``isError``), instead of wrapping the return value as text.
"""

from __future__ import annotations

import json
from typing import Any

from functions_adapter.mcp.tools import ToolResult, call_tool, error_result
from resumable.base import InvalidRequest


def envelope(result: ToolResult) -> str:
    """The function's return value for a ``useResultSchema`` tool trigger."""
    return json.dumps({"type": "call_tool_result", "content": json.dumps(result.to_json())})


def _headers(context: dict[str, Any]) -> dict[str, str]:
    transport = context.get("transport")
    properties = transport.get("properties") if isinstance(transport, dict) else None
    headers = properties.get("headers") if isinstance(properties, dict) else None
    if not isinstance(headers, dict):
        return {}
    return {str(k): str(v) for k, v in headers.items()}


async def handle(tool: str, raw_context: str) -> str:
    """Run ``tool`` (the trigger's own tool name) with the arguments the host passed."""
    try:
        context = json.loads(raw_context)
    except ValueError:
        context = None
    if not isinstance(context, dict):
        return envelope(error_result(InvalidRequest("The tool call context is not a JSON object.")))
    return envelope(await call_tool(tool, context.get("arguments"), _headers(context)))
