"""Conformance: the app driven through the real Python worker library (``azure-functions-runtime``).

Everything else in this suite goes through ``devtools.function_host``, our stand-in for the
host and worker. Here the real worker library indexes the app, starts the HTTP streaming
extension's server and runs the invocations; ``devtools.worker_driver`` sends it what the
host sends (see its docstring for what it does in place of gRPC and the proxy worker).
Storage is a real Azurite.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

if sys.version_info < (3, 13):
    pytest.skip(
        "azure-functions-runtime (the Python worker library) supports Python 3.13+ only",
        allow_module_level=True,
    )

# On 3.13+ a missing azure-functions-runtime (or protobuf) is an import error: the module fails.
import azure_functions_runtime.version
from azure.storage.queue import QueueMessage, TextBase64DecodePolicy, TextBase64EncodePolicy
from azure.storage.queue.aio import QueueClient

from devtools.azurite import Azurite
from devtools.function_host import FunctionHost
from devtools.worker_driver import WorkerDriver, protos
from functions_adapter import housekeeping, queue_triggers
from functions_adapter import wiring as composition
from functions_adapter.settings import Settings
from resumable.background import executor as run_executor
from resumable.background.messages import RunMessage
from tests import recording_workflow

ROOT = Path(__file__).resolve().parents[2]
SUCCESS = protos.StatusResult.Success
FAILURE = protos.StatusResult.Failure

# The contract function_app.py declares: name -> (route, methods, authLevel).
HTTP_FUNCTIONS = {
    "runs": ("runs", {"POST"}, "FUNCTION"),
    "get_run": ("runs/{run_id}", {"GET"}, "FUNCTION"),
    "join_run": ("runs/{run_id}/stream", {"GET"}, "FUNCTION"),
    "cancel_run": ("runs/{run_id}/cancel", {"POST"}, "FUNCTION"),
    "thread_runs": ("threads/{thread_id}/runs", {"POST"}, "FUNCTION"),
    "get_thread": ("threads/{thread_id}", {"GET"}, "FUNCTION"),
    "delete_thread": ("threads/{thread_id}", {"DELETE"}, "FUNCTION"),
    "thread_history": ("threads/{thread_id}/history", {"GET"}, "FUNCTION"),
    "put_thread_metadata": ("threads/{thread_id}/metadata", {"PUT"}, "FUNCTION"),
    "checkpoint_state": ("threads/{thread_id}/checkpoints/{checkpoint_id}/state", {"GET"}, "FUNCTION"),
    "fork_edited": ("threads/{thread_id}/checkpoints/{checkpoint_id}/fork", {"POST"}, "FUNCTION"),
    "get_checkpoint": ("checkpoints/{checkpoint_id}", {"GET"}, "FUNCTION"),
    "responses": ("responses", {"POST"}, "FUNCTION"),
    "get_response": ("responses/{response_id}", {"GET"}, "FUNCTION"),
    "delete_response": ("responses/{response_id}", {"DELETE"}, "FUNCTION"),
    "cancel_response": ("responses/{response_id}/cancel", {"POST"}, "FUNCTION"),
    "response_input_items": ("responses/{response_id}/input_items", {"GET"}, "FUNCTION"),
    "list_threads": ("threads", {"GET"}, "FUNCTION"),
    "list_workflows": ("workflows", {"GET"}, "FUNCTION"),
    "get_workflow": ("workflows/{name}", {"GET"}, "FUNCTION"),
    "console_page": ("console", {"GET"}, "ANONYMOUS"),
    "console_asset": ("console/{asset}", {"GET"}, "ANONYMOUS"),
    "create_conversation": ("conversations", {"POST"}, "FUNCTION"),
    "get_conversation": ("conversations/{conversation_id}", {"GET"}, "FUNCTION"),
    "update_conversation": ("conversations/{conversation_id}", {"POST"}, "FUNCTION"),
    "delete_conversation": ("conversations/{conversation_id}", {"DELETE"}, "FUNCTION"),
    "conversation_items": ("conversations/{conversation_id}/items", {"GET"}, "FUNCTION"),
    "ag_ui": ("ag-ui", {"POST"}, "FUNCTION"),
    "a2a_card": ("a2a/{workflow}/.well-known/agent-card.json", {"GET"}, "FUNCTION"),
    "a2a_rpc": ("a2a/{workflow}", {"POST"}, "FUNCTION"),
    "health": ("health", {"GET"}, "ANONYMOUS"),
    "openapi": ("openapi.json", {"GET"}, "ANONYMOUS"),
}
QUEUE_FUNCTIONS = {"run_in_background": "%RUNS_QUEUE%", "fail_poisoned_run": "%RUNS_QUEUE%-poison"}
MCP_FUNCTIONS = {
    "mcp_run_turn": "run_turn",
    "mcp_get_thread": "get_thread",
    "mcp_start_turn": "start_turn",
    "mcp_get_run": "get_run",
}
TIMER = "sweep_orphan_checkpoints"


@pytest.fixture(params=["unset", "0"])
async def worker(
    request: pytest.FixtureRequest, host: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[WorkerDriver]:
    """A worker initialised as the host initialises it, with the app settings in its environment.

    ``PYTHON_ENABLE_INIT_INDEXING`` is unset or "0": the 3.13 library must index in init and
    stream HTTP regardless (it never reads the setting).
    """
    monkeypatch.setenv("FUNCTIONS_WORKER_RUNTIME", "python")
    monkeypatch.setenv("AzureWebJobsScriptRoot", str(ROOT))
    monkeypatch.delenv("PYTHON_ISOLATE_WORKER_DEPENDENCIES", raising=False)
    if request.param == "unset":
        monkeypatch.delenv("PYTHON_ENABLE_INIT_INDEXING", raising=False)
    else:
        monkeypatch.setenv("PYTHON_ENABLE_INIT_INDEXING", request.param)
    driver = WorkerDriver(ROOT)
    try:  # a start that fails after the worker started its server must still stop it
        await driver.start()
        yield driver
    finally:
        await driver.close()


async def test_init_indexes_every_trigger_and_advertises_the_streaming_server(
    worker: WorkerDriver, host: FunctionHost
) -> None:
    init = worker.init_response
    assert init.result.status == SUCCESS, init.result.exception.message
    assert init.worker_metadata.runtime_name == "python"
    assert init.worker_metadata.runtime_version == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert init.worker_metadata.worker_version == azure_functions_runtime.version.VERSION
    # HttpUri: the streaming extension's server the host forwards requests to.
    assert worker.http_uri.startswith("http://127.0.0.1:")
    assert worker.capabilities.get("RequiresRouteParameters") == "true"
    assert set(worker.capabilities) == {
        "RawHttpBodyBytes",
        "TypedDataCollection",
        "RpcHttpBodyOnly",
        "WorkerStatus",
        "RpcHttpTriggerMetadataRemoved",
        "SharedMemoryDataTransfer",
        "HttpUri",
        "RequiresRouteParameters",
    }

    response = worker.metadata_response
    assert response.result.status == SUCCESS
    assert response.use_default_metadata_indexing is False
    names = sorted(m.name for m in worker.metadata)
    assert names == sorted([*HTTP_FUNCTIONS, *QUEUE_FUNCTIONS, *MCP_FUNCTIONS, TIMER])
    assert len({m.function_id for m in worker.metadata}) == len(names)
    for function in worker.metadata:
        assert function.language == "python"
        assert function.directory == str(ROOT)
        assert Path(function.script_file).name == "function_app.py"
        assert dict(function.properties) == {"worker_indexed": "True"}
        # Every trigger binding is reported in both forms, and they agree.
        raw = {b["name"]: b for b in worker.bindings(function.name)}
        assert set(raw) == set(function.bindings)
        for name, info in function.bindings.items():
            assert info.type == raw[name]["type"]
            direction = {"IN": protos.BindingInfo.Direction.Value("in"), "OUT": protos.BindingInfo.out}
            assert info.direction == direction[raw[name]["direction"]]

    routes = {f.name: (f.route, set(f.methods), f.auth_level) for f in worker.http_functions()}
    assert routes == HTTP_FUNCTIONS
    # Our in-process host must route exactly as the real worker's metadata says.
    ours = {r.name: (set(r.methods), r.auth_level, r.pattern.pattern) for r in host.routes}
    assert ours == {f.name: (set(f.methods), f.auth_level, f.pattern.pattern) for f in worker.http_functions()}

    for name, queue in QUEUE_FUNCTIONS.items():
        (trigger,) = [b for b in worker.bindings(name) if b["direction"] == "IN"]
        assert trigger["type"] == "queueTrigger"
        assert trigger["queueName"] == queue  # the host resolves %RUNS_QUEUE%, not the worker
        assert trigger["connection"] == "AzureWebJobsStorage"
        assert trigger == host.triggers[name].binding
    (timer,) = worker.bindings(TIMER)
    assert timer["type"] == "timerTrigger"
    assert timer["schedule"] == "0 17 * * * *"
    assert timer["runOnStartup"] is False
    assert timer == host.triggers[TIMER].binding


async def test_http_routes_through_the_worker_server(worker: WorkerDriver, host: FunctionHost) -> None:
    async with worker.http("GET", "/api/health") as call:
        assert call.response.status == 200
        health = await call.response.json()
    assert (await call.invocation).result.status == SUCCESS
    assert health["status"] == "ok"
    assert health == await (await host.request("GET", "/api/health")).json()

    async with worker.http("POST", "/api/runs", json_body={"messages": "hello"}) as call:
        assert call.response.status == 200, await call.response.text()
        assert call.response.headers["Content-Type"] == "application/json"
        first = await call.response.json()
    assert (await call.invocation).result.status == SUCCESS
    assert first["previous_checkpoint_id"] is None
    assert "turn 1" in first["messages"][0]["content"]

    body = {"checkpoint_id": first["checkpoint_id"], "messages": "and again"}
    async with worker.http("POST", "/api/runs", json_body=body) as call:
        assert call.response.status == 200, await call.response.text()
        second = await call.response.json()
    assert second["previous_checkpoint_id"] == first["checkpoint_id"]
    assert "turn 2" in second["messages"][0]["content"]
    assert '"hello"' in second["messages"][0]["content"]  # resumed from the first turn's checkpoint
    store = composition.build_service(Settings.from_env()).store
    saved = await store.load(second["checkpoint_id"])  # in Azurite, not just in the response
    assert saved.previous_checkpoint_id == first["checkpoint_id"]

    thread_id = f"conf-{uuid.uuid4().hex[:8]}"
    async with worker.http("POST", f"/api/threads/{thread_id}/runs", json_body={"messages": "on a thread"}) as call:
        assert call.response.status == 200, await call.response.text()
        turn = await call.response.json()
    async with worker.http("GET", f"/api/threads/{thread_id}") as call:
        assert call.response.status == 200, await call.response.text()
        thread = await call.response.json()
    assert thread["thread_id"] == thread_id  # arrived through RpcHttp.params → request.path_params
    assert thread["checkpoint_id"] == turn["checkpoint_id"]
    assert thread["turns"] == 1

    # Without the route parameters in the invocation the function sees none: the URL the
    # worker's catch-all route received ("/{path:path}") does not fill request.path_params.
    async with worker.http("GET", f"/api/threads/{thread_id}", send_route_params=False) as call:
        assert call.response.status == 400
        assert "thread_id must be" in (await call.response.json())["error"]["message"]

    # An A2A card: a route template with a dotted segment, its {workflow} from the route params,
    # and the card's endpoint built from the URL the worker saw.
    async with worker.http("GET", "/api/a2a/default/.well-known/agent-card.json") as call:
        assert call.response.status == 200, await call.response.text()
        card = await call.response.json()
    assert (await call.invocation).result.status == SUCCESS
    assert card["name"] == "default"
    assert card["supportedInterfaces"][0]["url"].endswith("/api/a2a/default")

    # Errors look the same through the worker as through our in-process host.
    for method, path in (("GET", "/api/runs/no-such-run"), ("GET", "/api/checkpoints/no-such-checkpoint")):
        async with worker.http(method, path) as call:
            real = (call.response.status, call.response.headers["Content-Type"], await call.response.json())
        assert (await call.invocation).result.status == SUCCESS  # an error response is still a successful invocation
        ours = await host.request(method, path)
        assert real == (ours.status, ours.headers["content-type"], await ours.json())
        assert real[0] == 404


async def test_a_streamed_run_reaches_the_client_while_it_is_still_running(
    recording: FunctionHost, worker: WorkerDriver
) -> None:
    async with worker.http("POST", "/api/runs", json_body={"messages": "setup"}) as call:
        first = await call.response.json()
    body = {"checkpoint_id": first["checkpoint_id"], "messages": "wait here"}
    async with worker.http("POST", "/api/runs", json_body=body, headers={"Accept": "text/event-stream"}) as call:
        assert call.response.status == 200
        assert call.response.headers["Content-Type"].startswith("text/event-stream")
        assert call.response.headers.get("Content-Length") is None
        frame = (await call.response.content.readuntil(b"\n\n")).decode()
        # The tail executor is blocked on RELEASE: the run cannot have finished yet. (A run
        # yields between supersteps, so the frame may arrive before the tail has started.)
        await asyncio.wait_for(recording_workflow.WAITING.wait(), 10)
        assert not recording_workflow.RELEASE.is_set()
        assert recording_workflow.GAVE_UP == []
        assert frame.startswith("id: 1\nevent: output\n")
        assert json.loads(frame.split("data: ", 1)[1])["output"] == "middle saw wait here"
        # The function has returned its StreamingResponse, so the host already has a
        # successful InvocationResponse while the body is still streaming.
        reply = await call.invocation
        assert reply.result.status == SUCCESS
        recording_workflow.RELEASE.set()
        rest = (await call.response.content.read()).decode()
    names = [line.removeprefix("event: ") for line in rest.splitlines() if line.startswith("event: ")]
    assert names == ["output", "done"]
    done = json.loads(rest.rsplit("data: ", 1)[1])
    assert done["previous_checkpoint_id"] == first["checkpoint_id"]


async def test_the_timer_invocation_sweeps_orphans(worker: WorkerDriver, monkeypatch: pytest.MonkeyPatch) -> None:
    async with worker.http("POST", "/api/threads/swept/runs", json_body={"messages": "one"}) as call:
        assert call.response.status == 200, await call.response.text()
    service = composition.build_service(Settings.from_env())
    head = (await service.pointers.read("swept")).checkpoint_id
    orphan = await service.store.load(head)
    orphan.checkpoint_id = "orphan-of-swept"
    await service.store.save(orphan, thread_id="swept")
    monkeypatch.setattr(housekeeping, "ORPHAN_MIN_AGE_SECONDS", -1)  # Azurite cannot age a blob
    assert sorted(await service.store.list_checkpoint_ids(workflow_name="conversation-demo")) == sorted(
        [head, "orphan-of-swept"]
    )

    # The host's timer payload (TimerInfo as JSON) in the trigger binding "timer".
    timer_info = {
        "Schedule": {"AdjustForDST": True},
        "ScheduleStatus": {"Last": "2026-12-03T03:17:00+00:00", "Next": "2026-12-04T03:17:00+00:00"},
        "IsPastDue": False,
    }
    data = protos.TypedData(json=json.dumps(timer_info))
    reply = await worker.invoke(worker.function_id(TIMER), [protos.ParameterBinding(name="timer", data=data)])
    assert reply.result.status == SUCCESS, reply.result.exception.message
    assert reply.HasField("return_value") is False
    assert await service.store.list_checkpoint_ids(workflow_name="conversation-demo") == [head]


async def test_the_mcp_tool_triggers_are_indexed_and_invoked_as_the_mcp_extension_expects(
    worker: WorkerDriver, host: FunctionHost
) -> None:
    for name, tool in MCP_FUNCTIONS.items():
        (trigger,) = worker.bindings(name)  # the trigger alone: the return value is its output
        assert trigger == host.triggers[name].binding
        assert (trigger["type"], trigger["direction"], trigger["name"]) == ("mcpToolTrigger", "IN", "context")
        assert trigger["toolName"] == tool and trigger["description"]
        assert trigger["useResultSchema"] is True  # the function returns the whole CallToolResult
        properties = json.loads(trigger["toolProperties"])
        assert all(set(p) == {"propertyName", "propertyType", "description", "isRequired"} for p in properties)
        (required,) = [p for p in properties if p["isRequired"]]  # the thread or run ID
        assert (required["propertyName"], required["propertyType"]) == (
            "run_id" if tool == "get_run" else "thread_id",
            "string",
        )
        assert json.loads(trigger["outputSchema"])["type"] == "object"

    thread_id = f"mcp-{uuid.uuid4().hex[:8]}"
    # What the extension binds (McpToolTriggerBinding): the trigger value is the tool context
    # serialized as JSON, with mcptoolcontext / mcpsessionid / mcptoolargs as binding data.
    arguments = {"thread_id": thread_id, "message": "through the worker"}
    context = {
        "name": "run_turn",
        "arguments": arguments,
        "sessionid": "session-1",
        "clientinfo": {"name": "mcp", "version": "2.3.0"},
        "transport": {"name": "http", "sessionId": "session-1", "properties": {"headers": {"x-team": "a"}}},
    }
    metadata = {
        "mcptoolcontext": protos.TypedData(json=json.dumps(context)),
        "mcpsessionid": protos.TypedData(string="session-1"),
        "mcptoolargs": protos.TypedData(json=json.dumps(arguments)),
    }
    results = []
    for data in (protos.TypedData(string=json.dumps(context)), protos.TypedData(json=json.dumps(context))):
        reply = await worker.invoke(
            worker.function_id("mcp_run_turn"),
            [protos.ParameterBinding(name="context", data=data)],
            trigger_metadata=metadata,
        )
        assert reply.result.status == SUCCESS, reply.result.exception.message
        assert reply.return_value.WhichOneof("data") == "string"  # ToolReturnValueBinder wants a JSON string
        envelope = json.loads(reply.return_value.string)
        assert envelope["type"] == "call_tool_result"
        results.append(json.loads(envelope["content"]))
    first, second = results
    assert first["isError"] is False and second["isError"] is False
    assert first["content"][0]["text"].startswith('turn 1: you said "through the worker"')
    assert 'Earlier you said: "through the worker"' in second["content"][0]["text"]
    assert second["structuredContent"]["previous_checkpoint_id"] == first["structuredContent"]["checkpoint_id"]
    service = composition.build_service(Settings.from_env())
    assert (await service.pointers.read(thread_id)).checkpoint_id == second["structuredContent"]["checkpoint_id"]

    missing = {**context, "name": "get_thread", "arguments": {"thread_id": f"none-{uuid.uuid4().hex[:8]}"}}
    reply = await worker.invoke(
        worker.function_id("mcp_get_thread"),
        [protos.ParameterBinding(name="context", data=protos.TypedData(string=json.dumps(missing)))],
    )
    assert reply.result.status == SUCCESS  # a refusal is a tool result, not a failed invocation
    refused = json.loads(json.loads(reply.return_value.string)["content"])
    assert refused["isError"] is True and refused["structuredContent"]["error"]["code"] == "thread_not_found"


# -- the queue triggers, invoked as the host invokes them ------------------------------------


def _queue(azurite: Azurite, name: str) -> QueueClient:
    """The run queue as the host's listener reads it (base64 text, its default messageEncoding)."""
    return QueueClient.from_connection_string(
        azurite.connection_string,
        name,
        message_encode_policy=TextBase64EncodePolicy(),
        message_decode_policy=TextBase64DecodePolicy(),
    )


