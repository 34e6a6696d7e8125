"""The Responses routes with a model that streams, and can be held mid-reply: WORKFLOW=chat-agents
against the fake OpenAI endpoint, through ``scripts/serve.sh``, with the unmodified ``openai`` SDK.

Holding the reviewer's reply after its first token keeps a background run running for as
long as a test needs: a client drops its stream and resumes it live, or cancels the run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import openai
import pytest
from openai import OpenAI

from tests.adapter.test_responses_api import TERMINAL, check_sequence, dumped
from tests.model_thread import ModelThread, model_fixture, settings_with_model  # noqa: F401 - the fixture
from tests.serving import Serving, serving


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, model: ModelThread) -> Iterator[Serving]:
    tmp = tmp_path_factory.mktemp("responses-live")
    with serving(tmp, settings=settings_with_model(tmp, model, WORKFLOW="chat-agents")) as server:
        yield server


@pytest.fixture(scope="module")
def client(served: Serving) -> OpenAI:
    return OpenAI(base_url=served.base, api_key="local", default_headers={"x-functions-key": "local"}, max_retries=0)


def test_a_model_reply_streams_as_text_deltas(client: OpenAI) -> None:
    events = dumped(client.responses.create(model="chat-agents", input="Hi there", stream=True))
    check_sequence(events)
    types = [e["type"] for e in events]
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert len(deltas) > 3  # token by token, not one block
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * len(deltas),
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = events[-1]["response"]
    assert "".join(deltas) == final["output"][0]["content"][0]["text"] == "reviewer: reply; user said: Hi there"
    assert final["output"][0]["id"] == events[2]["item"]["id"]


def test_a_background_stream_dropped_mid_reply_resumes_live(client: OpenAI, model: ModelThread) -> None:
    model.hold()
    try:
        stream = client.responses.create(input="Tell me more", background=True, stream=True)
        seen = []
        for event in stream:
            seen.append(event.model_dump(mode="json"))
            if event.type == "response.output_text.delta":
                break
        stream.close()  # mid-reply: the model is held after its first token
        response_id, last = seen[0]["response"]["id"], seen[-1]["sequence_number"]
        assert client.responses.retrieve(response_id).status == "in_progress"
        resumed = client.responses.retrieve(response_id, stream=True, starting_after=last)
        model.release()
        rest = dumped(resumed)
    finally:
        model.release()
    check_sequence(seen + rest)
    assert rest[0]["sequence_number"] == last + 1 and rest[-1]["type"] == "response.completed"
    text = "".join(e["delta"] for e in seen + rest if e["type"] == "response.output_text.delta")
    assert text == "reviewer: reply; user said: Tell me more" == client.responses.retrieve(response_id).output_text
    # Once finished, the whole stream replays with the numbers the live one had.
    assert dumped(client.responses.retrieve(response_id, stream=True)) == seen + rest


def test_cancel_a_running_background_response(client: OpenAI, model: ModelThread) -> None:
    model.hold()
    try:
        queued = client.responses.create(input="Take your time", background=True)
        deadline = time.monotonic() + 30
        while client.responses.retrieve(queued.id).status != "in_progress":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        with pytest.raises(openai.ConflictError) as running:  # a running response is not deleted
            client.responses.delete(queued.id)
        assert running.value.body["code"] == "response_in_progress"  # type: ignore[index]
        cancelled = client.responses.cancel(queued.id)
        again = client.responses.cancel(queued.id)  # idempotent
    finally:
        model.release()
    assert cancelled.status == again.status == "cancelled" == client.responses.retrieve(queued.id).status
    events = dumped(client.responses.retrieve(queued.id, stream=True))
    check_sequence(events)
    assert events[-1]["type"] == "response.failed" and events[-1]["response"]["status"] == "cancelled"
    assert events[-1]["type"] in TERMINAL
    with pytest.raises(openai.BadRequestError) as nothing_saved:
        client.responses.create(input="go on", previous_response_id=queued.id)
    assert nothing_saved.value.body["param"] == "previous_response_id"  # type: ignore[index]
