"""A red team's attacks on the A2A agent, through the registered functions against real
Azurite, with two origins (a trusted principal header): another origin's task or context by
every ID form, messageId reuse and races, forged task IDs, push configs as a way out, and
hostile params. Each refusal is a JSON-RPC error (never a 500 or a stack trace) and leaves
storage as it was."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import uuid
from typing import Any

import pytest
from starlette.requests import Request

from devtools import write_faults
from devtools.function_host import FunctionHost, _receiver, _scope
from devtools.instances import Instance, separate_instances
from devtools.queue_runner import QueueRunner
from devtools.webhook_receiver import WebhookReceiver
from functions_adapter import wiring
from resumable.storage import clients as storage_client
from resumable.storage import run_queue
from tests.conftest import CALLBACK_SECRET

ENDPOINT = "/api/a2a/default"
ALICE, BOB = "alice", "bob"


@pytest.fixture
async def two(two_origins: FunctionHost) -> FunctionHost:
    return two_origins


def _message(text: str, **fields: Any) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}], **fields}


def _answer(task_id: str, responses: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**_message("x", taskId=task_id, **fields), "parts": [{"data": {"responses": responses}}]}


async def _post(host: FunctionHost, body: Any, caller: str = ALICE) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"x-caller": caller, "content-type": "application/json"}
    response = await host.request("POST", ENDPOINT, body=raw, headers=headers)
    assert response.status == 200, await response.body()
    text = await response.body()
    if response.is_stream or text.startswith(b"data: "):
        return [json.loads(line[6:]) for line in text.splitlines() if line.startswith(b"data: ")]
    return json.loads(text)


async def _stream(host: FunctionHost, method: str, params: Any, caller: str = ALICE) -> list[dict[str, Any]]:
    """A streaming method's answers: its events, or the one error it was refused with."""
    answer = await _post(host, {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, caller)
    return answer if isinstance(answer, list) else [answer]


async def _rpc(host: FunctionHost, method: str, params: Any, caller: str = ALICE) -> dict[str, Any]:
    answer = await _post(host, {"jsonrpc": "2.0", "id": "1", "method": method, "params": params}, caller)
    assert isinstance(answer, dict), answer
    return answer


async def _task(host: FunctionHost, text: str, caller: str = ALICE, **fields: Any) -> dict[str, Any]:
    answer = await _rpc(host, "SendMessage", {"message": _message(text, **fields)}, caller)
    assert "result" in answer, answer
    return dict(answer["result"]["task"])


async def _blobs() -> dict[str, str]:
    """Every blob in the test's container, with its ETag: what a refusal must leave as it was."""
    container = wiring.container_for(wiring.load_settings())
    if not await container.exists():  # nothing written yet
        return {}
    return {blob.name: blob.etag async for blob in container.list_blobs()}


def _pending(task: dict[str, Any]) -> str:
    (pending,) = task["status"]["message"]["parts"][1]["data"]["pending_requests"]
    return str(pending["request_id"])


def _refused(answer: dict[str, Any], code: int, status: int | None = None) -> None:
    assert "error" in answer, answer
    assert answer["error"]["code"] == code, answer
    if status is not None:
        assert answer["error"]["data"]["status"] == status, answer
    assert "Traceback" not in json.dumps(answer)


async def _turns(host: FunctionHost, thread: str, caller: str = ALICE) -> int:
    return int(
        (await (await host.request("GET", f"/api/threads/{thread}", headers={"x-caller": caller})).json())["turns"]
    )


# -- ownership -----------------------------------------------------------------------------


async def test_every_method_on_another_origins_synchronous_task_is_forbidden(two: FunctionHost) -> None:
    asked = await _task(two, "approval please, alice's secret")
    before = await _blobs()
    task_id, context = asked["id"], asked["contextId"]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("GetTask", {"id": task_id}),
        ("CancelTask", {"id": task_id}),
        ("SendMessage", {"message": _answer(task_id, {_pending(asked): "stolen"})}),
        ("SendMessage", {"message": _answer(task_id, {_pending(asked): "stolen"}, contextId=context)}),
        ("SendMessage", {"message": _message("in her context", contextId=context)}),
        ("ListTasks", {"contextId": context}),
        (
            "SendMessage",
            {"message": _answer(task_id, {_pending(asked): "x"}), "configuration": {"returnImmediately": True}},
        ),
    ]
    for method, params in calls:
        _refused(await _rpc(two, method, params, BOB), -32602, 403)
    for method, params in (
        ("SubscribeToTask", {"id": task_id}),
        ("SendStreamingMessage", {"message": _answer(task_id, {_pending(asked): "x"})}),
    ):
        (refused,) = await _stream(two, method, params, BOB)
        _refused(refused, -32602, 403)
        assert "secret" not in json.dumps(refused)
    assert await _blobs() == before  # nothing ran, nothing queued, no key claimed


async def test_every_method_on_another_origins_background_task_is_forbidden(two: FunctionHost) -> None:
    params = {"message": _message("alice's queued secret"), "configuration": {"returnImmediately": True}}
    queued = (await _rpc(two, "SendMessage", params))["result"]["task"]
    before = await _blobs()
    for method, sent in (
        ("GetTask", {"id": queued["id"]}),
        ("CancelTask", {"id": queued["id"]}),
        ("SendMessage", {"message": _message("on her task", taskId=queued["id"])}),
        (
            "SendMessage",
            {"message": _message("on her task", taskId=queued["id"]), "configuration": {"returnImmediately": True}},
        ),
    ):
        answer = await _rpc(two, method, sent, BOB)
        _refused(answer, -32602, 403)
        assert "secret" not in json.dumps(answer)
    (refused,) = await _stream(two, "SubscribeToTask", {"id": queued["id"]}, BOB)
    _refused(refused, -32602, 403)
    assert await _blobs() == before
    mine = (await _rpc(two, "GetTask", {"id": queued["id"]}))["result"]
    assert mine["status"]["state"] == "TASK_STATE_SUBMITTED"  # Bob's cancel did not land


