"""A2A push notifications as signed completion callbacks, through the registered functions,
against real Azurite and a real loopback receiver (``devtools/webhook_receiver.py``): the
A2A body and headers, our signature (verified with the Standard Webhooks library, as the
docs tell a receiver to), the SSRF refusals, the config methods and their owner checks,
and nothing of a config left after its thread's DELETE."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from devtools.webhook_receiver import WebhookReceiver
from functions_adapter import callback_formats, wiring
from tests import recording_workflow
from tests.conftest import CALLBACK_SECRET

ENDPOINT = "/api/a2a/default"


@pytest.fixture
async def push_env(host: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FunctionHost]:
    """Callbacks on (signed, loopback allowed, retried at once), and a trusted principal
    header so that two callers are two origins."""
    monkeypatch.setenv("CALLBACK_SECRET", CALLBACK_SECRET)
    monkeypatch.setenv("CALLBACK_ALLOW_LOCAL_HTTP", "true")
    monkeypatch.setenv("CALLBACK_RETRY_SCHEDULE", "0")
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    monkeypatch.delenv("THREAD_AUTHORIZER", raising=False)
    yield host


def _message(text: str, **fields: Any) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}], **fields}


def _send(text: str, config: dict[str, Any] | None, **message: Any) -> dict[str, Any]:
    configuration: dict[str, Any] = {"returnImmediately": True}
    if config is not None:
        configuration["taskPushNotificationConfig"] = config
    return {"message": _message(text, **message), "configuration": configuration}


async def _rpc(
    host: FunctionHost, method: str, params: Any, caller: str = "alice", endpoint: str = ENDPOINT
) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": "1", "method": method, "params": params}
    response = await host.request("POST", endpoint, json_body=body, headers={"x-caller": caller})
    assert response.status == 200, await response.body()
    return await response.json()


async def _task(host: FunctionHost, params: dict[str, Any], caller: str = "alice") -> dict[str, Any]:
    answer = await _rpc(host, "SendMessage", params, caller)
    assert "result" in answer, answer
    return answer["result"]["task"]


async def _run_record(run_id: str) -> dict[str, Any] | None:
    """The run's record as stored (``runs/<id>.json``), or None once it is gone."""
    blob = wiring.container_for(wiring.load_settings()).get_blob_client(f"runs/{run_id}.json")
    if not await blob.exists():
        return None
    return json.loads(await (await blob.download_blob()).readall())


async def test_a_send_with_a_push_config_delivers_the_final_task_signed_with_its_token(
    push_env: FunctionHost, receiver: WebhookReceiver
) -> None:
    config = {"url": receiver.url, "token": "tok-42", "authentication": {"scheme": "Bearer", "credentials": "s3cr3t"}}
    task = await _task(push_env, _send("push me", config))
    await QueueRunner(push_env).run_until_idle()
    [delivery] = receiver.deliveries
    # Our signature, as on every callback: the Standard Webhooks library verifies it.
    notification = Webhook(CALLBACK_SECRET).verify(delivery.body, delivery.headers)
    assert delivery.verified and delivery.headers["webhook-id"] == f"msg_{task['id']}"
    # A2A's own: the token, the authorization asked for, and a StreamResponse with the task.
    assert delivery.headers["x-a2a-notification-token"] == "tok-42"
    assert delivery.headers["authorization"] == "Bearer s3cr3t"
    pushed = notification["task"]
    assert pushed["id"] == task["id"] and pushed["contextId"] == task["contextId"]
    assert pushed["status"]["state"] == "TASK_STATE_COMPLETED"
    assert 'you said "push me"' in pushed["artifacts"][0]["parts"][0]["text"]
    got = (await _rpc(push_env, "GetTask", {"id": task["id"]}))["result"]
    assert got["artifacts"] == pushed["artifacts"]
    run = await (await push_env.request("GET", f"/api/runs/{task['id']}", headers={"x-caller": "alice"})).json()
    assert run["callback"]["outcome"] == "delivered"
    # The config reads back without its credentials, which rest in the run record only.
    read = (await _rpc(push_env, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": task["id"]}))["result"]
    assert read == {
        "id": task["id"],
        "taskId": task["id"],
        "url": receiver.url,
        "token": "tok-42",
        "authentication": {"scheme": "Bearer"},
    }


@pytest.mark.parametrize("url", ["https://169.254.169.254/latest", "http://127.0.0.1:9/hook", "https://10.0.0.1/x"])
async def test_a_push_url_a_callback_may_not_call_is_refused_and_nothing_runs(
    push_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.delenv("CALLBACK_ALLOW_LOCAL_HTTP")
    context = f"push-{uuid.uuid4().hex[:12]}"
    answer = await _rpc(push_env, "SendMessage", _send("never", {"url": url}, contextId=context))
    assert answer["error"]["code"] == -32602, answer
    assert answer["error"]["data"]["error"]["code"] == "invalid_request"
    assert answer["error"]["data"]["status"] == 400
    assert await QueueRunner(push_env).run_until_idle() == 0  # nothing was queued
    thread = await push_env.request("GET", f"/api/threads/{context}", headers={"x-caller": "alice"})
    assert thread.status == 404


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"url": "URL", "authentication": {"scheme": "Bearer"}}, "both a scheme"),
        ({"url": "URL", "authentication": {"scheme": "Bad Scheme", "credentials": "x"}}, "'scheme'"),
        ({"url": "URL", "token": "a\r\nX-Injected: 1"}, "'token'"),
        ({"url": ""}, "url"),
        ("URL", "must be an object"),
    ],
)
async def test_a_malformed_push_config_is_refused_before_anything_is_queued(
    push_env: FunctionHost, receiver: WebhookReceiver, config: Any, why: str
) -> None:
    config = json.loads(json.dumps(config).replace("URL", receiver.url))
    answer = await _rpc(push_env, "SendMessage", _send("never", config))
    assert answer["error"]["code"] == -32602 and why in answer["error"]["message"], answer
    assert await QueueRunner(push_env).run_until_idle() == 0
    assert receiver.deliveries == []


