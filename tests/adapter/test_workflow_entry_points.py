"""Every entry point picks the workflow the same way (issue 31): the Responses ``model``,
the MCP ``workflow`` argument and AG-UI's ``forwardedProps.workflow`` start a new thread on
the workflow they name, an existing thread keeps its own, and an unknown name is refused
before anything runs. They share the one turn factory (``functions_adapter/turns.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import workflows
from devtools.function_host import FunctionHost
from functions_adapter import wiring
from tests.adapter.test_ag_ui import agui, agui_body, replies, types, user


@pytest.fixture
def two(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> Iterator[FunctionHost]:
    """The app hosting ``default`` (v1, v2 pinned) and ``notes``."""
    monkeypatch.setitem(workflows.REGISTRY, "notes", "tests.versioned_workflow:NOTES")
    monkeypatch.setitem(
        workflows.REGISTRY,
        "default",
        workflows.Versions({"v1": "workflows.default_conversation:SPEC", "v2": "tests.versioned_workflow:SPEC_V2"}),
    )
    wiring.workflow_spec.cache_clear()
    yield host
    wiring.workflow_spec.cache_clear()


async def respond(host: FunctionHost, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = await host.request("POST", "/api/responses", json_body=body)
    return response.status, await response.json()


def text_of(response: dict[str, Any]) -> str:
    return response["output"][0]["content"][0]["text"]


async def test_the_responses_model_names_the_workflow(two: FunctionHost) -> None:
    status, notes = await respond(two, {"model": "notes", "input": "milk", "conversation": "c-notes"})
    assert status == 200, notes
    assert text_of(notes) == "notes: ['milk']" and notes["model"] == "notes"
    status, pinned = await respond(two, {"model": "default@v1", "input": "hello"})
    assert status == 200 and text_of(pinned).startswith("turn 1")
    status, newest = await respond(two, {"input": "hello"})
    assert status == 200 and text_of(newest).startswith("[v2] turn 1") and newest["model"] == "default"
    status, more = await respond(two, {"model": "notes", "input": "eggs", "conversation": "c-notes"})
    assert status == 200 and text_of(more) == "notes: ['milk', 'eggs']"
    status, other = await respond(two, {"model": "default", "input": "x", "conversation": "c-notes"})
    assert status == 409 and other["error"]["code"] == "workflow_mismatch"
    status, unknown = await respond(two, {"model": "gpt-4o", "input": "x"})
    assert status == 400 and unknown["error"]["code"] == "model_not_found"


async def _tool(host: FunctionHost, tool: str, arguments: Any) -> Any:
    (trigger,) = [t for t in host.triggers.values() if t.binding.get("toolName") == tool]
    context = {"name": tool, "arguments": arguments, "transport": {"name": "http", "properties": {"headers": {}}}}
    envelope = json.loads(await trigger.handler(context=json.dumps(context)))
    return json.loads(envelope["content"])


async def test_mcp_names_the_workflow_with_its_argument(two: FunctionHost) -> None:
    result = await _tool(two, "run_turn", {"thread_id": "m", "message": "milk", "workflow": "notes"})
    assert result["content"][0]["text"] == "notes: ['milk']", result
    result = await _tool(two, "run_turn", {"thread_id": "m", "message": "eggs"})  # the thread keeps its own
    assert result["content"][0]["text"] == "notes: ['milk', 'eggs']"
    result = await _tool(two, "run_turn", {"thread_id": "m2", "message": "x", "workflow": "nope"})
    error = result["structuredContent"]["error"]
    assert result["isError"] and error["code"] == "workflow_not_found"
    assert error["details"]["workflows"] == sorted(workflows.REGISTRY)


async def test_ag_ui_names_the_workflow_in_forwarded_props(two: FunctionHost) -> None:
    status, events = await agui(two, agui_body("g", [user("milk")], forwardedProps={"workflow": "notes"}))
    assert status == 200 and list(replies(events).values()) == ["notes: ['milk']"]
    _, events = await agui(two, agui_body("g2", [user("x")], forwardedProps={"workflow": "nope"}))
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"] and events[-1]["code"] == "workflow_not_found"