@pytest.mark.parametrize("form", ["{task}.1", "{task}.2", "T-{hex}", "{task}/..", "{context}"])
async def test_a_task_named_by_any_other_form_of_its_id_is_no_task(two: FunctionHost, form: str) -> None:
    """A checkpoint ID, another spelling, or the context's ID is not a task ID: -32001, for
    its owner and for anyone else, so no form reaches the task around the owner check."""
    asked = await _task(two, "approval needed")
    answered = await _rpc(two, "SendMessage", {"message": _answer(asked["id"], {_pending(asked): "yes"})})
    assert answered["result"]["task"]["metadata"]["turn"] == 2
    forged = form.format(task=asked["id"], hex=asked["id"][2:], context=asked["contextId"])
    before = await _blobs()
    for caller in (ALICE, BOB):
        for method, params in (
            ("GetTask", {"id": forged}),
            ("CancelTask", {"id": forged}),
            ("SendMessage", {"message": _answer(forged, {"r": "y"})}),
            ("CreateTaskPushNotificationConfig", {"taskId": forged, "url": "https://example.com/hook"}),
            ("GetTaskPushNotificationConfig", {"taskId": forged, "id": forged}),
        ):
            answer = await _rpc(two, method, params, caller)
            assert "error" in answer and answer["error"]["code"] in (-32001, -32602), (method, caller, answer)
            assert answer["error"].get("data", {}).get("status", 404) in (400, 404), (method, caller, answer)
    assert await _blobs() == before


async def test_a_task_of_one_context_sent_with_another_context_is_refused(two: FunctionHost) -> None:
    asked = await _task(two, "approval here")
    other = await _task(two, "another context")
    before = await _blobs()
    wrong = _answer(asked["id"], {_pending(asked): "yes"}, contextId=other["contextId"])
    _refused(await _rpc(two, "SendMessage", {"message": wrong}), -32602)
    background = {"message": wrong, "configuration": {"returnImmediately": True}}
    _refused(await _rpc(two, "SendMessage", background), -32602)
    assert await _blobs() == before
    assert await _turns(two, other["contextId"]) == 1


async def test_a_context_made_through_another_protocol_by_another_origin_is_forbidden(two: FunctionHost) -> None:
    made = await two.request(
        "POST", "/api/threads/alices-thread/runs", json_body={"messages": "hi"}, headers={"x-caller": ALICE}
    )
    assert made.status == 200
    before = await _blobs()
    _refused(
        await _rpc(two, "SendMessage", {"message": _message("mine now", contextId="alices-thread")}, BOB), -32602, 403
    )
    _refused(await _rpc(two, "ListTasks", {"contextId": "alices-thread"}, BOB), -32602, 403)
    params = {"message": _message("queued", contextId="alices-thread"), "configuration": {"returnImmediately": True}}
    _refused(await _rpc(two, "SendMessage", params, BOB), -32602, 403)
    assert await _blobs() == before


def _formerly_derived(caller: str, message_id: str) -> str:
    """The thread a context-less message used to start, derived from its origin and messageId
    alone: anyone who learned the messageId could make it first."""
    digest = hashlib.sha256(f"principal:{caller}\0{message_id}".encode()).hexdigest()[:32]
    return f"{caller}.a2a-{digest}"


async def test_a_first_message_runs_even_when_another_origin_made_its_derived_thread(two: FunctionHost) -> None:
    """Bob makes, through the thread route, the thread Alice's first message would have been
    derived to (origin and messageId were all it took): her message still runs, on a thread
    of its own, and Bob's thread is left as it was."""
    message = _message("alice's first words")
    squatted = _formerly_derived(ALICE, message["messageId"])
    made = await two.request(
        "POST", f"/api/threads/{squatted}/runs", json_body={"messages": "bob's"}, headers={"x-caller": BOB}
    )
    assert made.status == 200
    bobs = {name: etag for name, etag in (await _blobs()).items() if squatted in name}
    assert bobs, "the squat wrote nothing to compare"
    answer = await _rpc(two, "SendMessage", {"message": message}, ALICE)
    assert "result" in answer, answer
    context = answer["result"]["task"]["contextId"]
    assert context != squatted and context.startswith(f"{ALICE}.a2a-"), context
    assert {name: etag for name, etag in (await _blobs()).items() if squatted in name} == bobs
    assert await _turns(two, squatted, BOB) == 1 and await _turns(two, context) == 1