async def test_configs_are_created_listed_read_and_deleted_on_an_unfinished_task(
    push_env: FunctionHost, receiver: WebhookReceiver
) -> None:
    kept = await _task(push_env, _send("kept", None))  # queued: no runner yet
    dropped = await _task(push_env, _send("dropped", None))
    for task in (kept, dropped):
        config = {"taskId": task["id"], "id": "cfg-1", "url": receiver.url, "token": f"tok-{task['id']}"}
        created = (await _rpc(push_env, "CreateTaskPushNotificationConfig", config))["result"]
        assert created == {**config}
    listed = (await _rpc(push_env, "ListTaskPushNotificationConfigs", {"taskId": kept["id"]}))["result"]
    assert [c["id"] for c in listed["configs"]] == ["cfg-1"]
    unknown = await _rpc(push_env, "GetTaskPushNotificationConfig", {"taskId": kept["id"], "id": "cfg-2"})
    assert unknown["error"]["code"] == -32602
    gone = await _rpc(push_env, "DeleteTaskPushNotificationConfig", {"taskId": dropped["id"], "id": "cfg-1"})
    assert gone == {"jsonrpc": "2.0", "id": "1", "result": None}
    listed = (await _rpc(push_env, "ListTaskPushNotificationConfigs", {"taskId": dropped["id"]}))["result"]
    assert listed == {"configs": []}
    await QueueRunner(push_env).run_until_idle()
    # Only the task that kept its config was pushed, with the token it was given.
    assert [d.json()["task"]["id"] for d in receiver.deliveries] == [kept["id"]]
    assert receiver.deliveries[0].headers["x-a2a-notification-token"] == f"tok-{kept['id']}"
    # A finished task's config cannot change any more: its notification went out.
    late = {"taskId": kept["id"], "url": receiver.url}
    refused = await _rpc(push_env, "CreateTaskPushNotificationConfig", late)
    assert refused["error"]["code"] == -32004 and "finished" in refused["error"]["message"], refused
    refused = await _rpc(push_env, "DeleteTaskPushNotificationConfig", {"taskId": kept["id"], "id": "cfg-1"})
    assert refused["error"]["code"] == -32004, refused


async def test_a_config_created_while_the_task_runs_is_delivered_when_it_finishes(
    callback_env: FunctionHost, receiver: WebhookReceiver
) -> None:
    """Set on a running record (as a cancel request is): the attempt holding the lease
    writes its outcome over it by compare-and-swap, so the finished run keeps the config."""
    endpoint = "/api/a2a/recording"
    async with QueueRunner(callback_env):
        task = (await _rpc(callback_env, "SendMessage", _send("hold wait", None), endpoint=endpoint))["result"]["task"]
        await asyncio.wait_for(recording_workflow.WAITING.wait(), 30)
        working = await _rpc(callback_env, "GetTask", {"id": task["id"]}, endpoint=endpoint)
        assert working["result"]["status"]["state"] == "TASK_STATE_WORKING"
        config = {"taskId": task["id"], "url": receiver.url, "token": "late"}
        created = await _rpc(callback_env, "CreateTaskPushNotificationConfig", config, endpoint=endpoint)
        assert created["result"]["token"] == "late", created
        recording_workflow.RELEASE.set()
        for _ in range(300):
            if receiver.deliveries:
                break
            await asyncio.sleep(0.1)
    [delivery] = receiver.deliveries
    assert delivery.verified and delivery.headers["x-a2a-notification-token"] == "late"
    assert delivery.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_another_origins_task_configs_are_refused(push_env: FunctionHost, receiver: WebhookReceiver) -> None:
    task = await _task(push_env, _send("mine", {"url": receiver.url, "id": "cfg"}), caller="alice")
    calls = [
        ("GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "cfg"}),
        ("ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": "cfg"}),
        ("CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": receiver.url}),
    ]
    for method, params in calls:
        answer = await _rpc(push_env, method, params, caller="bob")
        assert answer["error"]["code"] == -32602, (method, answer)
        assert answer["error"]["data"]["error"]["code"] == "forbidden" and answer["error"]["data"]["status"] == 403
    # Bob's calls changed nothing: Alice's config is there and is delivered.
    mine = (await _rpc(push_env, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "cfg"}))["result"]
    assert mine["url"] == receiver.url
    await QueueRunner(push_env).run_until_idle()
    assert [d.json()["task"]["id"] for d in receiver.deliveries] == [task["id"]]


