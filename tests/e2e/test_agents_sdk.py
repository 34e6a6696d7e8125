"""The OpenAI Agents SDK (``openai-agents``, OpenAI's own), unmodified, against ``scripts/serve.sh``.

An ``Agent`` whose model is the app: ``OpenAIResponsesModel`` with an ``AsyncOpenAI`` client
pointed at the app's ``/api`` base, the function key in ``x-functions-key``, and the workflow's
name as the model. The SDK sends ``"include": []`` and ``"tools": []`` on every call; the app
takes them as the no-ops they are. A conversation continues by ``previous_response_id`` or by
``conversation_id`` (a thread), and ``Runner.run_streamed`` streams the reply's deltas.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

from tests.serving import Serving, serving


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with serving(tmp_path_factory.mktemp("agents-sdk")) as server:
        yield server


@pytest.fixture
def client(served: Serving) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=served.base, api_key="local", default_headers={"x-functions-key": "local"})


@pytest.fixture
def agent(client: AsyncOpenAI) -> Agent[Any]:
    # The SDK exports its traces to api.openai.com unless told not to; this machine has no such account.
    set_tracing_disabled(True)
    return Agent(name="workflow", model=OpenAIResponsesModel(model="default", openai_client=client))


def _get(served: Serving, path: str) -> dict[str, Any]:
    request = urllib.request.Request(f"{served.base}{path}", headers={"x-functions-key": "local"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return dict(json.loads(answer.read()))


async def test_runner_run_twice_with_previous_response_id(agent: Agent[Any], served: Serving) -> None:
    first = await Runner.run(agent, "My name is Ada.")
    second = await Runner.run(agent, "What is my name?", previous_response_id=first.last_response_id)
    assert first.final_output.startswith('turn 1: you said "My name is Ada."')
    assert second.final_output.startswith('turn 2: you said "What is my name?"')
    assert 'Earlier you said: "My name is Ada."' in second.final_output  # resumed from the first turn
    stored = _get(served, f"/responses/{second.last_response_id}")
    assert stored["previous_response_id"] == first.last_response_id
    assert stored["output"][0]["content"][0]["text"] == second.final_output


async def test_runner_run_with_a_conversation_id(agent: Agent[Any], client: AsyncOpenAI, served: Serving) -> None:
    conversation = await client.conversations.create(metadata={"from": "agents-sdk"})
    first = await Runner.run(agent, "Remember the number 42.", conversation_id=conversation.id)
    second = await Runner.run(agent, "Which number?", conversation_id=conversation.id)
    assert first.final_output.startswith('turn 1: you said "Remember the number 42."')
    assert 'Earlier you said: "Remember the number 42."' in second.final_output
    # The conversation is a thread, and both turns moved its head.
    thread = _get(served, f"/threads/{conversation.id}")
    assert thread["turns"] == 2


async def test_runner_run_streamed_streams_the_reply(agent: Agent[Any]) -> None:
    first = await Runner.run(agent, "Call me Grace.")
    result = Runner.run_streamed(agent, "Stream my name back.", previous_response_id=first.last_response_id)
    kinds, deltas = [], []
    async for event in result.stream_events():
        if event.type == "raw_response_event":
            kinds.append(event.data.type)
            if event.data.type == "response.output_text.delta":
                deltas.append(event.data.delta)
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert deltas and "".join(deltas) == result.final_output
    assert result.final_output.startswith('turn 2: you said "Stream my name back."')
    assert 'Earlier you said: "Call me Grace."' in result.final_output
    assert result.last_response_id is not None and result.last_response_id != first.last_response_id