async def test_with_the_ready_authorizer_a_first_message_runs_on_a_thread_under_the_callers_prefix(
    two: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``thread_prefix_of_principal`` allows a caller only the threads under its prefix, so the
    thread a message without a context starts must be under it: else an A2A client's first
    message (the SDK sends none) is refused on such a deployment, every time. Under the
    prefix, no other caller can make a thread there either."""
    monkeypatch.setenv("THREAD_AUTHORIZER", "functions_adapter.authorizers:thread_prefix_of_principal")
    message = _message("alice's first words")
    squat = await two.request(
        "POST", f"/api/threads/{ALICE}.a2a-{'0' * 32}/runs", json_body={"messages": "bob's"}, headers={"x-caller": BOB}
    )
    assert squat.status == 403
    answer = await _rpc(two, "SendMessage", {"message": message}, ALICE)
    assert "result" in answer, answer
    task = answer["result"]["task"]
    assert task["contextId"].startswith(f"{ALICE}.a2a-"), task
    assert (await _rpc(two, "SendMessage", {"message": message}, ALICE))["result"]["task"] == task  # a retry
    queued = await _rpc(two, "SendMessage", _queued_params("queued first words"), ALICE)
    assert queued["result"]["task"]["contextId"].startswith(f"{ALICE}.a2a-"), queued


def _threads(blobs: dict[str, str]) -> set[str]:
    """The threads that have a pointer."""
    return {name.split("/")[1].removesuffix(".json") for name in blobs if name.startswith("threads/")}


async def test_a_retried_first_message_answers_its_first_context_and_task_and_runs_once(two: FunctionHost) -> None:
    """Each try of a context-less message draws a thread of its own; a retry (blocking, or
    streamed) finds the first answer by its key and names the first thread, running nothing."""
    message = _message("first words, sent three times")
    before = _threads(await _blobs())
    first = (await _rpc(two, "SendMessage", {"message": message}))["result"]["task"]
    after_first = await _blobs()
    assert await _rpc(two, "SendMessage", {"message": message}) == {
        "jsonrpc": "2.0",
        "id": "1",
        "result": {"task": first},
    }
    streamed = await _stream(two, "SendStreamingMessage", {"message": message})
    assert [event["result"] for event in streamed] == [{"task": first}]
    named = await _rpc(two, "SendMessage", {"message": {**message, "contextId": first["contextId"]}})
    _refused(named, -32602, 422)  # naming the context it started: another request under the same key
    assert named["error"]["data"]["error"]["code"] == "idempotency_key_reused", named
    assert await _blobs() == after_first  # no turn, no checkpoint, no thread
    assert _threads(after_first) - before == {first["contextId"]}
    assert await _turns(two, first["contextId"]) == 1


async def test_a_retried_first_message_that_streamed_answers_its_first_context(two: FunctionHost) -> None:
    message = _message("first words, streamed")
    streamed = await _stream(two, "SendStreamingMessage", {"message": message})
    context = streamed[0]["result"]["task"]["contextId"]
    after_first = await _blobs()
    task = (await _rpc(two, "SendMessage", {"message": message}))["result"]["task"]
    assert (task["id"], task["contextId"]) == (streamed[0]["result"]["task"]["id"], context)
    assert await _blobs() == after_first and await _turns(two, context) == 1


async def test_a_retried_queued_first_message_answers_its_first_run(two: FunctionHost) -> None:
    params = _queued_params("queued first words, sent twice")
    first = (await _rpc(two, "SendMessage", params))["result"]["task"]
    again = (await _rpc(two, "SendMessage", params))["result"]["task"]
    assert (again["id"], again["contextId"]) == (first["id"], first["contextId"])
    await QueueRunner(two).run_until_idle()
    runs = [name for name in await _blobs() if name.startswith("runs/") and name.count("/") == 1]
    assert len(runs) == 1, runs
    assert await _turns(two, first["contextId"]) == 1
    assert {t for t in _threads(await _blobs()) if ".a2a-" in t} == {first["contextId"]}


async def test_a_refused_first_message_is_refused_again_and_leaves_no_thread(two: FunctionHost) -> None:
    """A refused turn releases its key (nothing of it is stored), so its retry is judged
    afresh, on a thread of its own: refused again, and neither try leaves a thread behind."""
    message = {**_message("x"), "parts": [{"data": {"responses": {"no-such-request": "yes"}}}]}
    before = await _blobs()
    for _ in range(2):
        _refused(await _rpc(two, "SendMessage", {"message": message}), -32602)
    (refused,) = await _stream(two, "SendStreamingMessage", {"message": message})
    _refused(refused, -32602)
    assert await _blobs() == before


async def test_two_concurrent_first_messages_run_once_and_leave_one_thread(two: FunctionHost) -> None:
    """Each of the concurrent tries drew a thread of its own; only the one that holds the key
    writes to its thread, so the others leave nothing behind."""
    message = _message("first words, at once")
    before = await _blobs()
    answers = await asyncio.gather(*(_rpc(two, "SendMessage", {"message": message}) for _ in range(4)))
    tasks = [a["result"]["task"] for a in answers if "result" in a]
    assert tasks and all(a["error"]["data"]["status"] == 409 for a in answers if "error" in a), answers
    assert len({(t["id"], t["contextId"]) for t in tasks}) == 1, tasks
    after = await _blobs()
    assert _threads(after) - _threads(before) == {tasks[0]["contextId"]}
    made = {name for name in after.keys() - before.keys() if not name.startswith("idempotency/")}
    assert all(tasks[0]["contextId"] in name or tasks[0]["id"] in name for name in made), made
    assert await _turns(two, tasks[0]["contextId"]) == 1


# -- idempotency -----------------------------------------------------------------------------


async def test_a_message_id_reused_with_another_context_task_or_mode_is_refused_and_runs_nothing(
    two: FunctionHost,
) -> None:
    first = _message("the first use")
    task = (await _rpc(two, "SendMessage", {"message": first}))["result"]["task"]
    other = await _task(two, "another context")
    before = await _blobs()
    for params in (
        {"message": {**first, "contextId": other["contextId"]}},
        {"message": {**first, "contextId": task["contextId"]}},  # its own context, named now: another request
        {"message": {**first, "taskId": other["id"]}},
        {"message": first, "configuration": {"returnImmediately": True}},
        {"message": {**first, "contextId": task["contextId"]}, "configuration": {"returnImmediately": True}},
    ):
        answer = await _rpc(two, "SendMessage", params)
        _refused(answer, -32602)
        assert answer["error"]["data"]["error"]["code"] in ("idempotency_key_reused", "invalid_request"), answer
    assert await _blobs() == before
    assert await _turns(two, task["contextId"]) == 1 and await _turns(two, other["contextId"]) == 1


async def test_a_message_id_first_sent_with_return_immediately_is_not_run_again_synchronously(
    two: FunctionHost,
) -> None:
    first = _message("queued first")
    queued = await _rpc(two, "SendMessage", {"message": first, "configuration": {"returnImmediately": True}})
    assert "result" in queued, queued
    before = await _blobs()
    for method in ("SendMessage", "SendStreamingMessage"):
        (refused,) = await _stream(two, method, {"message": first})
        _refused(refused, -32602)
    assert await _blobs() == before


async def test_two_concurrent_sends_of_one_message_run_it_once(two: FunctionHost) -> None:
    message = _message("only once, concurrently")
    sends = [_rpc(two, "SendMessage", {"message": message}) for _ in range(4)]
    answers = await asyncio.gather(*sends)
    tasks = [a["result"]["task"] for a in answers if "result" in a]
    assert tasks, answers
    for answer in answers:
        if "error" in answer:  # a concurrent duplicate: told to retry, never run
            assert answer["error"]["data"]["status"] == 409, answer
    assert len({t["id"] for t in tasks}) == 1
    assert await _turns(two, tasks[0]["contextId"]) == 1


async def test_two_concurrent_answers_to_one_task_run_one_turn(two: FunctionHost) -> None:
    asked = await _task(two, "approval, raced")
    pending = _pending(asked)
    answers = await asyncio.gather(
        *(_rpc(two, "SendMessage", {"message": _answer(asked["id"], {pending: f"answer {n}"})}) for n in range(3))
    )
    done = [a["result"]["task"] for a in answers if "result" in a]
    assert len(done) == 1, answers
    for answer in answers:
        if "error" in answer:
            assert answer["error"]["code"] in (-32004, -32602), answer
            assert answer["error"].get("data", {}).get("status", 409) < 500, answer
    assert await _turns(two, asked["contextId"]) == 2
    got = (await _rpc(two, "GetTask", {"id": asked["id"]}))["result"]
    assert got == done[0]


async def test_a_retried_answer_after_the_context_moved_on_replays_and_runs_nothing(two: FunctionHost) -> None:
    asked = await _task(two, "approval then more")
    answer = _answer(asked["id"], {_pending(asked): "yes"})
    done = (await _rpc(two, "SendMessage", {"message": answer}))["result"]["task"]
    await _task(two, "moving on", contextId=asked["contextId"])
    before = await _blobs()
    assert (await _rpc(two, "SendMessage", {"message": answer}))["result"]["task"] == done
    streamed = await _stream(two, "SendStreamingMessage", {"message": answer})
    assert [e["result"] for e in streamed] == [{"task": done}]
    assert await _blobs() == before


# -- hostile params ------------------------------------------------------------------------------


def _params_cases() -> list[tuple[str, Any]]:
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "t"}]}
    return [
        ("SendMessage", {"message": {**message, "messageId": 5}}),
        ("SendMessage", {"message": {**message, "messageId": ""}}),
        ("SendMessage", {"message": {**message, "messageId": ["m"]}}),
        ("SendMessage", {"message": {**message, "role": "ROLE_AGENT"}}),
        ("SendMessage", {"message": {**message, "role": 1}}),
        ("SendMessage", {"message": {**message, "parts": {"text": "t"}}}),
        ("SendMessage", {"message": {**message, "parts": [{"text": 5}]}}),
        ("SendMessage", {"message": {**message, "parts": ["t"]}}),
        ("SendMessage", {"message": {**message, "parts": [{"data": {"responses": []}}]}}),
        ("SendMessage", {"message": {**message, "parts": [{"file": {"uri": "file:///etc/passwd"}}]}}),
        ("SendMessage", {"message": {**message, "contextId": 7}}),
        ("SendMessage", {"message": {**message, "contextId": "../../etc"}}),
        ("SendMessage", {"message": {**message, "contextId": "x" * 5000}}),
        ("SendMessage", {"message": {**message, "taskId": 7}}),
        ("SendMessage", {"message": {**message, "taskId": {"id": "t"}}}),
        ("SendMessage", {"message": message, "configuration": []}),
        ("SendMessage", {"message": message, "configuration": {"returnImmediately": "false"}}),
        ("SendMessage", {"message": message, "configuration": {"returnImmediately": 1}}),
        ("SendStreamingMessage", {"message": message, "configuration": {"returnImmediately": "false"}}),
        ("SendMessage", {"message": message, "configuration": {"taskPushNotificationConfig": []}}),
        ("SendMessage", {"message": message, "configuration": {"taskPushNotificationConfig": False}}),
        ("SendMessage", {"message": message, "configuration": {"taskPushNotificationConfig": ["x"]}}),
        ("SendMessage", {"message": message, "configuration": {"taskPushNotificationConfig": "https://example.com"}}),
        ("SendMessage", {"message": "hello"}),
        ("SendMessage", {}),
        ("GetTask", {"id": 5}),
        ("GetTask", {"id": ["t"]}),
        ("GetTask", {}),
        ("CancelTask", {"id": None}),
        ("ListTasks", {"contextId": 5}),
        ("ListTasks", {"contextId": "c", "pageSize": 10**30}),
        ("ListTasks", {"contextId": "c", "pageSize": -1}),
        ("ListTasks", {"contextId": "c", "pageSize": 1.5}),
        ("ListTasks", {"contextId": "c", "pageToken": 5}),
        ("ListTasks", {"contextId": "c", "pageToken": "eyJiIjpbXSwibiI6e319"}),  # {"b":[],"n":{}}
        ("ListTasks", {"contextId": "c", "includeArtifacts": "false"}),
        ("ListTasks", {"contextId": "c", "status": 3}),
        ("ListTasks", {"contextId": "c", "status": "done"}),
        ("CreateTaskPushNotificationConfig", {"taskId": 5, "url": "https://example.com"}),
        ("CreateTaskPushNotificationConfig", {"taskId": "0" * 32, "url": 5}),
        ("GetTaskPushNotificationConfig", {"taskId": "0" * 32, "id": 5}),
        ("DeleteTaskPushNotificationConfig", {"taskId": "0" * 32}),
    ]


@pytest.mark.parametrize(("method", "params"), _params_cases(), ids=lambda v: json.dumps(v)[:60])
async def test_a_param_of_the_wrong_type_is_invalid_params_and_writes_nothing(
    two: FunctionHost, method: str, params: Any
) -> None:
    before = await _blobs()
    (answer,) = await _stream(two, method, params)
    assert "error" in answer, answer
    assert answer["error"]["code"] in (-32602, -32001), answer
    assert "Traceback" not in json.dumps(answer)
    assert await _blobs() == before


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "\xff\xfe"}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "\\ud800"}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": '
        b'{"messageId": "\\udfff", "parts": [{"text": "x"}]}}}',
        b'{"jsonrpc": "2.0", "id": ' + b"9" * 5000 + b', "method": "GetTask", "params": {}}',
        b'{"jsonrpc": "2.0", "id": 1.5, "method": "GetTask", "params": {}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": ' + b'{"a":' * 3000 + b"1" + b"}" * 3000 + b"}",
        b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": NaN}}',
        b'{"jsonrpc": "1.0", "id": 1, "method": "GetTask", "params": {}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": ["GetTask"], "params": {}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": []}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "__init__", "params": {}}',
        b'"just a string"',
        b"",
    ],
)
async def test_hostile_bodies_are_json_rpc_errors_and_write_nothing(two: FunctionHost, body: bytes) -> None:
    before = await _blobs()
    answer = await _post(two, body)
    assert isinstance(answer, dict) and "error" in answer, answer
    assert answer["error"]["code"] in (-32700, -32600, -32601, -32602), answer
    assert await _blobs() == before


async def test_an_oversize_message_is_refused_before_it_is_parsed(
    two: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAX_REQUEST_BYTES", "4096")
    before = await _blobs()
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": _message("x" * 8192)}}
    response = await two.request("POST", ENDPOINT, json_body=body, headers={"x-caller": ALICE})
    assert response.status == 413
    assert await _blobs() == before


# -- deletion ---------------------------------------------------------------------------------


async def test_nothing_of_a_deleted_contexts_tasks_survives_its_delete(two: FunctionHost) -> None:
    before = set(await _blobs())
    first = _message("approval, then forget everything")
    asked = (await _rpc(two, "SendMessage", {"message": first}))["result"]["task"]
    context = asked["contextId"]
    answer = _answer(asked["id"], {_pending(asked): "secret answer"})
    await _rpc(two, "SendMessage", {"message": answer})
    queued = {"message": _message("queued too", contextId=context), "configuration": {"returnImmediately": True}}
    await _rpc(two, "SendMessage", queued)
    await QueueRunner(two).run_until_idle()
    deleted = await two.request("DELETE", f"/api/threads/{context}", headers={"x-caller": ALICE})
    assert deleted.status in (200, 204), await deleted.body()
    assert set(await _blobs()) - before == set()
    # A retry of either message: no replay of what the thread said, and no resurrection either.
    again = await _rpc(two, "SendMessage", {"message": answer})
    assert "secret" not in json.dumps(again) and "error" in again, again
    _refused(await _rpc(two, "GetTask", {"id": asked["id"]}), -32001)


# -- ListTasks' page token -----------------------------------------------------------------------


def _forged_token(cursor: dict[str, str], newest: str) -> str:
    """A ListTasks token as ``task_list`` writes one, around a history cursor of our choosing."""
    inner = base64.urlsafe_b64encode(json.dumps(cursor).encode()).decode().rstrip("=")
    raw = json.dumps({"b": inner, "n": newest}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def test_a_page_token_cannot_walk_another_origins_context(two: FunctionHost) -> None:
    alices = await _task(two, "alice's first secret")
    context = alices["contextId"]
    second = await _task(two, "alice's second secret", contextId=context)
    page = (await _rpc(two, "ListTasks", {"contextId": context, "pageSize": 1}))["result"]
    assert page["nextPageToken"] and [t["id"] for t in page["tasks"]] == [second["id"]]
    bobs = await _task(two, "bob's own", BOB)
    before = await _blobs()
    forged = [
        page["nextPageToken"],  # Alice's own token, on Bob's context
        _forged_token({"t": bobs["contextId"], "c": f"{alices['id']}.1"}, f"{bobs['id']}.1"),
        _forged_token({"t": context, "c": f"{alices['id']}.1"}, f"{bobs['id']}.1"),
    ]
    for token in forged:
        answer = await _rpc(two, "ListTasks", {"contextId": bobs["contextId"], "pageToken": token}, BOB)
        _refused(answer, -32602, 400)
        assert "secret" not in json.dumps(answer)
    # And Alice's token on Alice's context, sent by Bob: the owner check comes first.
    answer = await _rpc(two, "ListTasks", {"contextId": context, "pageToken": page["nextPageToken"]}, BOB)
    _refused(answer, -32602, 403)
    assert await _blobs() == before


# -- races with the thread route -------------------------------------------------------------------


async def test_an_answer_racing_the_thread_routes_answer_commits_one_and_refuses_the_other(two: FunctionHost) -> None:
    asked = await _task(two, "approval, raced across routes")
    pending, context = _pending(asked), asked["contextId"]
    a2a, http = await asyncio.gather(
        _rpc(two, "SendMessage", {"message": _answer(asked["id"], {pending: "via a2a"})}),
        two.request(
            "POST",
            f"/api/threads/{context}/runs",
            json_body={"responses": {pending: "via http"}},
            headers={"x-caller": ALICE},
        ),
    )
    assert ("result" in a2a) != (http.status == 200), (a2a, http.status)  # exactly one committed
    if "error" in a2a:
        assert a2a["error"]["code"] in (-32004, -32602) and a2a["error"].get("data", {}).get("status", 409) < 500, a2a
    else:
        assert http.status == 409, await http.body()
    assert await _turns(two, context) == 2
    got = (await _rpc(two, "GetTask", {"id": asked["id"]}))["result"]
    expected = "TASK_STATE_COMPLETED" if "result" in a2a else "TASK_STATE_INPUT_REQUIRED"
    assert got["status"]["state"] == expected, got


async def test_a_message_id_the_thread_route_used_as_its_key_is_not_replayed_as_a_task(two: FunctionHost) -> None:
    first = await _task(two, "a context")
    context, key = first["contextId"], str(uuid.uuid4())
    body = json.dumps({"messages": "same words", "workflow": "default"}, separators=(",", ":")).encode()
    headers = {"x-caller": ALICE, "content-type": "application/json", "Idempotency-Key": key}
    via_http = await two.request("POST", f"/api/threads/{context}/runs", body=body, headers=headers)
    assert via_http.status == 200
    before = await _blobs()
    message = {**_message("same words", contextId=context), "messageId": key}
    answer = await _rpc(two, "SendMessage", {"message": message})
    _refused(answer, -32602)
    assert await _blobs() == before and await _turns(two, context) == 2


# -- push configs -------------------------------------------------------------------------------


@pytest.fixture
def pushing(two: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> FunctionHost:
    """Callbacks on: signed, retried at once; loopback ``http`` allowed (the receivers)."""
    monkeypatch.setenv("CALLBACK_SECRET", CALLBACK_SECRET)
    monkeypatch.setenv("CALLBACK_ALLOW_LOCAL_HTTP", "true")
    monkeypatch.setenv("CALLBACK_RETRY_SCHEDULE", "0")
    return two


def _queued(text: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    configuration: dict[str, Any] = {"returnImmediately": True}
    if config is not None:
        configuration["taskPushNotificationConfig"] = config
    return {"message": _message(text), "configuration": configuration}


async def test_no_read_returns_a_push_configs_credentials_or_its_urls_query(
    pushing: FunctionHost, receiver: WebhookReceiver
) -> None:
    receiver.status = 401  # the receiver refuses: the failure is recorded, and must not echo them either
    config = {
        "url": f"{receiver.url}?sig=query-SECRET-Q",
        "token": "tok-public",
        "authentication": {"scheme": "Bearer", "credentials": "cred-SECRET-C"},
    }
    sent = await _rpc(pushing, "SendMessage", _queued("push me", config))
    task = sent["result"]["task"]
    await QueueRunner(pushing).run_until_idle()
    assert receiver.deliveries and receiver.deliveries[0].headers["authorization"] == "Bearer cred-SECRET-C"
    reads = [
        sent,
        await _rpc(pushing, "GetTask", {"id": task["id"]}),
        await _rpc(pushing, "ListTasks", {"contextId": task["contextId"], "includeArtifacts": True}),
        await _rpc(pushing, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": task["id"]}),
        await _rpc(pushing, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
        *await _stream(pushing, "SubscribeToTask", {"id": task["id"]}),
        await _rpc(pushing, "CreateTaskPushNotificationConfig", {"taskId": task["id"], **config}),  # refused: finished
    ]
    for path in (
        f"/api/runs/{task['id']}",
        f"/api/threads/{task['contextId']}",
        f"/api/threads/{task['contextId']}/history",
    ):
        response = await pushing.request("GET", path, headers={"x-caller": ALICE})
        assert response.status == 200, path
        reads.append(await response.json())
    for read in reads:
        assert "cred-SECRET-C" not in json.dumps(read), read
    for read in (reads[0], reads[1], reads[2], reads[5], reads[-3], reads[-2], reads[-1]):  # all but the config reads
        assert "query-SECRET-Q" not in json.dumps(read), read


async def test_a_push_that_is_redirected_is_not_followed(pushing: FunctionHost, receiver: WebhookReceiver) -> None:
    inner = WebhookReceiver(CALLBACK_SECRET)
    await inner.start()
    try:
        receiver.redirect_to = inner.url
        config = {"url": receiver.url, "authentication": {"scheme": "Bearer", "credentials": "cred-for-one-host"}}
        task = (await _rpc(pushing, "SendMessage", _queued("redirect me", config)))["result"]["task"]
        await QueueRunner(pushing).run_until_idle()
        assert receiver.deliveries, "the push was never sent"
        assert inner.deliveries == []  # the 302 was not followed, so the credentials went nowhere else
        run = await (await pushing.request("GET", f"/api/runs/{task['id']}", headers={"x-caller": ALICE})).json()
        assert run["callback"]["outcome"] != "delivered", run
    finally:
        await inner.stop()


@pytest.mark.parametrize(
    "config",
    [
        {"url": "https://localhost/hook"},  # a name that resolves to loopback
        {"url": "https://127.1/hook"},
        {"url": "https://0x7f000001/hook"},
        {"url": "https://[::ffff:169.254.169.254]/latest"},
        {"url": "https://user:pass@example.com/hook"},
        {"url": "file:///etc/passwd"},
        {"url": "http://example.com/hook"},
        {"url": "https://example.com/hook", "token": "a\r\nX-Injected: 1"},
        {"url": "https://example.com/hook", "token": "caf\u00e9"},
        {"url": "https://example.com/hook", "token": "t" * 1025},
        {"url": "https://example.com/hook", "token": 5},
        {"url": "https://example.com/hook", "id": {"a": 1}},
        {"url": "https://example.com/hook", "authentication": {"scheme": "Bearer\r\nX-Injected:", "credentials": "c"}},
        {"url": "https://example.com/hook", "authentication": {"scheme": "Bearer", "credentials": "c\nX-Injected: 1"}},
        {"url": "https://example.com/hook", "authentication": {"scheme": "Bearer", "credentials": " padded"}},
        {"url": "https://example.com/hook", "authentication": {"scheme": "Bearer", "credentials": ["c"]}},
        {"url": "https://example.com/hook", "authentication": {"credentials": "c"}},
        {"url": "https://example.com/hook", "authentication": "Bearer c"},
        {"url": "https://example.com/" + "a" * 3000},
        {"url": 5},
    ],
    ids=lambda c: json.dumps(c)[:70],
)
async def test_a_push_config_created_later_is_checked_as_one_sent_with_the_message(
    pushing: FunctionHost, monkeypatch: pytest.MonkeyPatch, config: dict[str, Any]
) -> None:
    """CreateTaskPushNotificationConfig is a second way in: the same address and header checks,
    and a refusal leaves the run's record as it was."""
    monkeypatch.delenv("CALLBACK_ALLOW_LOCAL_HTTP")
    task = (await _rpc(pushing, "SendMessage", _queued("no config yet")))["result"]["task"]  # queued: no runner
    before = await _blobs()
    answer = await _rpc(pushing, "CreateTaskPushNotificationConfig", {"taskId": task["id"], **config})
    _refused(answer, -32602, 400)
    assert await _blobs() == before
    listed = await _rpc(pushing, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert listed["result"] == {"configs": []}


async def test_a_push_config_on_a_synchronous_task_is_refused_without_a_write(pushing: FunctionHost) -> None:
    task = await _task(pushing, "synchronous")
    before = await _blobs()
    for method, params in (
        ("CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": "https://example.com/hook"}),
        ("GetTaskPushNotificationConfig", {"taskId": task["id"], "id": task["id"]}),
        ("ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": task["id"]}),
    ):
        answer = await _rpc(pushing, method, params)
        assert "error" in answer and answer["error"]["code"] in (-32001, -32602, -32004), (method, answer)
        assert answer["error"].get("data", {}).get("status", 400) < 500, (method, answer)
    assert await _blobs() == before