async def test_a_thread_delete_erases_the_config_and_its_credentials(
    push_env: FunctionHost, receiver: WebhookReceiver
) -> None:
    config = {"url": receiver.url, "token": "tok", "authentication": {"scheme": "Bearer", "credentials": "c-123"}}
    task = await _task(push_env, _send("forget me", config))
    stored = await _run_record(task["id"])
    assert stored is not None and stored["callback_params"]["credentials"] == "c-123"  # where they rest
    await QueueRunner(push_env).run_until_idle()
    deleted = await push_env.request("DELETE", f"/api/threads/{task['contextId']}", headers={"x-caller": "alice"})
    assert deleted.status in (200, 204), await deleted.body()
    assert await _run_record(task["id"]) is None
    answer = await _rpc(push_env, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": task["id"]})
    assert answer["error"]["code"] == -32001, answer  # no such task: its config went with it


async def test_a_format_this_build_does_not_know_gives_the_callback_up_unsent(
    push_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record naming a format no one registered is never sent half-formed (as run.completed)."""
    monkeypatch.setattr(callback_formats, "_FORMATS", {})
    task = await _task(push_env, _send("unrendered", {"url": receiver.url}))
    await QueueRunner(push_env).run_until_idle()
    assert receiver.deliveries == []
    run = await (await push_env.request("GET", f"/api/runs/{task['id']}", headers={"x-caller": "alice"})).json()
    assert run["callback"]["outcome"] == "gave_up" and run["callback"]["reason"] == "server_misconfigured"


async def test_the_card_says_push_notifications(host: FunctionHost) -> None:
    card = await (await host.request("GET", f"{ENDPOINT}/.well-known/agent-card.json")).json()
    assert card["capabilities"]["pushNotifications"] is True


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
async def test_a_blocking_or_streamed_message_with_a_push_config_is_a_background_task_that_pushes(
    push_env: FunctionHost, receiver: WebhookReceiver, method: str
) -> None:
    """A push config is a background run's callback, so a message that carries one runs as a
    background run even without ``returnImmediately``: the blocking send answers the task the
    run ended with, the stream follows the run; either way the run's ID is the task's, and the
    notification arrives once."""
    configuration = {"taskPushNotificationConfig": {"url": receiver.url}}
    params = {"message": _message("push me too"), "configuration": configuration}
    body = {"jsonrpc": "2.0", "id": "1", "method": method, "params": params}
    runner = QueueRunner(push_env)
    runner.start()
    try:
        response = await push_env.request("POST", ENDPOINT, json_body=body, headers={"x-caller": "alice"})
        raw = await response.body()
        # The answer comes once the run is final; its callback is a queue message of its own:
        # stopping the runner before it is handled would leave it invisible to a later drain.
        for _ in range(300):
            if receiver.deliveries:
                break
            await asyncio.sleep(0.1)
    finally:
        await runner.stop()
    if method == "SendMessage":
        task = json.loads(raw)["result"]["task"]
    else:
        frames = [json.loads(line[len(b"data: ") :]) for line in raw.splitlines() if line.startswith(b"data: ")]
        assert "task" in frames[0]["result"], frames
        task = {**frames[0]["result"]["task"], "status": frames[-1]["result"]["statusUpdate"]["status"]}
    assert len(task["id"]) == 32 and not task["id"].startswith("t-"), task  # a run's ID, not a synchronous task's
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert await _run_record(task["id"]) is not None
    [delivery] = receiver.deliveries
    assert Webhook(CALLBACK_SECRET).verify(delivery.body, delivery.headers)["task"]["id"] == task["id"]
