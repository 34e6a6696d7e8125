"""A2A (v1.0 JSON-RPC, as the a2a-sdk 1.3 client speaks it) through the registered functions,
against real Azurite: the agent card, SendMessage on a context (a thread), GetTask, CancelTask,
the stream, idempotent retries by messageId, another origin's task, and hostile input."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner

WORKFLOW = "default"
ENDPOINT = f"/api/a2a/{WORKFLOW}"


@pytest.fixture
async def runner(host: FunctionHost, queue_env: str) -> Any:
    async with QueueRunner(host) as running:
        yield running


def _message(text: str, **fields: Any) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}], **fields}


async def _rpc(host: FunctionHost, method: str, params: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": "1", "method": method, "params": params}
    response = await host.request("POST", ENDPOINT, json_body=body, headers=headers)
    assert response.status == 200, await response.body()
    return await response.json()


async def test_the_card_names_the_endpoint_and_the_function_key(host: FunctionHost) -> None:
    response = await host.request("GET", f"{ENDPOINT}/.well-known/agent-card.json")
    assert response.status == 200
    card = await response.json()
    assert card["name"] == WORKFLOW
    assert card["supportedInterfaces"][0]["url"].endswith(ENDPOINT)
    assert card["supportedInterfaces"][0]["protocolBinding"] == "JSONRPC"
    assert card["capabilities"]["streaming"] is True
    assert card["securitySchemes"]["functionKey"]["apiKeySecurityScheme"]["name"] == "x-functions-key"
    missing = await host.request("GET", "/api/a2a/no-such-workflow/.well-known/agent-card.json")
    assert missing.status == 404


async def test_two_messages_on_one_context_are_two_turns_of_one_thread(host: FunctionHost, runner: Any) -> None:
    first = (await _rpc(host, "SendMessage", {"message": _message("hello")}))["result"]["task"]
    assert first["status"]["state"] == "TASK_STATE_COMPLETED", first
    assert first["artifacts"][0]["parts"][0]["text"]
    context = first["contextId"]
    second = (await _rpc(host, "SendMessage", {"message": _message("again", contextId=context)}))["result"]["task"]
    assert second["contextId"] == context and second["id"] != first["id"]
    assert second["status"]["state"] == "TASK_STATE_COMPLETED"
    thread = await (await host.request("GET", f"/api/threads/{context}")).json()
    assert thread["turns"] == 2
    got = (await _rpc(host, "GetTask", {"id": second["id"]}))["result"]
    assert got["id"] == second["id"] and got["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_retried_message_answers_the_first_task_and_runs_once(host: FunctionHost, runner: Any) -> None:
    message = _message("only once")
    first = (await _rpc(host, "SendMessage", {"message": message}))["result"]["task"]
    again = (await _rpc(host, "SendMessage", {"message": message}))["result"]["task"]
    assert again["id"] == first["id"]
    thread = await (await host.request("GET", f"/api/threads/{first['contextId']}")).json()
    assert thread["turns"] == 1


async def test_a_non_blocking_send_is_polled_then_cancel_of_a_finished_task_is_refused(
    host: FunctionHost, runner: Any
) -> None:
    params = {"message": _message("later"), "configuration": {"returnImmediately": True}}
    task = (await _rpc(host, "SendMessage", params))["result"]["task"]
    assert task["status"]["state"] in {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"}
    for _ in range(30):
        task = (await _rpc(host, "GetTask", {"id": task["id"]}))["result"]
        if task["status"]["state"] == "TASK_STATE_COMPLETED":
            break
        await asyncio.sleep(0.2)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    refused = await _rpc(host, "CancelTask", {"id": task["id"]})
    assert refused["error"]["code"] == -32002


async def test_the_stream_ends_with_the_reply_and_a_final_status(host: FunctionHost, runner: Any) -> None:
    body = {"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage", "params": {"message": _message("stream")}}
    response = await host.request("POST", ENDPOINT, json_body=body)
    assert response.status == 200
    text = (await response.body()).decode()
    events = [json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")]
    assert all(e["id"] == 7 for e in events)
    assert "task" in events[0]["result"]
    assert events[-2]["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_another_origins_task_is_refused_as_on_the_runs_route(
    host: FunctionHost, runner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    params = {"message": _message("mine")}
    task = (await _rpc(host, "SendMessage", params, headers={"x-caller": "alice"}))["result"]["task"]
    other = {"x-caller": "bob"}
    answer = await _rpc(host, "GetTask", {"id": task["id"]}, headers=other)
    assert answer["error"]["code"] == -32602, answer  # the same refusal as GET /api/runs/{id}: 403
    assert answer["error"]["data"]["error"]["code"] == "forbidden"
    assert answer["error"]["data"]["status"] == 403


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "method": "CancelTask"}', -32700),  # duplicate keys
        (b"[" * 100_000, -32700),
        (b"[]", -32600),
        (b'{"jsonrpc": "2.0", "id": 1}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod"}', -32601),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"parts": []}}}', -32602),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "0000000000004000800000000000000a"}}',
            -32001,
        ),
    ],
)
async def test_hostile_input_gets_json_rpc_errors(host: FunctionHost, queue_env: str, body: bytes, code: int) -> None:
    response = await host.request("POST", ENDPOINT, body=body, headers={"Content-Type": "application/json"})
    assert response.status == 200
    assert (await response.json())["error"]["code"] == code


async def test_an_approval_is_input_required_and_the_answer_on_the_task_finishes_it(
    host: FunctionHost, runner: Any
) -> None:
    asked = (await _rpc(host, "SendMessage", {"message": _message("needs approval please")}))["result"]["task"]
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
    (pending,) = asked["status"]["message"]["parts"][1]["data"]["pending_requests"]
    wrong = {**_message("x", taskId=asked["id"]), "parts": [{"data": {"responses": {"no-such-request": "yes"}}}]}
    refused = (await _rpc(host, "SendMessage", {"message": wrong}))["error"]  # refused before it runs
    assert refused["code"] == -32602
    assert refused["data"]["error"]["details"]["unknown_request_ids"] == ["no-such-request"]
    answer = {**_message("x", taskId=asked["id"]), "parts": [{"data": {"responses": {pending["request_id"]: "yes"}}}]}
    done = (await _rpc(host, "SendMessage", {"message": answer}))["result"]["task"]
    assert done["contextId"] == asked["contextId"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert 'Approval answer: "yes"' in done["artifacts"][0]["parts"][0]["text"]


async def test_a_queued_task_is_cancelled_and_never_runs(host: FunctionHost, queue_env: str) -> None:
    params = {"message": _message("never"), "configuration": {"returnImmediately": True}}
    task = (await _rpc(host, "SendMessage", params))["result"]["task"]  # no queue runner: it stays queued
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    cancelled = (await _rpc(host, "CancelTask", {"id": task["id"]}))["result"]
    assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
    thread = await host.request("GET", f"/api/threads/{task['contextId']}")
    assert thread.status == 404  # the turn never ran, so the thread was never made


async def test_subscribing_to_a_finished_task_replays_it_and_ends(host: FunctionHost, runner: Any) -> None:
    task = (await _rpc(host, "SendMessage", {"message": _message("done")}))["result"]["task"]
    body = {"jsonrpc": "2.0", "id": 3, "method": "SubscribeToTask", "params": {"id": task["id"]}}
    text = (await (await host.request("POST", ENDPOINT, json_body=body)).body()).decode()
    (only,) = [json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")]
    assert only["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert only["result"]["task"]["artifacts"] == task["artifacts"]


async def test_any_message_id_starts_a_thread_of_the_callers_own(
    host: FunctionHost, runner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    message = _message("hello", messageId="not a valid thread ID / at all")
    alice = (await _rpc(host, "SendMessage", {"message": message}, headers={"x-caller": "alice"}))["result"]["task"]
    bob = (await _rpc(host, "SendMessage", {"message": message}, headers={"x-caller": "bob"}))["result"]["task"]
    assert alice["status"]["state"] == bob["status"]["state"] == "TASK_STATE_COMPLETED"
    assert alice["contextId"] != bob["contextId"] and alice["id"] != bob["id"]
