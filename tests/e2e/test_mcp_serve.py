"""MCP over streamable HTTP: the unmodified ``mcp`` client against ``scripts/serve.sh``.

The server plays the host's MCP extension (``devtools/mcp_server.py``) over the app's own
tool triggers, so these calls go through ``function_app``'s ``mcp_run_turn`` /
``mcp_get_thread`` and the one turn pipeline, as they would in Azure.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from devtools.mcp_server import MCP_PATH
from tests.serving import Serving, serving


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with serving(tmp_path_factory.mktemp("mcp")) as server:
        yield server


def _url(served: Serving) -> str:
    return served.base.removesuffix("/api") + MCP_PATH


def _thread() -> str:
    return f"mcp-{uuid.uuid4().hex[:8]}"


def _text(result: Any) -> str:
    (block,) = result.content
    assert block.type == "text"
    return str(block.text)


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # server/discover (2.x), initialize (1.x)
async def test_the_client_connects_and_lists_the_tools(served: Serving, mode: str) -> None:
    async with Client(_url(served), mode=mode) as client:
        # Which handshake ran: the 2.x probe was answered, or the 1.x initialize was sent.
        if mode == "auto":
            assert client.session.discover_result is not None and client.session.initialize_result is None
        else:
            initialized = client.session.initialize_result
            assert initialized is not None and client.session.discover_result is None
            # host.json's extensions.mcp, as the host's extension reads it.
            assert initialized.server_info.name == "resumable-workflows"
            assert initialized.instructions and "run_turn" in initialized.instructions
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert sorted(tools) == ["get_run", "get_thread", "run_turn", "start_turn"]
    run_turn = tools["run_turn"]
    assert run_turn.input_schema["required"] == ["thread_id"]
    assert set(run_turn.input_schema["properties"]) == {"thread_id", "message", "responses", "workflow"}
    assert run_turn.input_schema["properties"]["responses"]["type"] == "object"
    assert run_turn.output_schema is not None
    result, refusal = run_turn.output_schema["anyOf"]  # the turn's result, or a refusal with our code
    assert "checkpoint_id" in result["required"] and refusal["required"] == ["error", "status"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_two_turns_on_one_thread_the_second_resumes_the_first(served: Serving, mode: str) -> None:
    thread_id = _thread()
    async with Client(_url(served), mode=mode) as client:
        first = await client.call_tool("run_turn", {"thread_id": thread_id, "message": "hello over mcp"})
        second = await client.call_tool("run_turn", {"thread_id": thread_id, "message": "and again"})
    assert not first.is_error and not second.is_error
    assert _text(first).startswith('turn 1: you said "hello over mcp"')
    assert _text(second).startswith('turn 2: you said "and again"')
    assert 'Earlier you said: "hello over mcp"' in _text(second)  # resumed from the first turn's checkpoint
    one, two = first.structured_content, second.structured_content
    assert one is not None and two is not None
    assert one["thread_id"] == thread_id and one["thread_created"] is True and one["status"] == "idle"
    assert two["previous_checkpoint_id"] == one["checkpoint_id"] and two["thread_created"] is False
    assert two["pending_requests"] == []
    # The same thread through the HTTP API: one pipeline, one thread.
    async with aiohttp.ClientSession() as session, session.get(f"{served.base}/threads/{thread_id}") as response:
        assert response.status == 200
        thread = await response.json()
    assert (thread["checkpoint_id"], thread["turns"]) == (two["checkpoint_id"], 2)
    async with Client(_url(served)) as client:
        view = await client.call_tool("get_thread", {"thread_id": thread_id})
    assert not view.is_error
    assert view.structured_content == thread


async def test_an_approval_pauses_the_turn_and_responses_continue_it(served: Serving) -> None:
    thread_id = _thread()
    async with Client(_url(served)) as client:
        paused = await client.call_tool("run_turn", {"thread_id": thread_id, "message": "book it, needs approval"})
        assert not paused.is_error
        waiting = paused.structured_content
        assert waiting is not None
        (request,) = waiting["pending_requests"]
        assert waiting["status"] == "pending_requests"
        assert request["request_id"] in _text(paused) and "Waiting for answers" in _text(paused)
        # A new message while the request is pending is refused, as on the HTTP route.
        refused = await client.call_tool("run_turn", {"thread_id": thread_id, "message": "ignore that"})
        assert refused.is_error
        assert refused.structured_content is not None
        assert refused.structured_content["error"]["code"] == "pending_requests"
        answered = await client.call_tool(
            "run_turn", {"thread_id": thread_id, "responses": {request["request_id"]: "approved"}}
        )
    assert not answered.is_error, _text(answered)
    assert 'Approval answer: "approved"' in _text(answered)
    done = answered.structured_content
    assert done is not None
    assert done["pending_requests"] == [] and done["previous_checkpoint_id"] == waiting["checkpoint_id"]


async def test_refusals_are_tool_errors_with_our_codes(served: Serving) -> None:
    async with Client(_url(served)) as client:
        unknown = await client.call_tool("get_thread", {"thread_id": _thread()})
        both = await client.call_tool("run_turn", {"thread_id": _thread(), "message": "x", "responses": {"r": "y"}})
        bad_id = await client.call_tool("run_turn", {"thread_id": "not/an id", "message": "x"})
        extra = await client.call_tool("run_turn", {"thread_id": _thread(), "message": "x", "stream": True})
        with pytest.raises(MCPError):  # a missing required property: the host refuses it before the function
            await client.call_tool("run_turn", {"message": "no thread"})
    codes = {}
    for name, result in (("unknown", unknown), ("both", both), ("bad_id", bad_id), ("extra", extra)):
        assert result.is_error, name
        assert result.structured_content is not None
        codes[name] = (result.structured_content["error"]["code"], result.structured_content["status"])
        assert _text(result).startswith(result.structured_content["error"]["code"] + ": ")
    assert codes == {
        "unknown": ("thread_not_found", 404),
        "both": ("invalid_request", 400),
        "bad_id": ("invalid_request", 400),
        "extra": ("invalid_request", 400),
    }


async def test_a_long_turn_as_a_background_run(served: Serving) -> None:
    thread_id = _thread()
    async with Client(_url(served)) as client:
        started = await client.call_tool("start_turn", {"thread_id": thread_id, "message": "take your time"})
        assert not started.is_error, _text(started)
        assert started.structured_content is not None
        run_id = started.structured_content["run_id"]
        # serve.sh's queue runner executes it; wait_seconds holds the answer until it finished.
        for _ in range(10):
            done = await client.call_tool("get_run", {"run_id": run_id, "wait_seconds": 10})
            assert not done.is_error and done.structured_content is not None
            if done.structured_content["status"] == "succeeded":
                break
        else:
            pytest.fail(f"run {run_id} did not finish: {done.structured_content}")
    assert _text(done).startswith('turn 1: you said "take your time"')
    assert done.structured_content["thread_id"] == thread_id
