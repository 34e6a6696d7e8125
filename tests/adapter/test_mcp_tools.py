"""The MCP tool triggers in-process: the same turn pipeline, the same storage cost, the
same authorizer as ``POST /api/threads/{id}/runs``, and every refusal as a tool error.

Called as the host's MCP extension calls them: the trigger function with the tool context
JSON, its ``call_tool_result`` envelope decoded. Over real HTTP with the ``mcp`` client:
``tests/e2e/test_mcp_serve.py``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from devtools.queue_runner import QueueRunner
from tests import recording_workflow


async def _tool(host: FunctionHost, tool: str, arguments: Any, headers: dict[str, str] | None = None) -> Any:
    (trigger,) = [t for t in host.triggers.values() if t.binding.get("toolName") == tool]
    context = {"name": tool, "arguments": arguments, "transport": {"name": "http", "properties": {"headers": headers}}}
    envelope = json.loads(await trigger.handler(context=json.dumps(context)))
    assert envelope["type"] == "call_tool_result"
    return json.loads(envelope["content"])


async def _http_turn(host: FunctionHost, thread: str, text: str) -> dict[str, Any]:
    response = await host.request("POST", f"/api/threads/{thread}/runs", json_body={"messages": text})
    assert response.status == 200
    return dict(await response.json())


async def test_a_turn_through_mcp_costs_the_storage_operations_of_the_http_route(
    host: FunctionHost, ops: OperationCounter
) -> None:
    await _http_turn(host, "via-http", "first")
    first = await _tool(host, "run_turn", {"thread_id": "via-mcp", "message": "first"})
    assert first["isError"] is False and first["structuredContent"]["thread_created"] is True

    ops.reset()
    http = await _http_turn(host, "via-http", "second")
    http_ops = (dict(ops.counts), [m for m, _ in ops.log])
    ops.reset()
    mcp = await _tool(host, "run_turn", {"thread_id": "via-mcp", "message": "second"})
    mcp_ops = (dict(ops.counts), [m for m, _ in ops.log])

    assert mcp["isError"] is False
    assert mcp_ops == http_ops and sum(http_ops[0].values()) > 0
    assert mcp["content"] == [{"type": "text", "text": http["messages"][0]["content"]}]
    assert mcp["structuredContent"]["previous_checkpoint_id"] == first["structuredContent"]["checkpoint_id"]


async def test_the_thread_authorizer_gates_mcp_with_the_calls_headers(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, str]] = []

    def only_team_a(*, route: str, thread_id: str, headers: dict[str, str], metadata: dict[str, str]) -> bool:
        seen.append((route, headers.get("x-team", "")))
        return headers.get("x-team") == "a"

    monkeypatch.setattr("tests.adapter.test_mcp_tools.AUTHORIZER", only_team_a, raising=False)
    monkeypatch.setenv("THREAD_AUTHORIZER", "tests.adapter.test_mcp_tools:AUTHORIZER")
    refused = await _tool(host, "run_turn", {"thread_id": "gated", "message": "hi"}, {"x-team": "b"})
    assert refused["isError"] is True
    assert refused["structuredContent"]["error"]["code"] == "forbidden"
    assert refused["structuredContent"]["status"] == 403
    allowed = await _tool(host, "run_turn", {"thread_id": "gated", "message": "hi"}, {"x-team": "a"})
    assert allowed["isError"] is False
    read = await _tool(host, "get_thread", {"thread_id": "gated"}, {"x-team": "b"})
    assert read["structuredContent"]["error"]["code"] == "forbidden"
    assert seen == [
        ("threads/{thread_id}/runs", "b"),
        ("threads/{thread_id}/runs", "a"),
        ("threads/{thread_id}", "b"),
    ]


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"thread_id": 42, "message": "x"}, "invalid_request"),
        ({"thread_id": "t", "message": ["x"]}, "invalid_request"),
        ({"thread_id": "t", "responses": "yes"}, "invalid_request"),
        ({"thread_id": "t", "message": " "}, "invalid_request"),
        ({"thread_id": "t", "message": "x", "responses": {"r": "y"}}, "invalid_request"),
        ({"thread_id": "t", "responses": {"no-such-request": "y"}}, "invalid_request"),
        ({"thread_id": "t", "message": "x", "checkpoint_id": "c"}, "invalid_request"),
        ("not an object", "invalid_request"),
    ],
)
async def test_bad_input_is_a_tool_error_not_an_exception(host: FunctionHost, arguments: Any, code: str) -> None:
    await _http_turn(host, "t", "exists")
    result = await _tool(host, "run_turn", arguments)
    assert result["isError"] is True, result
    assert result["structuredContent"]["error"]["code"] == code
    assert result["content"][0]["text"].startswith(f"{code}: ")


async def test_a_malformed_context_is_a_tool_error(host: FunctionHost) -> None:
    (trigger,) = [t for t in host.triggers.values() if t.binding.get("toolName") == "get_thread"]
    envelope = json.loads(await trigger.handler(context="not json"))
    result = json.loads(envelope["content"])
    assert result["isError"] is True and result["structuredContent"]["error"]["code"] == "invalid_request"


async def test_a_busy_thread_is_a_tool_error_with_retry_after_and_commits_nothing(recording: FunctionHost) -> None:
    await _http_turn(recording, "busy", "first")
    running = asyncio.ensure_future(_http_turn(recording, "busy", "wait here"))
    await asyncio.wait_for(recording_workflow.WAITING.wait(), 10)
    refused = await _tool(recording, "run_turn", {"thread_id": "busy", "message": "me too"})
    recording_workflow.RELEASE.set()
    committed = await running
    assert refused["isError"] is True
    assert refused["structuredContent"]["error"]["code"] == "thread_busy"
    assert (refused["structuredContent"]["status"], refused["structuredContent"]["retry_after"]) == (409, 1)
    thread = await _tool(recording, "get_thread", {"thread_id": "busy"})
    assert thread["structuredContent"]["checkpoint_id"] == committed["checkpoint_id"]
    assert thread["structuredContent"]["turns"] == 2  # the refused call added nothing


async def test_after_a_delete_the_thread_is_gone_for_mcp_too(host: FunctionHost) -> None:
    first = await _tool(host, "run_turn", {"thread_id": "erased", "message": "remember me"})
    assert first["isError"] is False
    assert (await host.request("DELETE", "/api/threads/erased")).status == 204
    gone = await _tool(host, "get_thread", {"thread_id": "erased"})
    assert gone["structuredContent"]["error"]["code"] == "thread_not_found"
    again = await _tool(host, "run_turn", {"thread_id": "erased", "message": "anyone?"})
    assert again["structuredContent"]["thread_created"] is True
    assert "remember me" not in again["content"][0]["text"]  # nothing of the deleted thread survives


async def test_start_turn_runs_in_the_background_and_get_run_reports_it(host: FunctionHost, queue_env: str) -> None:
    await _http_turn(host, "later", "first")
    started = await _tool(host, "start_turn", {"thread_id": "later", "message": "in the background"})
    assert started["isError"] is False, started
    run = started["structuredContent"]
    assert (run["status"], run["thread_id"]) == ("queued", "later")
    queued = await _tool(host, "get_run", {"run_id": run["run_id"]})
    assert queued["structuredContent"]["status"] == "queued"
    # The same run through the HTTP API: one record, one queue.
    assert (await (await host.request("GET", f"/api/runs/{run['run_id']}")).json())["status"] == "queued"

    await QueueRunner(host).run_until_idle()
    done = await _tool(host, "get_run", {"run_id": run["run_id"], "wait_seconds": 5})
    assert done["isError"] is False
    status = done["structuredContent"]
    assert status["status"] == "succeeded"
    assert done["content"][0]["text"].startswith('turn 2: you said "in the background"')
    thread = await _tool(host, "get_thread", {"thread_id": "later"})
    assert thread["structuredContent"]["checkpoint_id"] == status["result"]["checkpoint_id"]

    for arguments, code in (
        ({"run_id": "no-such-run"}, "run_not_found"),
        ({"run_id": run["run_id"], "wait_seconds": 61}, "invalid_request"),
        ({"run_id": run["run_id"], "wait_seconds": "5"}, "invalid_request"),
    ):
        refused = await _tool(host, "get_run", arguments)
        assert refused["isError"] is True and refused["structuredContent"]["error"]["code"] == code


async def test_a_failing_workflow_and_a_bug_are_tool_errors_that_leak_nothing(
    recording: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = await _tool(recording, "run_turn", {"thread_id": "failing", "message": "please fail"})
    assert failed["isError"] is True
    assert (failed["structuredContent"]["error"]["code"], failed["structuredContent"]["status"]) == (
        "workflow_failed",
        500,
    )
    assert "/home/app/x.py" not in json.dumps(failed)  # the workflow's exception stays in the log

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr("functions_adapter.turn_call.build_turn", broken)
    bug = await _tool(recording, "run_turn", {"thread_id": "failing", "message": "again"})
    assert bug["isError"] is True and bug["structuredContent"]["error"]["code"] == "internal_error"
    assert "secret" not in json.dumps(bug)
