"""A2A (v1.0 JSON-RPC, as the a2a-sdk 1.3 client speaks it) through the registered functions,
against real Azurite: the agent card, SendMessage on a context (a thread), GetTask, CancelTask,
the stream, idempotent retries by messageId, an approval answered on the same task, another
origin's task, a deleted thread's tasks, what a turn costs, and hostile input."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from devtools.queue_runner import QueueRunner
from functions_adapter import wiring
from functions_adapter.signatures import sign

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


async def _thread(host: FunctionHost, thread: str) -> dict[str, Any]:
    return dict(await (await host.request("GET", f"/api/threads/{thread}")).json())


async def _blobs(prefix: str) -> list[str]:
    container = wiring.container_for(wiring.load_settings())
    return [blob.name async for blob in container.list_blobs(name_starts_with=prefix)]


async def test_two_messages_on_one_context_are_two_turns_of_one_thread(host: FunctionHost) -> None:
    first = (await _rpc(host, "SendMessage", {"message": _message("hello")}))["result"]["task"]
    assert first["status"]["state"] == "TASK_STATE_COMPLETED", first
    assert first["artifacts"][0]["parts"][0]["text"].startswith('turn 1: you said "hello"')
    assert re.fullmatch(r"t-[0-9a-f]{32}", first["id"])  # a synchronous task: never a run's ID
    context = first["contextId"]
    second = (await _rpc(host, "SendMessage", {"message": _message("again", contextId=context)}))["result"]["task"]
    assert second["contextId"] == context and second["id"] != first["id"]
    assert second["artifacts"][0]["parts"][0]["text"].startswith('turn 2: you said "again"')
    thread = await _thread(host, context)
    assert thread["turns"] == 2
    assert thread["checkpoint_id"] == f"{second['id']}.1"  # the task's first turn is the thread's head
    assert await _blobs("runs/") == []  # no background run behind either task


async def test_a_blocking_send_then_get_task_reads_back_the_same_task(host: FunctionHost) -> None:
    sent = (await _rpc(host, "SendMessage", {"message": _message("remember me")}))["result"]["task"]
    got = (await _rpc(host, "GetTask", {"id": sent["id"]}))["result"]
    assert got == sent
    assert got["metadata"] == {"turn": 1, "checkpoint_id": f"{sent['id']}.1"}


async def test_a_retried_message_answers_the_first_task_and_runs_once(host: FunctionHost) -> None:
    message = _message("only once")
    first = (await _rpc(host, "SendMessage", {"message": message}))["result"]["task"]
    checkpoints = await _blobs("checkpoints/")
    again = (await _rpc(host, "SendMessage", {"message": message}))["result"]["task"]
    streamed = await _stream(host, "SendStreamingMessage", {"message": message})
    assert again == first
    assert [event["result"] for event in streamed] == [{"task": first}]
    assert (await _thread(host, first["contextId"]))["turns"] == 1
    assert await _blobs("checkpoints/") == checkpoints


async def test_a_message_id_reused_with_another_message_is_refused(host: FunctionHost) -> None:
    message = _message("first text")
    await _rpc(host, "SendMessage", {"message": message})
    reused = await _rpc(host, "SendMessage", {"message": {**message, "parts": [{"text": "other text"}]}})
    assert reused["error"]["code"] == -32602
    assert reused["error"]["data"]["error"]["code"] == "idempotency_key_reused"


async def _stream(host: FunctionHost, method: str, params: Any, headers: dict[str, str] | None = None) -> list[Any]:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    response = await host.request("POST", ENDPOINT, json_body=body, headers=headers)
    assert response.status == 200
    text = (await response.body()).decode()
    return [json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")]


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


async def test_the_stream_is_the_turn_and_ends_with_the_reply_and_a_final_status(host: FunctionHost) -> None:
    events = await _stream(host, "SendStreamingMessage", {"message": _message("stream")})
    assert all(e["id"] == 7 for e in events)
    task = events[0]["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_WORKING" and task["id"].startswith("t-")
    artifact = events[-2]["result"]["artifactUpdate"]
    assert artifact["taskId"] == task["id"] and artifact["artifact"]["parts"][0]["text"].startswith("turn 1:")
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    got = (await _rpc(host, "GetTask", {"id": task["id"]}))["result"]
    assert got["status"]["state"] == "TASK_STATE_COMPLETED"
    assert got["artifacts"] == [artifact["artifact"]]


@pytest.mark.parametrize("background", [False, True], ids=["synchronous task", "background task"])
async def test_another_origins_task_is_refused_as_on_the_runs_route(
    host: FunctionHost, runner: Any, monkeypatch: pytest.MonkeyPatch, background: bool
) -> None:
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    params: dict[str, Any] = {"message": _message("needs approval, mine")}
    if background:
        params["configuration"] = {"returnImmediately": True}
    task = (await _rpc(host, "SendMessage", params, headers={"x-caller": "alice"}))["result"]["task"]
    await _settled(host, task["id"], {"x-caller": "alice"})
    checkpoints = await _blobs("checkpoints/")
    other = {"x-caller": "bob"}
    answer = {**_message("x", taskId=task["id"]), "parts": [{"data": {"responses": {"any": "yes"}}}]}
    for method, sent in (("GetTask", {"id": task["id"]}), ("SendMessage", {"message": answer})):
        refused = await _rpc(host, method, sent, headers=other)
        assert refused["error"]["code"] == -32602, refused  # the same refusal as GET /api/runs/{id}: 403
        assert refused["error"]["data"]["error"]["code"] == "forbidden"
        assert refused["error"]["data"]["status"] == 403
        assert "mine" not in json.dumps(refused)
    assert await _blobs("checkpoints/") == checkpoints  # nothing ran


async def _settled(host: FunctionHost, task_id: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """The task once it stopped working (a background task: after the queue runner ran it)."""
    for _ in range(100):
        task = dict((await _rpc(host, "GetTask", {"id": task_id}, headers=headers))["result"])
        if task["status"]["state"] not in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"):
            return task
        await asyncio.sleep(0.1)
    raise AssertionError(f"task {task_id} still working")


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


def _answer(task_id: str, responses: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**_message("x", taskId=task_id, **fields), "parts": [{"data": {"responses": responses}}]}


async def test_an_approval_is_input_required_and_the_answer_on_the_task_finishes_it(host: FunctionHost) -> None:
    asked = (await _rpc(host, "SendMessage", {"message": _message("needs approval please")}))["result"]["task"]
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
    assert (await _rpc(host, "GetTask", {"id": asked["id"]}))["result"] == asked
    (pending,) = asked["status"]["message"]["parts"][1]["data"]["pending_requests"]
    checkpoints = await _blobs("checkpoints/")
    wrong = _answer(asked["id"], {"no-such-request": "yes"})
    refused = (await _rpc(host, "SendMessage", {"message": wrong}))["error"]  # refused before it runs
    assert refused["code"] == -32602
    assert refused["data"]["error"]["details"]["unknown_request_ids"] == ["no-such-request"]
    assert await _blobs("checkpoints/") == checkpoints
    answer = _answer(asked["id"], {pending["request_id"]: "yes"})
    done = (await _rpc(host, "SendMessage", {"message": answer}))["result"]["task"]
    assert done["id"] == asked["id"] and done["contextId"] == asked["contextId"]  # one task across the answer
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert done["metadata"] == {"turn": 2, "checkpoint_id": f"{asked['id']}.2"}
    assert 'Approval answer: "yes"' in done["artifacts"][0]["parts"][0]["text"]
    assert (await _rpc(host, "GetTask", {"id": asked["id"]}))["result"] == done
    assert (await _rpc(host, "SendMessage", {"message": answer}))["result"]["task"] == done  # a retry: replayed
    assert (await _thread(host, asked["contextId"]))["turns"] == 2
    again = await _rpc(host, "SendMessage", {"message": _answer(asked["id"], {pending["request_id"]: "no"})})
    assert again["error"]["code"] == -32004, again  # a completed task takes no more answers
    assert (await _thread(host, asked["contextId"]))["turns"] == 2


async def test_an_answer_to_a_task_its_context_moved_past_is_refused(host: FunctionHost) -> None:
    asked = (await _rpc(host, "SendMessage", {"message": _message("approval needed")}))["result"]["task"]
    (pending,) = asked["status"]["message"]["parts"][1]["data"]["pending_requests"]
    context = asked["contextId"]
    answered = await host.request(
        "POST", f"/api/threads/{context}/runs", json_body={"responses": {pending["request_id"]: "via http"}}
    )
    assert answered.status == 200
    late = await _rpc(host, "SendMessage", {"message": _answer(asked["id"], {pending["request_id"]: "yes"})})
    assert late["error"]["code"] == -32004, late
    assert (await _thread(host, context))["turns"] == 2
    still = (await _rpc(host, "GetTask", {"id": asked["id"]}))["result"]
    assert still["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # its own turn, as it ended


async def test_a_pending_request_is_also_answered_by_a_new_task_on_its_context(host: FunctionHost) -> None:
    """An answer need not name the task: a message on the context with the answer as a data
    part is a turn like any other, so a new task that completes (what docs/a2a.md offers when
    the task's next turn is blocked), and the asking task has then moved on."""
    asked = (await _rpc(host, "SendMessage", {"message": _message("approval needed")}))["result"]["task"]
    (pending,) = asked["status"]["message"]["parts"][1]["data"]["pending_requests"]
    message = {
        **_message("x", contextId=asked["contextId"]),
        "parts": [{"data": {"responses": {pending["request_id"]: "yes"}}}],
    }
    done = (await _rpc(host, "SendMessage", {"message": message}))["result"]["task"]
    assert done["id"] != asked["id"] and done["contextId"] == asked["contextId"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert 'Approval answer: "yes"' in done["artifacts"][0]["parts"][0]["text"]
    late = await _rpc(host, "SendMessage", {"message": _answer(asked["id"], {pending["request_id"]: "again"})})
    assert late["error"]["code"] == -32004, late


async def test_a_background_task_is_answered_on_the_same_task(host: FunctionHost, runner: Any) -> None:
    params = {"message": _message("approval, in the background"), "configuration": {"returnImmediately": True}}
    queued = (await _rpc(host, "SendMessage", params))["result"]["task"]
    asked = await _settled(host, queued["id"])
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
    (pending,) = asked["status"]["message"]["parts"][1]["data"]["pending_requests"]
    done = await _rpc(host, "SendMessage", {"message": _answer(queued["id"], {pending["request_id"]: "ok"})})
    task = done["result"]["task"]
    assert task["id"] == queued["id"] and task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert task["metadata"] == {"turn": 2, "checkpoint_id": f"{queued['id']}.2"}
    assert (await _rpc(host, "GetTask", {"id": queued["id"]}))["result"] == task
    events = await _stream(host, "SubscribeToTask", {"id": queued["id"]})
    assert [e["result"] for e in events] == [{"task": task}]
    refused = await _rpc(host, "CancelTask", {"id": queued["id"]})
    assert refused["error"]["code"] == -32002


async def test_a_deleted_threads_tasks_are_gone(host: FunctionHost) -> None:
    task = (await _rpc(host, "SendMessage", {"message": _message("forget me")}))["result"]["task"]
    deleted = await host.request("DELETE", f"/api/threads/{task['contextId']}")
    assert deleted.status in (200, 202, 204)
    for method in ("GetTask", "CancelTask"):
        gone = await _rpc(host, method, {"id": task["id"]})
        assert gone["error"]["code"] == -32001, gone
    answer = await _rpc(host, "SendMessage", {"message": _answer(task["id"], {"r": "yes"})})
    assert answer["error"]["code"] == -32001, answer


async def test_a_synchronous_task_cannot_be_canceled(host: FunctionHost) -> None:
    task = (await _rpc(host, "SendMessage", {"message": _message("quick")}))["result"]["task"]
    refused = await _rpc(host, "CancelTask", {"id": task["id"]})
    assert refused["error"]["code"] == -32002
    unknown = await _rpc(host, "GetTask", {"id": "t-" + "0" * 32})
    assert unknown["error"]["code"] == -32001


async def test_a_message_costs_what_a_keyed_thread_turn_costs(host: FunctionHost, ops: OperationCounter) -> None:
    """The messageId is the turn's Idempotency-Key, so the keyed thread route is the floor:
    the same storage operations, in the same order."""
    task = (await _rpc(host, "SendMessage", {"message": _message("first")}))["result"]["task"]
    context = task["contextId"]
    started = await host.request("POST", "/api/threads/via-http/runs", json_body={"messages": "first"})
    assert started.status == 200
    measured = {}
    for name in ("http", "a2a"):
        ops.reset()
        if name == "http":
            key = {"Idempotency-Key": str(uuid.uuid4())}
            answered = await host.request(
                "POST", "/api/threads/via-http/runs", json_body={"messages": "2"}, headers=key
            )
            assert answered.status == 200
        else:
            sent = await _rpc(host, "SendMessage", {"message": _message("2", contextId=context)})
            assert sent["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        measured[name] = (dict(ops.counts), [method for method, _ in ops.log])
    assert measured["a2a"] == measured["http"] and sum(measured["http"][0].values()) > 0


async def test_a_queued_task_is_cancelled_and_never_runs(host: FunctionHost, queue_env: str) -> None:
    params = {"message": _message("never"), "configuration": {"returnImmediately": True}}
    task = (await _rpc(host, "SendMessage", params))["result"]["task"]  # no queue runner: it stays queued
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    cancelled = (await _rpc(host, "CancelTask", {"id": task["id"]}))["result"]
    assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
    thread = await host.request("GET", f"/api/threads/{task['contextId']}")
    assert thread.status == 404  # the turn never ran, so the thread was never made


async def test_subscribing_to_a_finished_task_replays_it_and_ends(host: FunctionHost) -> None:
    task = (await _rpc(host, "SendMessage", {"message": _message("done")}))["result"]["task"]
    (only,) = await _stream(host, "SubscribeToTask", {"id": task["id"]})
    assert only["result"] == {"task": task}


async def test_any_message_id_starts_a_thread_of_the_callers_own(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    message = _message("hello", messageId="not a valid thread ID / at all")
    alice = (await _rpc(host, "SendMessage", {"message": message}, headers={"x-caller": "alice"}))["result"]["task"]
    bob = (await _rpc(host, "SendMessage", {"message": message}, headers={"x-caller": "bob"}))["result"]["task"]
    assert alice["status"]["state"] == bob["status"]["state"] == "TASK_STATE_COMPLETED"
    assert alice["contextId"] != bob["contextId"] and alice["id"] != bob["id"]


async def test_list_tasks_pages_a_contexts_tasks_newest_first(host: FunctionHost) -> None:
    asked = (await _rpc(host, "SendMessage", {"message": _message("approval please")}))["result"]["task"]
    context = asked["contextId"]
    (pending,) = asked["status"]["message"]["parts"][1]["data"]["pending_requests"]
    await _rpc(host, "SendMessage", {"message": _answer(asked["id"], {pending["request_id"]: "yes"})})
    via_http = await host.request("POST", f"/api/threads/{context}/runs", json_body={"messages": "not a task"})
    assert via_http.status == 200
    later = (await _rpc(host, "SendMessage", {"message": _message("later", contextId=context)}))["result"]["task"]
    # The lineage, newest first: later.1, (the thread route's turn), asked.2, asked.1.
    listed = (await _rpc(host, "ListTasks", {"contextId": context, "includeArtifacts": True}))["result"]
    assert [t["id"] for t in listed["tasks"]] == [later["id"], asked["id"]]
    assert listed["tasks"][0] == later and listed["nextPageToken"] == ""
    assert listed["tasks"][1]["metadata"]["turn"] == 2
    ids, token, pages = [], None, 0
    while token != "":
        params = {"contextId": context, "pageSize": 1, **({"pageToken": token} if token else {})}
        page = (await _rpc(host, "ListTasks", params))["result"]
        assert all("artifacts" not in task for task in page["tasks"])
        ids += [task["id"] for task in page["tasks"]]
        token, pages = page["nextPageToken"], pages + 1
    assert ids == [later["id"], asked["id"]] and pages == 4  # a page is one turn of the lineage
    done = await _rpc(host, "ListTasks", {"contextId": context, "status": "TASK_STATE_INPUT_REQUIRED"})
    assert done["result"]["tasks"] == []


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({}, -32602),  # no contextId: no index of an origin's tasks to list from
        ({"contextId": "c", "pageSize": 0}, -32602),
        ({"contextId": "c", "pageSize": 101}, -32602),
        ({"contextId": "c", "pageSize": True}, -32602),
        ({"contextId": "c", "pageSize": "1e3"}, -32602),
        ({"contextId": "c", "pageToken": "not a token"}, -32602),
        ({"contextId": "c", "pageToken": "x" * 5000}, -32602),
        ({"contextId": "c", "statusTimestampAfter": "2026-01-01T00:00:00Z"}, -32602),
        ({"contextId": "not a valid id!"}, -32602),
    ],
)
async def test_list_tasks_refuses_what_it_cannot_page(host: FunctionHost, params: dict[str, Any], code: int) -> None:
    assert (await _rpc(host, "ListTasks", params))["error"]["code"] == code


async def test_list_tasks_of_another_origins_context_is_refused(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    sent = {"message": _message("mine alone")}
    task = (await _rpc(host, "SendMessage", sent, headers={"x-caller": "alice"}))["result"]["task"]
    refused = await _rpc(host, "ListTasks", {"contextId": task["contextId"]}, headers={"x-caller": "bob"})
    assert refused["error"]["data"]["status"] == 403 and "mine alone" not in json.dumps(refused)
    empty = await _rpc(host, "ListTasks", {"contextId": "nobody-here"})
    assert empty["result"] == {"tasks": [], "nextPageToken": "", "pageSize": 50}


async def test_a_task_older_than_the_threads_recent_lineage_is_found_turn_by_turn(host: FunctionHost) -> None:
    asked = (await _rpc(host, "SendMessage", {"message": _message("approval first")}))["result"]["task"]
    (pending,) = asked["status"]["message"]["parts"][1]["data"]["pending_requests"]
    done = await _rpc(host, "SendMessage", {"message": _answer(asked["id"], {pending["request_id"]: "y"})})
    context = asked["contextId"]
    for n in range(10):  # the pointer keeps the ten newest checkpoint IDs: the task's fall out
        await _rpc(host, "SendMessage", {"message": _message(f"more {n}", contextId=context)})
    recent = (await _thread(host, context))["recent_checkpoint_ids"]
    assert not any(c.startswith(asked["id"]) for c in recent)
    got = (await _rpc(host, "GetTask", {"id": asked["id"]}))["result"]
    assert got == done["result"]["task"] and got["metadata"]["turn"] == 2
    late = await _rpc(host, "SendMessage", {"message": _answer(asked["id"], {pending["request_id"]: "n"})})
    assert late["error"]["code"] == -32004


async def test_a_signed_deployment_keys_a_message_by_its_verified_webhook_id(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With Standard Webhooks signatures on (WEBHOOK_SECRET), every route keys a turn by the
    verified ``webhook-id``, so a captured delivery sent again replays instead of running; an
    A2A message is keyed the same way, and a sender's retry of the delivery runs nothing twice."""
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    monkeypatch.setenv("WEBHOOK_SECRET", secret)
    context = f"signed-{uuid.uuid4().hex[:12]}"
    call = {
        "jsonrpc": "2.0",
        "id": "1",
        "method": "SendMessage",
        "params": {"message": _message("hi", contextId=context)},
    }
    body = json.dumps(call).encode()
    unsigned = await host.request("POST", ENDPOINT, body=body, headers={"content-type": "application/json"})
    assert unsigned.status == 401
    delivery = f"msg_{uuid.uuid4().hex}"
    answers = []
    for _ in range(2):  # the sender's retry: the same delivery, signed again
        now = int(time.time())
        headers = {
            "content-type": "application/json",
            "webhook-id": delivery,
            "webhook-timestamp": str(now),
            "webhook-signature": sign(secret, delivery, now, body),
        }
        answered = await host.request("POST", ENDPOINT, body=body, headers=headers)
        assert answered.status == 200, await answered.body()
        answers.append((await answered.json())["result"]["task"])
    assert answers[0]["id"] == answers[1]["id"] and answers[0]["metadata"]["turn"] == 1
    assert (await _thread(host, context))["turns"] == 1
