"""The Functions MCP extension's endpoint, played locally with the official ``mcp`` SDK.

In Azure the host serves ``/runtime/webhooks/mcp`` (the MCP extension) and invokes the app's
``mcpToolTrigger`` functions. Here the SDK's low-level ``Server`` and streamable-HTTP session
manager serve the same path and do what the extension does: list each tool trigger's
binding (``toolName``, ``description``, ``toolProperties``, ``outputSchema``), refuse a call
that misses a required property (a protocol error, as the host refuses it), and invoke the
trigger function with the host's tool context JSON, passing on the ``CallToolResult`` its
``call_tool_result`` envelope holds. Both handshakes the SDK's clients use are served:
``server/discover`` (2.x) and ``initialize`` (1.x).

    async with mcp_endpoint(host, app): ...   # app: the FastAPI app of devtools.local_server
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.routing import Route

from devtools.function_host import FunctionHost, Trigger

ROOT = Path(__file__).resolve().parent.parent
MCP_PATH = "/runtime/webhooks/mcp"
TOOL_TRIGGER = "mcpToolTrigger"


def tool_triggers(host: FunctionHost) -> dict[str, Trigger]:
    """The app's MCP tool triggers by tool name."""
    return {t.binding["toolName"]: t for t in host.triggers.values() if t.binding.get("type") == TOOL_TRIGGER}


def _properties(trigger: Trigger) -> list[dict[str, Any]]:
    return list(json.loads(trigger.binding.get("toolProperties") or "[]"))


def _tool(trigger: Trigger) -> types.Tool:
    """The tool as the extension lists it: the input schema built from ``toolProperties``."""
    properties = _properties(trigger)
    schema = {
        "type": "object",
        "properties": {
            p["propertyName"]: {"type": p["propertyType"], "description": p.get("description") or ""}
            for p in properties
        },
        "required": [p["propertyName"] for p in properties if p.get("isRequired")],
    }
    output = trigger.binding.get("outputSchema")
    return types.Tool(
        name=trigger.binding["toolName"],
        description=trigger.binding.get("description"),
        input_schema=schema,
        output_schema=json.loads(output) if output else None,
    )


def build_server(host: FunctionHost) -> Server[Any]:
    triggers = tool_triggers(host)

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(t) for t in triggers.values()])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        trigger = triggers.get(params.name)
        if trigger is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        arguments = dict(params.arguments or {})
        missing = [
            p["propertyName"]
            for p in _properties(trigger)
            if p.get("isRequired") and arguments.get(p["propertyName"]) is None
        ]
        if missing:  # the extension's ToolInputSchema.Validate, before the function runs
            raise MCPError(types.INVALID_PARAMS, f"Missing required tool properties: {', '.join(missing)}")
        request = ctx.request
        headers = dict(request.headers) if request is not None and hasattr(request, "headers") else {}
        context = {
            "name": params.name,
            "arguments": arguments,
            "sessionid": headers.get("mcp-session-id"),
            "transport": {
                "name": "http",
                "sessionId": headers.get("mcp-session-id"),
                "properties": {"headers": headers},
            },
        }
        returned = await trigger.handler(**{trigger.binding["name"]: json.dumps(context)})
        envelope = json.loads(returned)
        if envelope.get("type") != "call_tool_result":
            raise MCPError(types.INTERNAL_ERROR, "The tool function did not return a call_tool_result.")
        return types.CallToolResult.model_validate(json.loads(envelope["content"]))

    options = _host_options()
    return Server(
        options.get("serverName", "Azure Functions MCP server"),
        version=options.get("serverVersion", "1.0.0"),
        instructions=options.get("instructions"),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _host_options() -> dict[str, str]:
    """host.json's ``extensions.mcp`` (server name, version, instructions), as the host reads it."""
    host_json = json.loads((ROOT / "host.json").read_text())
    return dict(host_json.get("extensions", {}).get("mcp", {}))


@asynccontextmanager
async def mcp_endpoint(host: FunctionHost, app: FastAPI) -> AsyncIterator[None]:
    """Serve the host's MCP tools on ``app`` at ``MCP_PATH`` while the context is open."""
    manager = StreamableHTTPSessionManager(
        app=build_server(host),
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        ),
    )
    # First, so that no catch-all route of the app shadows it.
    app.router.routes.insert(0, Route(MCP_PATH, endpoint=StreamableHTTPASGIApp(manager)))
    async with manager.run():
        yield
