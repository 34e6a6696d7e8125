"""The OpenAI Responses-compatible routes, driven by the unmodified ``openai`` SDK through
``scripts/serve.sh`` (one server for the module), with the default workflow.

The chat-agents workflow against a model that can be held mid-reply (live deltas, a
disconnect while the run goes on, a cancel while it runs) is in ``test_responses_live``.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai import OpenAI

from devtools.function_host import FunctionHost
from functions_adapter.signatures import sign
from tests.serving import ROOT, Serving, serving

ORDER = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]
TERMINAL = {"response.completed", "response.failed", "response.incomplete"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with serving(tmp_path_factory.mktemp("responses")) as server:
        yield server


@pytest.fixture(scope="module")
def client(served: Serving) -> OpenAI:
    return OpenAI(base_url=served.base, api_key="local", default_headers={"x-functions-key": "local"}, max_retries=0)


def dumped(events: Any) -> list[dict[str, Any]]:
    return [event.model_dump(mode="json") for event in events]


def check_sequence(events: list[dict[str, Any]], first: int = 0) -> None:
    """Numbered first, first + 1, ... and exactly one terminal event, the last."""
    assert [e["sequence_number"] for e in events] == list(range(first, first + len(events)))
    assert [e["type"] in TERMINAL for e in events].count(True) == 1
    assert events[-1]["type"] in TERMINAL


def finished(client: OpenAI, response_id: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while (response := client.responses.retrieve(response_id)).status in ("queued", "in_progress"):
        assert time.monotonic() < deadline, response.status
        time.sleep(0.1)
    return response


def test_create_then_retrieve_the_same_response(client: OpenAI) -> None:
    created = client.responses.create(model="default", input="hello", metadata={"ticket": "42"})
    assert created.id.startswith("resp_") and created.object == "response"
    assert created.status == "completed" and created.model == "default" and created.background is False
    assert created.output_text == 'turn 1: you said "hello". Earlier you said: nothing yet'
    assert created.metadata == {"ticket": "42"} and created.error is None
    assert created.usage is not None and created.usage.total_tokens == 0
    assert created.tools == [] and created.tool_choice == "auto"
    assert client.responses.retrieve(created.id) == created


def test_previous_response_id_continues_and_forks(client: OpenAI) -> None:
    first = client.responses.create(input="hello")
    second = client.responses.create(input="again", previous_response_id=first.id)
    assert second.previous_response_id == first.id
    assert second.output_text == 'turn 2: you said "again". Earlier you said: "hello"'
    # A fork: the first response's checkpoint again, not the second's.
    other = client.responses.create(input=[{"role": "user", "content": "instead"}], previous_response_id=first.id)
    assert other.output_text == 'turn 2: you said "instead". Earlier you said: "hello"'
    typed = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "third"}]}]
    third = client.responses.create(input=typed, previous_response_id=second.id)
    assert third.output_text.startswith('turn 3: you said "third". Earlier you said: "hello", "again"')


def test_a_stream_comes_in_the_responses_order_and_replays_with_the_same_numbers(client: OpenAI) -> None:
    events = dumped(client.responses.create(input="stream me", stream=True))
    assert [e["type"] for e in events] == ORDER
    check_sequence(events)
    assert events[0]["response"]["status"] == "in_progress" and events[0]["response"]["output"] == []
    item_id = events[2]["item"]["id"]
    assert all(e["item_id"] == item_id for e in events[3:7])
    assert events[4]["delta"] == events[5]["text"] == 'turn 1: you said "stream me". Earlier you said: nothing yet'
    final = events[-1]["response"]
    assert final["status"] == "completed" and final["output"][0]["id"] == item_id
    assert client.responses.retrieve(final["id"]).model_dump(mode="json") == final
    # A stored synchronous response replays as the same events, with the same numbers.
    assert dumped(client.responses.retrieve(final["id"], stream=True)) == events


def test_background_then_retrieve(client: OpenAI) -> None:
    queued = client.responses.create(input="later", background=True)
    assert queued.status == "queued" and queued.background is True and queued.output == []
    done = finished(client, queued.id)
    assert done.status == "completed" and done.completed_at is not None
    assert done.output_text == 'turn 1: you said "later". Earlier you said: nothing yet'
    assert client.responses.create(input="and then", previous_response_id=done.id).output_text.startswith("turn 2")


def test_background_stream_replays_identically_from_any_point(client: OpenAI) -> None:
    live = dumped(client.responses.create(input="watch this", background=True, stream=True))
    assert [e["type"] for e in live] == ORDER
    check_sequence(live)
    assert live[0]["response"]["status"] == "queued" and live[1]["response"]["status"] == "in_progress"
    response_id = live[0]["response"]["id"]
    assert dumped(client.responses.retrieve(response_id, stream=True)) == live
    for after in (0, 3, len(live) - 2):
        assert dumped(client.responses.retrieve(response_id, stream=True, starting_after=after)) == live[after + 1 :]


def test_a_dropped_stream_resumes_after_its_last_sequence_number(client: OpenAI) -> None:
    stream = client.responses.create(input="resume me", background=True, stream=True)
    seen = [next(stream).model_dump(mode="json") for _ in range(2)]
    stream.close()  # the client goes away; the background run does not
    response_id, last = seen[0]["response"]["id"], seen[-1]["sequence_number"]
    rest = dumped(client.responses.retrieve(response_id, stream=True, starting_after=last))
    check_sequence(seen + rest)
    assert [e["type"] for e in seen + rest] == ORDER
    assert rest[-1]["response"]["output"][0]["content"][0]["text"].startswith('turn 1: you said "resume me"')


def thread(served: Serving, thread_id: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{served.base}/threads/{thread_id}") as reply:
        return json.loads(reply.read())


def test_a_conversation_is_a_thread(client: OpenAI, served: Serving) -> None:
    conversation = f"conv-{uuid.uuid4().hex[:8]}"
    first = client.responses.create(input="one", conversation=conversation)
    second = client.responses.create(input="two", conversation={"id": conversation})
    assert first.conversation is not None and first.conversation.id == conversation
    assert second.output_text == 'turn 2: you said "two". Earlier you said: "one"'
    queued = client.responses.create(input="three", conversation=conversation, background=True)
    assert finished(client, queued.id).output_text.startswith("turn 3")
    assert thread(served, conversation)["turns"] == 3  # the head moved, once per turn
    with pytest.raises(openai.BadRequestError) as both:
        client.responses.create(input="x", conversation=conversation, previous_response_id=first.id)
    assert both.value.body["param"] == "conversation"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError):
        client.responses.create(input="x", conversation="../etc")


def test_unknown_ids_are_not_found(client: OpenAI) -> None:
    unknown = "resp_" + "0" * 32
    for call in (
        lambda: client.responses.retrieve(unknown),
        lambda: client.responses.retrieve("nope"),
        lambda: client.responses.create(input="x", previous_response_id=unknown),
        lambda: client.responses.cancel(unknown),
        lambda: client.responses.delete(unknown),
        lambda: client.responses.input_items.list(unknown),
    ):
        with pytest.raises(openai.NotFoundError) as missing:
            call()
        body = missing.value.body
        assert body["type"] == "invalid_request_error" and body["code"] == "response_not_found"  # type: ignore[index]
    # A run that is not a response is not one either.
    run = json.loads(urllib.request.urlopen(_post(client, "/runs", {"messages": "hi", "background": True})).read())
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_" + run["run_id"])


def _post(client: OpenAI, path: str, body: dict[str, Any]) -> urllib.request.Request:
    data = json.dumps(body).encode()
    return urllib.request.Request(f"{client.base_url}".rstrip("/") + path, data, {"Content-Type": "application/json"})


def test_a_pending_request_is_a_function_call_answered_by_its_output(client: OpenAI) -> None:
    asked = client.responses.create(input="I need approval")
    assert asked.status == "completed" and asked.output_text == ""
    (call,) = asked.output
    assert call.type == "function_call" and call.name == "request_info"
    assert json.loads(call.arguments) == {
        "data": {"turn": 1, "text": "I need approval", "earlier": []},
        "response_type": "str",
    }
    with pytest.raises(openai.ConflictError) as pending:
        client.responses.create(input="something else", previous_response_id=asked.id)
    assert pending.value.body["code"] == "pending_requests"  # type: ignore[index]
    assert pending.value.response.headers["x-should-retry"] == "false"
    answer = [{"type": "function_call_output", "call_id": call.call_id, "output": "granted"}]
    answered = client.responses.create(input=answer, previous_response_id=asked.id)
    assert answered.output_text.startswith('turn 1: you said "I need approval". Approval answer: "granted".')
    (item,) = client.responses.input_items.list(answered.id)
    assert item.type == "function_call_output" and item.call_id == call.call_id and item.output == "granted"
    with pytest.raises(openai.BadRequestError):  # nothing to answer without a response
        client.responses.create(input=answer)


def test_errors_are_in_openais_shape(client: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as unknown:
        client.responses.create(input="x", temperature=0.2)
    assert unknown.value.body == {  # type: ignore[comparison-overlap]
        "message": unknown.value.body["message"],  # type: ignore[index]
        "type": "invalid_request_error",
        "code": "unknown_parameter",
        "param": "temperature",
    }
    with pytest.raises(openai.BadRequestError) as model:
        client.responses.create(input="x", model="gpt-4o")
    assert model.value.body["code"] == "model_not_found" and model.value.body["param"] == "model"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as role:
        client.responses.create(input=[{"role": "assistant", "content": "I said"}])
    assert role.value.body["param"] == "input[0].role"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError):
        client.responses.create(input="x", background=True, store=False)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(input="x", instructions="be brief")


def test_delete_and_store_false(client: OpenAI) -> None:
    kept = client.responses.create(input="keep me")
    client.responses.delete(kept.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(kept.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(input="x", previous_response_id=kept.id)
    unstored = client.responses.create(input="forget me", store=False)
    assert unstored.status == "completed" and unstored.output_text.startswith("turn 1")
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


def test_an_idempotency_key_replays_the_same_response(client: OpenAI, served: Serving) -> None:
    conversation = f"idem-{uuid.uuid4().hex[:8]}"
    key = {"Idempotency-Key": uuid.uuid4().hex}
    first = client.responses.create(input="once", conversation=conversation, extra_headers=key)
    again = client.responses.create(input="once", conversation=conversation, extra_headers=key)
    assert again == first and thread(served, conversation)["turns"] == 1  # replayed, not run twice
    with pytest.raises(openai.UnprocessableEntityError):  # the same key, another request
        client.responses.create(input="twice", conversation=conversation, extra_headers=key)
    stream_key = {"Idempotency-Key": uuid.uuid4().hex}
    live = dumped(client.responses.create(input="s", conversation=conversation, stream=True, extra_headers=stream_key))
    replayed = dumped(
        client.responses.create(input="s", conversation=conversation, stream=True, extra_headers=stream_key)
    )
    assert replayed == live and thread(served, conversation)["turns"] == 2
    background_key = {"Idempotency-Key": uuid.uuid4().hex}
    queued = client.responses.create(input="bg", background=True, extra_headers=background_key)
    assert client.responses.create(input="bg", background=True, extra_headers=background_key) == queued


def test_cancel_needs_a_background_response_that_has_not_finished(client: OpenAI) -> None:
    now = client.responses.create(input="sync")
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(now.id)
    done = finished(client, client.responses.create(input="quick", background=True).id)
    with pytest.raises(openai.ConflictError) as finished_already:
        client.responses.cancel(done.id)
    assert finished_already.value.body["code"] == "run_finished"  # type: ignore[index]


def test_input_items_list_newest_first_by_default(client: OpenAI) -> None:
    typed = [
        {"role": "system", "content": "be terse"},
        {"role": "developer", "content": "ok"},
        {"role": "user", "content": "hi"},
    ]
    created = client.responses.create(input=typed)
    items = list(client.responses.input_items.list(created.id))
    assert [(i.role, i.content[0].text) for i in items] == [("user", "hi"), ("system", "ok"), ("system", "be terse")]
    ascending = client.responses.input_items.list(created.id, order="asc", limit=2)
    assert [i.content[0].text for i in ascending.data] == ["be terse", "ok"] and ascending.has_more
    rest = client.responses.input_items.list(created.id, order="asc", after=ascending.data[-1].id)
    assert [i.content[0].text for i in rest.data] == ["hi"] and not rest.has_more


# -- in-process: a signed deployment (WEBHOOK_SECRET) ---------------------------------------------

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def signed(body: bytes, message_id: str) -> dict[str, str]:
    now = int(time.time())
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(now),
        "webhook-signature": sign(SECRET, message_id, now, body),
    }


async def test_signatures_and_webhook_ids_work_as_on_the_runs_routes(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
    body = json.dumps({"input": "signed"}).encode()
    unsigned = await host.request("POST", "/api/responses", body=body, headers={"content-type": "application/json"})
    assert unsigned.status == 401
    error = (await unsigned.json())["error"]
    assert error["type"] == "authentication_error" and error["code"] == "invalid_signature"
    first = await host.request("POST", "/api/responses", body=body, headers=signed(body, "msg_1"))
    assert first.status == 200
    # The same delivery again (a sender's retry): the first response, not a second run.
    again = await host.request("POST", "/api/responses", body=body, headers=signed(body, "msg_1"))
    assert await again.body() == await first.body()


def test_the_readme_example_runs_as_written(
    client: OpenAI, served: Serving, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### OpenAI Responses API", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(code.strip().splitlines()) <= 10
    exec(code.replace("http://127.0.0.1:7071/api", served.base), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == 'turn 2: you said "What is my name?". Earlier you said: "My name is Ada."'
    assert printed[1] == "0 response.created" and printed[-2] == "8 response.completed"
    assert printed[-1] in ("queued", "in_progress", "completed")