async def test_a_push_being_retried_is_not_sent_again_after_its_threads_delete(
    pushing: FunctionHost, receiver: WebhookReceiver
) -> None:
    """The first attempt fails and a retry is queued; the thread is deleted before it runs: the
    retry finds nothing to send (no credentials left to send with) and writes nothing back."""
    receiver.fail_first = 1
    before = set(await _blobs())
    config = {"url": receiver.url, "authentication": {"scheme": "Bearer", "credentials": "cred-to-forget"}}
    task = (await _rpc(pushing, "SendMessage", _queued("forget my push", config)))["result"]["task"]
    runner = QueueRunner(pushing)
    for _ in range(20):
        if receiver.deliveries:
            break
        await runner.run_once()
    assert len(receiver.deliveries) == 1  # the failed first attempt; its retry is queued
    deleted = await pushing.request("DELETE", f"/api/threads/{task['contextId']}", headers={"x-caller": ALICE})
    assert deleted.status in (200, 204), await deleted.body()
    await runner.run_until_idle()
    assert len(receiver.deliveries) == 1
    left = {name: etag for name, etag in (await _blobs()).items() if name not in before}
    assert left == {}, left


# -- who is calling --------------------------------------------------------------------------------


async def _raw_request(
    host: FunctionHost, method: str, path: str, headers: list[tuple[str, str]], body: bytes = b""
) -> Any:
    """A request whose headers may repeat a name (``FunctionHost.request`` takes a dict)."""
    route, path_params = host.match(method, path) or (None, {})
    assert route is not None, path
    scope = _scope(method, path, {"content-length": str(len(body)), "content-type": "application/json"}, path_params)
    scope["headers"] += [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
    return await route.handler(Request(scope, _receiver(body)))


async def test_a_repeated_principal_header_names_the_same_caller_on_a2a_as_on_the_thread_route(
    two: FunctionHost,
) -> None:
    """A gateway that appends its verified principal header after one the client sent: every
    route reads the caller from the same one of the two, so A2A is not a way around the
    owner check that the thread route makes with the same headers."""
    task = await _task(two, "alice's secret task")
    repeated = [("x-caller", ALICE), ("x-caller", BOB)]
    thread = await _raw_request(two, "GET", f"/api/threads/{task['contextId']}", repeated)
    assert thread.status_code == 403  # the thread route: Bob's request
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task["id"]}}).encode()
    answer = json.loads((await _raw_request(two, "POST", ENDPOINT, repeated, body)).body)
    _refused(answer, -32602, 403)
    assert "secret" not in json.dumps(answer)


