"""The MCP tools' names and schemas: a contract (docs/mcp.md), read by the Functions trigger
declarations and by the local server alike, so both list the same tools.

Kept free of heavy imports: ``function_app`` reads it when the worker indexes the app.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

RUN_TURN = "run_turn"
GET_THREAD = "get_thread"

_THREAD_ID = {"type": "string", "description": "The thread (conversation) ID; a new ID starts a thread."}
_PENDING = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"request_id": {"type": "string"}, "data": {}, "response_type": {"type": "string"}},
        "required": ["request_id"],
    },
}


@dataclass(frozen=True, slots=True)
class Property:
    """One input argument, as the Functions MCP extension's ``toolProperties`` lists it."""

    name: str
    type: str  # a JSON Schema type: string, object, ...
    description: str
    required: bool = False


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    properties: tuple[Property, ...]
    output_schema: dict[str, Any]

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema the local server lists (the extension builds the same from ``properties``)."""
        return {
            "type": "object",
            "properties": {p.name: {"type": p.type, "description": p.description} for p in self.properties},
            "required": [p.name for p in self.properties if p.required],
        }

    def tool_properties_json(self) -> str:
        """``toolProperties`` for the extension's tool trigger binding."""
        return json.dumps(
            [
                {"propertyName": p.name, "propertyType": p.type, "description": p.description, "isRequired": p.required}
                for p in self.properties
            ]
        )


TOOLS: dict[str, Tool] = {
    RUN_TURN: Tool(
        name=RUN_TURN,
        description=(
            "Run one turn of the workflow on a thread: send a message, or answer the thread's pending "
            "human-in-the-loop requests with 'responses' (request ID -> answer). The result's text is "
            "the reply; its structured content names the new checkpoint and any pending requests."
        ),
        properties=(
            Property("thread_id", "string", _THREAD_ID["description"], required=True),
            Property("message", "string", "The user's message for this turn."),
            Property("responses", "object", "Answers to pending requests: {request_id: answer}."),
        ),
        output_schema={
            "type": "object",
            "properties": {
                "thread_id": {"type": "string"},
                "checkpoint_id": {"type": "string"},
                "previous_checkpoint_id": {"type": ["string", "null"]},
                "status": {"type": "string"},
                "pending_requests": _PENDING,
                "thread_created": {"type": "boolean"},
            },
            "required": ["thread_id", "checkpoint_id", "status", "pending_requests", "thread_created"],
        },
    ),
    GET_THREAD: Tool(
        name=GET_THREAD,
        description="A thread's head checkpoint, turn count, recent lineage and metadata.",
        properties=(Property("thread_id", "string", "The thread ID.", required=True),),
        output_schema={
            "type": "object",
            "properties": {
                "thread_id": {"type": "string"},
                "checkpoint_id": {"type": ["string", "null"]},
                "turns": {"type": "integer"},
                "recent_checkpoint_ids": {"type": "array", "items": {"type": "string"}},
                "metadata": {"type": "object"},
            },
            "required": ["thread_id", "checkpoint_id", "turns", "recent_checkpoint_ids", "metadata"],
        },
    ),
}
