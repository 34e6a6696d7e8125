"""Every MCP tool result, a refusal included, matches the ``outputSchema`` the tool declares.

The MCP Inspector (CLI v1 and v2) and ``@modelcontextprotocol/sdk`` 1.x validate a result's
``structuredContent`` against the tool's ``outputSchema`` even when ``isError`` is set, and
show a schema error instead of our code when it does not match. So each tool's schema (as
the trigger binding declares it, which the host and ``devtools/mcp_server.py`` list) admits
its own result and our error shape; validated here with JSON Schema 2020-12, MCP's default.
The Inspector itself runs in ``tests/e2e/test_mcp_inspector.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from devtools.function_host import FunctionHost
from functions_adapter.mcp.contract import TOOLS
from functions_adapter.mcp.tools import error_result
from resumable.base.errors import (
    InvalidRequest,
    OutcomeUnknown,
    PendingRequestsOutstanding,
    ResumeError,
    StorageUnavailable,
    ThreadBusy,
)
from tests.adapter.test_mcp_tools import _tool


def _schema(host: FunctionHost, tool: str) -> dict[str, Any]:
    (trigger,) = [t for t in host.triggers.values() if t.binding.get("toolName") == tool]
    schema = json.loads(trigger.binding["outputSchema"])
    Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"  # MCP: an outputSchema is an object schema
    return dict(schema)


def _problems(schema: dict[str, Any], result: dict[str, Any]) -> list[str]:
    return [error.message for error in Draft202012Validator(schema).iter_errors(result["structuredContent"])]


async def test_refusals_from_every_tool_match_its_output_schema(host: FunctionHost, queue_env: str) -> None:
    refusals = {
        "run_turn": {"thread_id": "t", "message": "x", "responses": {"r": "y"}},
        "get_thread": {"thread_id": "never-made"},
        "start_turn": {"thread_id": "not/an id", "message": "x"},
        "get_run": {"run_id": "0" * 32},
    }
    codes = {}
    for tool, arguments in refusals.items():
        result = await _tool(host, tool, arguments)
        assert result["isError"] is True, result
        codes[tool] = result["structuredContent"]["error"]["code"]
        assert result["content"][0]["text"].startswith(codes[tool] + ": ")
        assert _problems(_schema(host, tool), result) == [], (tool, result)
    assert codes == {
        "run_turn": "invalid_request",
        "get_thread": "thread_not_found",
        "start_turn": "invalid_request",
        "get_run": "run_not_found",
    }


@pytest.mark.parametrize(
    "error",
    [
        InvalidRequest("bad", details={"allowed": ["thread_id"]}),
        ThreadBusy("busy"),
        StorageUnavailable("down"),
        OutcomeUnknown("unknown"),
        PendingRequestsOutstanding("pending", details={"pending_request_ids": ["r1"]}),
        ResumeError("An internal error occurred."),
    ],
    ids=lambda e: e.code,
)
async def test_every_error_shape_matches_every_tools_schema(host: FunctionHost, error: ResumeError) -> None:
    result = error_result(error).to_json()
    for tool in TOOLS:
        assert _problems(_schema(host, tool), result) == [], tool


async def test_results_match_and_a_result_missing_its_fields_does_not(host: FunctionHost) -> None:
    turn = await _tool(host, "run_turn", {"thread_id": "schema-t", "message": "hello"})
    thread = await _tool(host, "get_thread", {"thread_id": "schema-t"})
    assert turn["isError"] is False and thread["isError"] is False
    assert _problems(_schema(host, "run_turn"), turn) == []
    assert _problems(_schema(host, "get_thread"), thread) == []
    # The schema still says something: neither the other tool's result nor a bare object passes.
    assert _problems(_schema(host, "get_thread"), turn) != []
    assert _problems(_schema(host, "run_turn"), {"structuredContent": {"status": 404}}) != []