async def test_a_message_sent_and_streamed_at_once_runs_once(two: FunctionHost) -> None:
    message = _message("sent and streamed at once")
    sent, streamed, again = await asyncio.gather(
        _rpc(two, "SendMessage", {"message": message}),
        _stream(two, "SendStreamingMessage", {"message": message}),
        _rpc(two, "SendMessage", {"message": message}),
    )
    ids = set()
    for answer in (sent, again, *streamed):
        if "error" in answer:  # a concurrent duplicate: told to retry, never run
            assert answer["error"]["data"]["status"] == 409, answer
            continue
        result = answer["result"]
        task = result.get("task") or result.get("statusUpdate") or result.get("artifactUpdate")
        ids.add(task.get("id") or task.get("taskId"))
    assert len(ids) == 1, (sent, streamed, again)
    contexts = set()
    for answer in (sent, again, *streamed):
        result = answer.get("result", {})
        contexts.add((result.get("task") or result.get("statusUpdate") or {}).get("contextId"))
    contexts.discard(None)
    assert len(contexts) == 1, (sent, streamed, again)
    assert await _turns(two, contexts.pop()) == 1


async def test_a_queued_message_sent_twice_at_once_is_queued_once(two: FunctionHost) -> None:
    params = _queued_params("queued twice at once")
    answers = await asyncio.gather(*(_rpc(two, "SendMessage", params) for _ in range(3)))
    ids = {a["result"]["task"]["id"] for a in answers if "result" in a}
    assert len(ids) == 1, answers
    assert all(a["error"]["data"]["status"] == 409 for a in answers if "error" in a), answers
    await QueueRunner(two).run_until_idle()  # a replayed accept may send its message again: still one run
    runs = [name for name in await _blobs() if name.startswith("runs/") and name.count("/") == 1]
    assert len(runs) == 1, runs
    task = (await _rpc(two, "GetTask", {"id": ids.pop()}))["result"]
    assert await _turns(two, task["contextId"]) == 1


