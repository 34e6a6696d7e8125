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
from pathlib import Path

import pytest

if sys.version_info < (3, 13):
    pytest.skip(
        "azure-functions-runtime (the Python worker library) supports Python 3.13+ only",
        allow_module_level=True,
    )

# On 3.13+ a missing azure-functions-runtime (or protobuf) is an import error: the module fails.
import azure_functions_runtime.version

from devtools.function_host import FunctionHost
from devtools.worker_driver import WorkerDriver, protos
from functions_adapter import maintenance
from functions_adapter import wiring as composition
from functions_adapter.settings import Settings
from tests import recording_workflow

ROOT = Path(__file__).resolve().parents[2]
SUCCESS = protos.StatusResult.Success

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
    "get_checkpoint": ("checkpoints/{checkpoint_id}", {"GET"}, "FUNCTION"),
    "responses": ("responses", {"POST"}, "FUNCTION"),
    "get_response": ("responses/{response_id}", {"GET"}, "FUNCTION"),
    "delete_response": ("responses/{response_id}", {"DELETE"}, "FUNCTION"),
    "cancel_response": ("responses/{response_id}/cancel", {"POST"}, "FUNCTION"),
    "response_input_items": ("responses/{response_id}/input_items", {"GET"}, "FUNCTION"),
    "list_threads": ("threads", {"GET"}, "FUNCTION"),
    "create_conversation": ("conversations", {"POST"}, "FUNCTION"),
    "get_conversation": ("conversations/{conversation_id}", {"GET"}, "FUNCTION"),
    "update_conversation": ("conversations/{conversation_id}", {"POST"}, "FUNCTION"),
    "delete_conversation": ("conversations/{conversation_id}", {"DELETE"}, "FUNCTION"),
    "conversation_items": ("conversations/{conversation_id}/items", {"GET"}, "FUNCTION"),
    "health": ("health", {"GET"}, "ANONYMOUS"),
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
    monkeypatch.setattr(maintenance, "ORPHAN_MIN_AGE_SECONDS", -1)  # Azurite cannot age a blob
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