async def _receive(client: QueueClient) -> QueueMessage:
    """Dequeue the one message the test expects, hidden long enough not to be seen twice."""
    (message,) = [m async for m in client.receive_messages(max_messages=32, visibility_timeout=600)]
    return message


def _host_binding(message: QueueMessage, function: str) -> tuple[list[Any], dict[str, Any]]:
    """What the host sends for a queue message: the decoded body as a string binding and the
    trigger metadata (the count as JSON text, the times as JSON-quoted ISO strings)."""

    def when(moment: datetime) -> Any:
        return protos.TypedData(json=json.dumps(moment.isoformat()))

    metadata = {
        "QueueTrigger": protos.TypedData(string=message.content),
        "DequeueCount": protos.TypedData(json=str(message.dequeue_count)),
        "Id": protos.TypedData(string=message.id),
        "PopReceipt": protos.TypedData(string=message.pop_receipt),
        "InsertionTime": when(message.inserted_on),
        "ExpirationTime": when(message.expires_on),
        "NextVisibleTime": when(message.next_visible_on),
        "sys": protos.TypedData(
            json=json.dumps(
                {"MethodName": function, "UtcNow": datetime.now(UTC).isoformat(), "RandGuid": str(uuid.uuid4())}
            )
        ),
    }
    return [protos.ParameterBinding(name="message", data=protos.TypedData(string=message.content))], metadata