def _queued_params(text: str) -> dict[str, Any]:
    return {"message": _message(text), "configuration": {"returnImmediately": True}}


# -- a lost race's leftover ------------------------------------------------------------------------


async def test_an_answer_that_lost_its_race_is_never_read_as_the_tasks_turn(
    two: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another instance answers the task's request through the thread route between the A2A
    answer's save of ``{task}.2`` and its pointer swap, and the loser's cleanup delete of that
    checkpoint fails (the sweep removes it later). Until then ``{task}.2`` is there, on the
    task's thread, parented on ``{task}.1``: a task read must still not take it for a turn
    of the task, whether the task's first turn is among the thread's recent checkpoints or not."""
    await storage_client.close_all()
    await run_queue.close_all()
    other = Instance()
    with write_faults.installed(monkeypatch) as faults, separate_instances(monkeypatch):
        asked = await _task(two, "approval, then a lost race")
        pending, context = _pending(asked), asked["contextId"]

        async def rival() -> None:  # another instance's answer, through the thread route
            with other.active():
                answered = await two.request(
                    "POST",
                    f"/api/threads/{context}/runs",
                    json_body={"responses": {pending: "via http"}},
                    headers={"x-caller": ALICE},
                )
                assert answered.status == 200, await answered.body()
            faults.arm("checkpoint.delete", "outage")  # the loser's cleanup of its checkpoint fails

        armed = faults.arm("thread.pointer.replace", "rival", rival=rival)
        lost = await _rpc(two, "SendMessage", {"message": _answer(asked["id"], {pending: "via a2a"})})
        faults.disarm()
        assert armed.hits, "the answer never swapped the pointer: the test tests nothing"
        assert "error" in lost, lost
        leftover = f"{asked['id']}.2"
        assert f"checkpoints/{leftover}.json" in await _blobs(), "the cleanup did not fail"
        now = (await _rpc(two, "GetTask", {"id": asked["id"]}))["result"]
        assert now["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", now
        for n in range(10):  # the thread's pointer keeps the ten newest: the task's fall out
            await _task(two, f"more {n}", contextId=context)
        later = (await _rpc(two, "GetTask", {"id": asked["id"]}))["result"]
        assert later == now, later
    await storage_client.close_all()
    await run_queue.close_all()


async def test_a_streamed_task_that_lost_its_race_is_not_read_back_as_completed(
    two: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream names its task before the turn commits; another instance commits first and
    the loser's cleanup delete fails. The stream ends failed, and the task must not be read
    back as completed from the checkpoint its turn left: it never committed."""
    await storage_client.close_all()
    await run_queue.close_all()
    other = Instance()
    with write_faults.installed(monkeypatch) as faults, separate_instances(monkeypatch):
        context = (await _task(two, "a context"))["contextId"]

        async def rival() -> None:  # another instance's turn on the same context
            with other.active():
                answered = await two.request(
                    "POST", f"/api/threads/{context}/runs", json_body={"messages": "rival"}, headers={"x-caller": ALICE}
                )
                assert answered.status == 200, await answered.body()
            faults.arm("checkpoint.delete", "outage")

        armed = faults.arm("thread.pointer.replace", "rival", rival=rival)
        events = await _stream(two, "SendStreamingMessage", {"message": _message("I lose", contextId=context)})
        faults.disarm()
        assert armed.hits, "the turn never swapped the pointer: the test tests nothing"
        task_id = events[0]["result"]["task"]["id"]
        assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_FAILED", events
        assert f"checkpoints/{task_id}.1.json" in await _blobs(), "the cleanup did not fail"
        got = await _rpc(two, "GetTask", {"id": task_id})
        assert "error" in got and got["error"]["code"] == -32001, got
    await storage_client.close_all()
    await run_queue.close_all()


# -- the card ------------------------------------------------------------------------------------


async def test_the_card_behind_a_tls_front_end_names_an_https_endpoint(host: FunctionHost) -> None:
    """In Azure the front end ends TLS and the worker is called over plain HTTP, with the scheme
    the client used in ``X-Forwarded-Proto``: the card must name the endpoint the client reached,
    else an A2A client sends its function key, and every message, over plain HTTP."""
    behind = {"host": "myapp.azurewebsites.net", "x-forwarded-proto": "https"}
    card = await (await host.request("GET", "/api/a2a/default/.well-known/agent-card.json", headers=behind)).json()
    assert card["supportedInterfaces"][0]["url"] == "https://myapp.azurewebsites.net/api/a2a/default"
    local = await (await host.request("GET", "/api/a2a/default/.well-known/agent-card.json")).json()
    assert local["supportedInterfaces"][0]["url"] == "http://127.0.0.1:7071/api/a2a/default"
