"""The HTTP routes' attack tests, run against the MCP tools: another origin's thread,
hostile arguments, a deleted thread and a retried call. Every refusal is a tool result
with ``isError`` and our error code, never an exception, and nothing runs."""

from __future__ import annotations

import pytest

from devtools.function_host import FunctionHost
from functions_adapter.mcp.tools import call_tool

OWNER = {"X-Test-Principal": "owner-1"}
OTHER = {"X-Test-Principal": "other-2"}


@pytest.fixture
def gateway(queue_env: str, host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> FunctionHost:
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "X-Test-Principal")
    return host


async def _turns(host: FunctionHost, thread: str, headers: dict[str, str]) -> int:
    answered = await host.request("GET", f"/api/threads/{thread}/history", headers=headers)
    assert answered.status == 200
    return len((await answered.json())["checkpoints"])


async def test_another_origin_s_thread_is_refused_through_every_tool(gateway: FunctionHost) -> None:
    created = await gateway.request("POST", "/api/threads/owned/runs", json_body={"messages": "hi"}, headers=OWNER)
    assert created.status == 200
    before = await _turns(gateway, "owned", OWNER)
    for tool, args in (
        ("run_turn", {"thread_id": "owned", "message": "steal"}),
        ("get_thread", {"thread_id": "owned"}),
        ("start_turn", {"thread_id": "owned", "message": "steal"}),
    ):
        result = (await call_tool(tool, args, OTHER)).to_json()
        assert result["isError"] is True, tool
        assert result["structuredContent"]["error"]["code"] == "forbidden", (tool, result)
    assert await _turns(gateway, "owned", OWNER) == before


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("run_turn", {"thread_id": "x" * 100_000, "message": "hi"}),
        ("run_turn", {"thread_id": 12, "message": "hi"}),
        ("run_turn", {"thread_id": "t", "message": ["a"]}),
        ("run_turn", {"thread_id": "t", "message": {"nested": {"deep": [1]}}}),
        ("run_turn", {"thread_id": "t", "responses": "not-an-object"}),
        ("run_turn", {"thread_id": 10**4999}),
        ("run_turn", {"thread_id": "t", "message": "m" * 2_000_000}),
        ("run_turn", ["not", "an", "object"]),
        ("get_thread", {"thread_id": {"a": 1}}),
        ("get_run", {"run_id": 10**4999}),
        ("no_such_tool", {}),
    ],
)
async def test_hostile_arguments_are_invalid_requests(host: FunctionHost, tool: str, args: object) -> None:
    result = (await call_tool(tool, args, {})).to_json()
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] in {"invalid_request", "payload_too_large"}, result


async def test_a_deleted_thread_is_not_found(host: FunctionHost) -> None:
    assert (await call_tool("run_turn", {"thread_id": "gone", "message": "hi"}, {})).to_json()["isError"] is False
    assert (await host.request("DELETE", "/api/threads/gone")).status in (200, 202, 204)
    result = (await call_tool("get_thread", {"thread_id": "gone"}, {})).to_json()
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == "thread_not_found"


async def test_a_retried_run_turn_runs_a_second_turn(host: FunctionHost) -> None:
    """docs/mcp.md: no idempotency key in MCP, a retry after a committed turn is a new turn."""
    first = (await call_tool("run_turn", {"thread_id": "again", "message": "same"}, {})).to_json()
    second = (await call_tool("run_turn", {"thread_id": "again", "message": "same"}, {})).to_json()
    assert first["isError"] is False and second["isError"] is False
    assert second["structuredContent"]["previous_checkpoint_id"] == first["structuredContent"]["checkpoint_id"]
    assert second["structuredContent"]["checkpoint_id"] != first["structuredContent"]["checkpoint_id"]