@pytest.fixture
def delivered(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The ``func.QueueMessage`` objects the worker built and the app's handlers received."""
    seen: list[Any] = []
    for name in ("handle_message", "handle_poisoned"):
        handler = getattr(queue_triggers, name)

        async def spy(message: Any, handler: Any = handler) -> None:
            seen.append(message)
            await handler(message)

        monkeypatch.setattr(queue_triggers, name, spy)
    return seen


async def _json(worker: WorkerDriver, method: str, path: str, **body: Any) -> tuple[int, Any]:
    async with worker.http(method, path, json_body=body or None) as call:
        return call.response.status, await call.response.json()


async def test_the_queue_trigger_runs_a_background_run_once_however_often_it_is_delivered(
    worker: WorkerDriver, queue_env: str, azurite: Azurite, delivered: list[Any]
) -> None:
    thread_id = f"bg-{uuid.uuid4().hex[:8]}"
    status, first = await _json(worker, "POST", f"/api/threads/{thread_id}/runs", messages="in the foreground")
    assert status == 200, first
    status, accepted = await _json(
        worker, "POST", f"/api/threads/{thread_id}/runs", messages="in the background", background=True
    )
    assert status == 202, accepted
    run_id = accepted["run_id"]

    async with _queue(azurite, queue_env) as client:
        message = await _receive(client)
        assert RunMessage.parse(message.content).run_id == run_id and message.dequeue_count == 1
        bindings, metadata = _host_binding(message, "run_in_background")
        reply = await worker.invoke(worker.function_id("run_in_background"), bindings, trigger_metadata=metadata)
        assert reply.result.status == SUCCESS, reply.result.exception.message
        assert reply.HasField("return_value") is False

        # The worker built the QueueMessage from every field the host sent.
        (got,) = delivered
        assert (got.id, got.get_body(), got.dequeue_count, got.pop_receipt) == (
            message.id,
            message.content.encode(),
            1,
            message.pop_receipt,
        )
        assert (got.insertion_time, got.expiration_time, got.time_next_visible) == (
            message.inserted_on,
            message.expires_on,
            message.next_visible_on,
        )

        status, run = await _json(worker, "GET", f"/api/runs/{run_id}")
        assert status == 200 and run["status"] == "succeeded", run
        assert run["attempts"] == 1 and run["error"] is None
        assert run["result"]["previous_checkpoint_id"] == first["checkpoint_id"]
        assert "turn 2" in run["result"]["messages"][0]["content"]
        status, thread = await _json(worker, "GET", f"/api/threads/{thread_id}")
        assert (thread["turns"], thread["checkpoint_id"]) == (2, run["result"]["checkpoint_id"])
        service = composition.build_service(Settings.from_env())
        checkpoints = sorted(await service.store.list_checkpoint_ids(workflow_name="conversation-demo"))

        # The host lost the message's deletion (an instance died after the run): Azurite
        # delivers the same message again, and the host sends DequeueCount "2".
        await client.update_message(message, visibility_timeout=0)
        again = await _receive(client)
        assert (again.id, again.content, again.dequeue_count) == (message.id, message.content, 2)
        bindings, metadata = _host_binding(again, "run_in_background")
        assert metadata["DequeueCount"].json == "2"
        reply = await worker.invoke(worker.function_id("run_in_background"), bindings, trigger_metadata=metadata)
        assert reply.result.status == SUCCESS, reply.result.exception.message  # the host deletes it now
        assert [m.dequeue_count for m in delivered] == [1, 2]

    # Nothing committed twice: the run record, the thread and the checkpoints are as they were.
    assert await _json(worker, "GET", f"/api/runs/{run_id}") == (200, run)
    assert await _json(worker, "GET", f"/api/threads/{thread_id}") == (200, thread)
    assert sorted(await service.store.list_checkpoint_ids(workflow_name="conversation-demo")) == checkpoints


async def _a2a(worker: WorkerDriver, method: str, params: dict[str, Any]) -> Any:
    """One JSON-RPC call to the default workflow's A2A agent through the worker: always 200."""
    body = {"jsonrpc": "2.0", "id": f"w-{method}", "method": method, "params": params}
    async with worker.http("POST", "/api/a2a/default", json_body=body) as call:
        assert call.response.status == 200, await call.response.text()
        assert call.response.headers["Content-Type"] == "application/json"
        answer = await call.response.json()
    assert (await call.invocation).result.status == SUCCESS
    assert answer["id"] == f"w-{method}"
    return answer


async def test_an_a2a_task_is_sent_run_and_read_through_the_worker(
    worker: WorkerDriver, queue_env: str, azurite: Azurite
) -> None:
    """A2A's JSON-RPC function through the real worker: a SendMessage, its turn (queued, then
    run by the queue trigger as the host delivers it), GetTask, the task's stream and a
    refusal answered as JSON-RPC."""
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "through the worker"}]}
    sent = await _a2a(worker, "SendMessage", {"message": message, "configuration": {"returnImmediately": True}})
    task = sent["result"]["task"]
    assert task["contextId"].startswith("a2a-")
    async with _queue(azurite, queue_env) as client:
        queued = [m async for m in client.receive_messages(max_messages=32, visibility_timeout=600)]
        for delivered in queued:  # a task not finished when answered is a background run: the host runs it
            assert RunMessage.parse(delivered.content).run_id == task["id"]
            bindings, metadata = _host_binding(delivered, "run_in_background")
            reply = await worker.invoke(worker.function_id("run_in_background"), bindings, trigger_metadata=metadata)
            assert reply.result.status == SUCCESS, reply.result.exception.message
    assert queued or task["status"]["state"] == "TASK_STATE_COMPLETED", task

    done = (await _a2a(worker, "GetTask", {"id": task["id"]}))["result"]
    assert (done["id"], done["contextId"]) == (task["id"], task["contextId"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert 'you said "through the worker"' in done["artifacts"][0]["parts"][0]["text"]
    status, thread = await _json(worker, "GET", f"/api/threads/{task['contextId']}")
    assert status == 200 and thread["turns"] == 1  # the context is a thread, with the one turn

    body = {"jsonrpc": "2.0", "id": 9, "method": "SubscribeToTask", "params": {"id": task["id"]}}
    async with worker.http("POST", "/api/a2a/default", json_body=body) as call:
        assert call.response.status == 200
        assert call.response.headers["Content-Type"].startswith("text/event-stream")
        frames = [line for line in (await call.response.text()).splitlines() if line.startswith("data: ")]
    (replayed,) = [json.loads(frame.removeprefix("data: ")) for frame in frames]
    assert replayed["id"] == 9 and replayed["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    refused = await _a2a(worker, "NoSuchMethod", {})
    assert refused["error"]["code"] == -32601


async def test_the_poison_trigger_fails_a_run_that_never_ran_and_a_delivery_that_raises_fails_the_invocation(
    worker: WorkerDriver, queue_env: str, azurite: Azurite, delivered: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, accepted = await _json(worker, "POST", "/api/runs", messages="never run", background=True)
    assert status == 202, accepted
    run_id = accepted["run_id"]
    # The host, after maxDequeueCount failed deliveries: a copy of the body goes to
    # <queue>-poison, the original is deleted, and the poison trigger gets the copy.
    async with _queue(azurite, queue_env) as client, _queue(azurite, f"{queue_env}-poison") as poison:
        message = await _receive(client)
        await poison.create_queue()
        await poison.send_message(message.content)
        await client.delete_message(message)
        moved = await _receive(poison)
    assert RunMessage.parse(moved.content).run_id == run_id and moved.dequeue_count == 1
    bindings, metadata = _host_binding(moved, "fail_poisoned_run")
    reply = await worker.invoke(worker.function_id("fail_poisoned_run"), bindings, trigger_metadata=metadata)
    assert reply.result.status == SUCCESS, reply.result.exception.message
    assert [(m.id, m.get_body()) for m in delivered] == [(moved.id, moved.content.encode())]
    status, run = await _json(worker, "GET", f"/api/runs/{run_id}")
    assert status == 200 and run["status"] == "failed", run
    assert run["error"]["code"] == "delivery_attempts_exhausted"
    assert run["attempts"] == 0 and run["result"] is None

    # A delivery the app cannot complete yet (no record for the run) raises; the worker
    # reports the invocation as failed, which is what makes the host deliver it again.
    monkeypatch.setattr(run_executor, "RECORD_WAIT_SECONDS", 0.2)
    async with _queue(azurite, queue_env) as client:
        await client.send_message("0123456789abcdef")
        orphan = await _receive(client)
    bindings, metadata = _host_binding(orphan, "run_in_background")
    reply = await worker.invoke(worker.function_id("run_in_background"), bindings, trigger_metadata=metadata)
    assert reply.result.status == FAILURE
    assert "Traceback" not in reply.result.exception.message
