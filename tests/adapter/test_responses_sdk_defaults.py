"""``POST /api/responses`` with the fields OpenAI's SDKs send by default, in-process.

The OpenAI Agents SDK sends ``"include": []`` and ``"tools": []`` on every call, and other
clients send the documented defaults of ``tool_choice``, ``parallel_tool_calls``,
``truncation`` or ``text``: each asks for nothing, so each is accepted. A value that asks for
something the workflow does not do (a tool, a truncation, a JSON format...) is still a 400
``unknown_parameter`` naming the field. The SDK itself drives the app in
``tests/e2e/test_agents_sdk.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from devtools.function_host import FunctionHost

# What openai-agents 0.24's OpenAIResponsesModel sends for an Agent with no tools, no
# instructions and default ModelSettings (agents/models/openai_responses.py).
AGENTS_SDK = {"include": [], "tools": []}
# Every field's default, as OpenAI documents it, and "not set".
DEFAULTS: dict[str, Any] = {
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "truncation": "disabled",
    "text": {"format": {"type": "text"}, "verbosity": "medium"},
    "instructions": None,
    "temperature": None,
    "top_p": None,
    "max_output_tokens": None,
    "reasoning": None,
}
# Values that ask for something the workflow does not do.
REFUSED: list[tuple[str, Any]] = [
    ("include", ["reasoning.encrypted_content"]),
    ("tools", [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]),
    ("tool_choice", "required"),
    ("tool_choice", "none"),
    ("parallel_tool_calls", False),
    ("parallel_tool_calls", 1),
    ("truncation", "auto"),
    ("text", {"format": {"type": "json_object"}}),
    ("text", {"verbosity": "low"}),
    ("text", {"format": {"type": "text"}, "stop": ["x"]}),
    ("instructions", "be brief"),
    ("temperature", 0.2),
    ("max_output_tokens", 10),
    ("seed", None),
]


async def _create(host: FunctionHost, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    answer = await host.request("POST", "/api/responses", json_body={"input": "hello", **body})
    return answer.status, await answer.json()


async def test_the_agents_sdk_defaults_run_the_turn(host: FunctionHost) -> None:
    status, body = await _create(host, {"model": "default", **AGENTS_SDK})
    assert status == 200, body
    assert body["status"] == "completed"
    assert body["output"][0]["content"][0]["text"].startswith('turn 1: you said "hello"')
    assert (body["tools"], body["tool_choice"], body["parallel_tool_calls"]) == ([], "auto", True)


async def test_every_documented_default_at_once_runs_the_turn(host: FunctionHost) -> None:
    status, body = await _create(host, {**AGENTS_SDK, **DEFAULTS, "text": {}})
    assert status == 200, body
    status, body = await _create(host, {**AGENTS_SDK, **DEFAULTS})
    assert status == 200, body
    # Continued with the same defaults, as the SDK's second turn is.
    status, second = await _create(host, {**AGENTS_SDK, **DEFAULTS, "previous_response_id": body["id"]})
    assert status == 200, second
    assert 'Earlier you said: "hello"' in second["output"][0]["content"][0]["text"]


@pytest.mark.parametrize(("name", "value"), REFUSED, ids=[f"{n}={v!r}"[:40] for n, v in REFUSED])
async def test_a_value_that_asks_for_more_is_refused_naming_the_field(
    host: FunctionHost, name: str, value: Any
) -> None:
    status, body = await _create(host, {**AGENTS_SDK, name: value})
    assert status == 400, body
    assert body["error"]["code"] == "unknown_parameter"
    assert body["error"]["param"] == name
    assert name in body["error"]["message"]
