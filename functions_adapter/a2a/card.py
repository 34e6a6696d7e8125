"""A workflow's A2A agent card (v1.0 shape: ``supportedInterfaces``), one per hosted workflow."""

from __future__ import annotations

from typing import Any

PROTOCOL_VERSION = "1.0"
FUNCTION_KEY = "functionKey"


def agent_card(workflow: str, endpoint: str) -> dict[str, Any]:
    """The card for ``workflow`` served at ``endpoint`` (the absolute ``/api/a2a/{workflow}`` URL)."""
    return {
        "name": workflow,
        "description": f"The hosted workflow {workflow!r}: each context is a durable thread, each task one turn.",
        "version": "1.0.0",
        "supportedInterfaces": [{"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION}],
        "capabilities": {"streaming": True, "pushNotifications": True},
        "securitySchemes": {
            FUNCTION_KEY: {
                "apiKeySecurityScheme": {
                    "location": "header",
                    "name": "x-functions-key",
                    "description": "An Azure Functions key (function or host key).",
                }
            }
        },
        "securityRequirements": [{"schemes": {FUNCTION_KEY: {"list": []}}}],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [
            {
                "id": f"{workflow}-turn",
                "name": f"{workflow} turn",
                "description": "One turn of the workflow on the context's thread.",
                "tags": ["workflow", "thread"],
            }
        ],
    }
