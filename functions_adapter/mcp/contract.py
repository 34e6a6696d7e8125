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
START_TURN = "start_turn"
GET_RUN = "get_run"

_THREAD_ID = {"type": "string", "description": "The thread (conversation) ID; a new ID starts a thread."}

_PENDING = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"request_id": {"type": "string"}, "data": {}, "response_type": {"type": "string"}},
        "required": ["request_id"],
    },
}


# A refusal's structuredContent (``tools.error_result``): our error body, the HTTP route's
# status, and ``retry_after`` where that route sends Retry-After.
ERROR_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "details": {"type": "object"}},
            "required": ["code", "message"],
        },
        "status": {"type": "integer"},
        "retry_after": {"type": "integer"},
    },
    "required": ["error", "status"],
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
    # What a successful call's structuredContent holds.
    result_schema: dict[str, Any]

    @property
    def output_schema(self) -> dict[str, Any]:
        """The declared ``outputSchema``: the tool's result or a refusal (``ERROR_RESULT``).

        A refusal's structuredContent is checked against it too: MCP Inspector and
        ``@modelcontextprotocol/sdk`` 1.x validate error results, and a schema that admitted
        only the result would show their schema error instead of our code."""
        return {"type": "object", "anyOf": [self.result_schema, ERROR_RESULT]}

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


_TURN_INPUT = (
    Property("thread_id", "string", _THREAD_ID["description"], required=True),
    Property("message", "string", "The user's message for this turn."),
    Property("responses", "object", "Answers to pending requests: {request_id: answer}."),
    Property(
        "workflow",
        "string",
        "The workflow a new thread runs ('name' or 'name@version'; default: the app's WORKFLOW). "
        "An existing thread keeps its own.",
    ),
)
_RUN = {
    "type": "object",
    "properties": {
        "run_id": {"type": "string"},
        "status": {"type": "string"},
        "thread_id": {"type": ["string", "null"]},
    },
    "required": ["run_id", "status", "thread_id"],
}

TOOLS: dict[str, Tool] = {
    RUN_TURN: Tool(
        name=RUN_TURN,
        description=(
            "Run one turn of the workflow on a thread: send a message, or answer the thread's pending "
            "human-in-the-loop requests with 'responses' (request ID -> answer). The result's text is "
            "the reply; its structured content names the new checkpoint and any pending requests."
        ),
        properties=_TURN_INPUT,
        result_schema={
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
        result_schema={
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
    START_TURN: Tool(
        name=START_TURN,
        description=(
            "Start a turn as a background run and return at once with its run_id (for turns longer than "
            "a tool call should wait); the thread's turns run in order. Follow it with get_run."
        ),
        properties=_TURN_INPUT,
        result_schema=_RUN,
    ),
    GET_RUN: Tool(
        name=GET_RUN,
        description=(
            "A background run's status (queued, running, succeeded, failed, cancelled) and, once it "
            "succeeded, its reply; wait_seconds (up to 60) holds the answer until the run finishes."
        ),
        properties=(
            Property("run_id", "string", "The run_id start_turn returned.", required=True),
            Property("wait_seconds", "integer", "Wait up to this many seconds (0-60) for the run to finish."),
        ),
        result_schema=_RUN,
    ),
}
