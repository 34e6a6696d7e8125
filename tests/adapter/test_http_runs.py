"""POST /api/runs and friends, through the functions function_app registers, on Azurite."""

from __future__ import annotations

import importlib.metadata
import json
from typing import Any

import pytest

from devtools.function_host import FunctionHost, HostResponse
from devtools.op_counter import OperationCounter
from functions_adapter.settings import Settings
from functions_adapter.wiring import container_for
from resumable.checkpoints.blob_store import BlobCheckpointStorage
from resumable.checkpoints.codec import CheckpointCodec
from tests import recording_workflow

BODY_KEYS = {"checkpoint_id", "previous_checkpoint_id", "status", "messages", "outputs", "pending_requests"}


async def post(host: FunctionHost, body: Any, *, stream: bool = False, raw: bytes | None = None) -> HostResponse:
    if isinstance(body, dict) and stream:
        body = {**body, "stream": True}
    if raw is not None:
        return await host.request("POST", "/api/runs", body=raw, headers={"content-type": "application/json"})
    return await host.request("POST", "/api/runs", json_body=body)


async def result(response: HostResponse) -> tuple[int, dict[str, Any]]:
    """The final JSON body, from a plain response or from the SSE stream's ``done`` event."""
    if response.is_stream:
        events = [e async for e in response.events()]
        name, data = events[-1]
        assert name in ("done", "error"), events
        return (200 if name == "done" else 500), data
    return response.status, await response.json()


async def turn(host: FunctionHost, text: str, checkpoint_id: str | None = None, **kw: Any) -> dict[str, Any]:
    status, body = await result(await post(host, {"checkpoint_id": checkpoint_id, "messages": text}, **kw))
    assert status == 200, body
    return body


def store() -> BlobCheckpointStorage:
    return BlobCheckpointStorage(container_for(Settings.from_env()), CheckpointCodec())


# -- the conversation ------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_multi_turn_conversation_resumes_from_blob(host: FunctionHost, stream: bool) -> None:
    first = await turn(host, "hello", stream=stream)
    assert set(first) == BODY_KEYS
    assert first["previous_checkpoint_id"] is None
    assert first["status"] == "idle"
    assert first["pending_requests"] == []
    assert first["messages"][0]["role"] == "assistant"
    assert "turn 1" in first["messages"][0]["content"]

    second = await turn(host, "second thing", first["checkpoint_id"], stream=stream)
    assert second["previous_checkpoint_id"] == first["checkpoint_id"]
    reply = second["messages"][0]["content"]
    assert "turn 2" in reply
    assert '"hello"' in reply

    info = await (await host.request("GET", f"/api/checkpoints/{second['checkpoint_id']}")).json()
    assert info["previous_checkpoint_id"] == first["checkpoint_id"]
    assert info["workflow_name"] == "conversation-demo"
    assert info["status"] == "idle"


async def test_two_resumes_from_one_checkpoint_make_two_branches(host: FunctionHost) -> None:
    root = await turn(host, "root")
    left = await turn(host, "left", root["checkpoint_id"])
    right = await turn(host, "right", root["checkpoint_id"])
    assert left["checkpoint_id"] != right["checkpoint_id"]
    assert left["previous_checkpoint_id"] == right["previous_checkpoint_id"] == root["checkpoint_id"]
    assert "turn 2" in left["messages"][0]["content"]
    assert "turn 2" in right["messages"][0]["content"]
    after_left = await turn(host, "more", left["checkpoint_id"])
    assert '"left"' in after_left["messages"][0]["content"]
    assert '"right"' not in after_left["messages"][0]["content"]


async def test_messages_as_a_list_with_a_system_message(host: FunctionHost) -> None:
    body = await turn(
        host,
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],  # type: ignore[arg-type]
    )
    assert '"hi"' in body["messages"][0]["content"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_human_in_the_loop_round_trip(host: FunctionHost, stream: bool) -> None:
    start = await turn(host, "first")
    paused = await turn(host, "I need approval for this", start["checkpoint_id"], stream=stream)
    assert paused["status"] == "pending_requests"
    assert paused["messages"] == []
    [request] = paused["pending_requests"]
    assert request["data"]["turn"] == 2
    assert request["response_type"] == "str"

    refused = await post(host, {"checkpoint_id": paused["checkpoint_id"], "messages": "hello?"}, stream=stream)
    assert refused.status == 409
    error = (await refused.json())["error"]
    assert error["code"] == "pending_requests"
    assert error["details"]["pending_request_ids"] == [request["request_id"]]

    answer = {"checkpoint_id": paused["checkpoint_id"], "responses": {request["request_id"]: "yes, go"}}
    status, done = await result(await post(host, answer, stream=stream))
    assert status == 200, done
    assert done["status"] == "idle"
    assert done["pending_requests"] == []
    assert 'Approval answer: "yes, go"' in done["messages"][0]["content"]
    assert "turn 2" in done["messages"][0]["content"]
    assert done["previous_checkpoint_id"] == paused["checkpoint_id"]


async def test_checkpoint_only_continues_pending_work(host: FunctionHost) -> None:
    paused = await turn(host, "approval please")
    status, body = await result(await post(host, {"checkpoint_id": paused["checkpoint_id"]}))
    assert status == 200, body
    assert body["status"] == "pending_requests"
    assert [r["request_id"] for r in body["pending_requests"]] == [r["request_id"] for r in paused["pending_requests"]]
    assert body["previous_checkpoint_id"] == paused["checkpoint_id"]

    idle = await turn(host, "plain")
    status, body = await result(await post(host, {"checkpoint_id": idle["checkpoint_id"]}))
    assert status == 200
    assert (body["status"], body["messages"]) == ("idle", [])


# -- atomicity and storage cost ----------------------------------------------------


async def test_a_resume_costs_one_blob_read_and_one_blob_write(
    recording: FunctionHost, ops: OperationCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHECKPOINT_CACHE_BYTES", "0")  # a cold instance (test_checkpoint_cache: a warm one)
    first = await turn(recording, "one")
    ops.reset()
    second = await turn(recording, "two", first["checkpoint_id"])
    # Three executors, so three supersteps and four framework checkpoints in memory.
    assert recording_workflow.CALLS[-3:] == [("head", "two"), ("middle", "two"), ("tail", "two")]
    assert dict(ops.counts) == {"GET": 1, "PUT": 1}, ops.log
    assert second["outputs"] == ["middle saw two"]
    assert second["messages"] == [{"role": "assistant", "content": "tail done: two"}]
    names = await store().list_checkpoint_ids(workflow_name=recording_workflow.NAME)
    assert sorted(names) == sorted([first["checkpoint_id"], second["checkpoint_id"]])


async def _saved_ids() -> list[str]:
    return await store().list_checkpoint_ids(workflow_name=recording_workflow.NAME)


async def _put_raw(checkpoint_id: str, data: bytes) -> None:
    s = store()
    await s.ensure_container()
    await s.container.upload_blob(f"checkpoints/{checkpoint_id}.json", data)


async def _tampered(field: str, value: Any, recording: FunctionHost) -> str:
    first = await turn(recording, "setup")
    checkpoint = await store().load(first["checkpoint_id"])
    setattr(checkpoint, field, value)
    checkpoint.checkpoint_id = f"tampered-{field}"
    await store().save(checkpoint)
    return checkpoint.checkpoint_id


ERROR_CASES = {
    "malformed-json": (400, "invalid_request", lambda r: {"raw": b'{"messages": '}),
    "not-utf8": (400, "invalid_request", lambda r: {"raw": b"\xff\xfe{}"}),
    # Found by the fuzzer: json.loads raises a plain ValueError past 4300 digits.
    "huge-integer": (400, "invalid_request", lambda r: {"raw": b'{"messages": ' + b"9" * 5000 + b"}"}),
    "bad-id": (400, "invalid_request", lambda r: {"checkpoint_id": "../../etc/passwd", "messages": "x"}),
    "nothing-to-do": (400, "invalid_request", lambda r: {"stream": False}),
    "responses-without-checkpoint": (400, "invalid_request", lambda r: {"responses": {"a": "b"}}),
    "unknown-field": (400, "invalid_request", lambda r: {"messages": "x", "mesages": "y"}),
    "wrong-role": (400, "invalid_request", lambda r: {"messages": [{"role": "assistant", "content": "x"}]}),
    "not-found": (404, "checkpoint_not_found", lambda r: {"checkpoint_id": "no-such-checkpoint", "messages": "x"}),
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("case", list(ERROR_CASES))
async def test_request_errors(recording: FunctionHost, case: str, stream: bool) -> None:
    status, code, make = ERROR_CASES[case]
    body = make(recording)
    raw = body.pop("raw", None)
    response = await post(recording, body, stream=stream, raw=raw)
    assert response.status == status
    assert not response.is_stream
    error = (await response.json())["error"]
    assert error["code"] == code
    assert error["message"]
    assert recording_workflow.CALLS == []


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    ("field", "value", "status", "code"),
    [
        ("workflow_name", "another-workflow", 409, "checkpoint_incompatible"),
        ("graph_signature_hash", "0" * 64, 409, "checkpoint_incompatible"),
    ],
    ids=["other-workflow", "graph-changed"],
)
async def test_incompatible_checkpoints_never_run_the_input(
    recording: FunctionHost, field: str, value: str, status: int, code: str, stream: bool
) -> None:
    checkpoint_id = await _tampered(field, value, recording)
    recording_workflow.CALLS.clear()
    before = await _saved_ids()
    response = await post(recording, {"checkpoint_id": checkpoint_id, "messages": "new input"}, stream=stream)
    assert response.status == status
    assert (await response.json())["error"]["code"] == code
    assert recording_workflow.CALLS == []
    assert await _saved_ids() == before


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("payload", ["garbled", "blocked-type"])
async def test_unreadable_checkpoints_are_422_and_never_run_the_input(
    recording: FunctionHost, payload: str, stream: bool
) -> None:
    first = await turn(recording, "setup")
    data = CheckpointCodec().encode(await store().load(first["checkpoint_id"]))
    raw = json.loads(data)
    raw["checkpoint_id"] = "evil"
    if payload == "garbled":
        blob = json.dumps(raw).encode()[:-20]
    else:
        # A pickle of os.system("..."): a blocked global in the restricted decoder.
        raw["state"]["x"] = {
            "__pickled__": "gASVJgAAAAAAAACMBXBvc2l4lIwGc3lzdGVtlJOUjAV0b3VjaJSFlFKULg==",
            "__type__": "builtins:int",
        }
        blob = json.dumps(raw).encode()
    await _put_raw("evil", blob)
    recording_workflow.CALLS.clear()
    response = await post(recording, {"checkpoint_id": "evil", "messages": "new input"}, stream=stream)
    assert response.status == 422
    assert (await response.json())["error"]["code"] == "checkpoint_unreadable"
    assert recording_workflow.CALLS == []


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_oversized_body_is_413(host: FunctionHost, monkeypatch: pytest.MonkeyPatch, stream: bool) -> None:
    monkeypatch.setenv("MAX_REQUEST_BYTES", "100")
    response = await post(host, {"messages": "x" * 200}, stream=stream)
    assert response.status == 413
    assert (await response.json())["error"]["code"] == "payload_too_large"


async def test_a_failed_run_is_500_and_saves_nothing(recording: FunctionHost) -> None:
    first = await turn(recording, "setup")
    before = await _saved_ids()
    response = await post(recording, {"checkpoint_id": first["checkpoint_id"], "messages": "please fail"})
    assert response.status == 500
    raw = await response.body()
    assert json.loads(raw)["error"]["code"] == "workflow_failed"
    assert b"secret internal detail" not in raw
    assert b"Traceback" not in raw
    assert await _saved_ids() == before


async def test_a_run_failing_after_the_stream_opened_sends_an_error_event(recording: FunctionHost) -> None:
    first = await turn(recording, "setup")
    before = await _saved_ids()
    response = await post(recording, {"checkpoint_id": first["checkpoint_id"], "messages": "fail"}, stream=True)
    assert response.status == 200
    events = [e async for e in response.events()]
    assert [name for name, _ in events] == ["output", "error"]
    assert events[-1][1]["error"]["code"] == "workflow_failed"
    assert "secret" not in json.dumps(events)
    assert await _saved_ids() == before


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_unreachable_storage_is_503_with_retry_after(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    monkeypatch.setenv(
        "CHECKPOINT_STORAGE",
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;"
        "BlobEndpoint=http://127.0.0.1:9/devstoreaccount1;",
    )
    monkeypatch.setenv("STORAGE_TIMEOUT_SECONDS", "1")
    response = await post(host, {"checkpoint_id": "some-checkpoint", "messages": "x"}, stream=stream)
    assert response.status == 503
    assert response.headers["retry-after"] == "5"
    assert (await response.json())["error"]["code"] == "storage_unavailable"


async def test_misconfigured_storage_is_a_clear_500(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHECKPOINT_STORAGE")
    monkeypatch.delenv("AzureWebJobsStorage", raising=False)
    response = await post(host, {"messages": "x"})
    assert response.status == 500
    assert (await response.json())["error"]["code"] == "server_misconfigured"


# -- streaming -------------------------------------------------------------------


async def test_events_reach_the_client_while_the_run_is_still_going(recording: FunctionHost) -> None:
    first = await turn(recording, "setup")
    response = await post(recording, {"checkpoint_id": first["checkpoint_id"], "messages": "wait"}, stream=True)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = response.events()
    name, data = await anext(events)
    # The tail executor waits for RELEASE (or gives up after 10 s), so a buffered body
    # could only arrive after it gave up.
    assert (name, data["output"]) == ("output", "middle saw wait")
    assert recording_workflow.GAVE_UP == []
    recording_workflow.RELEASE.set()
    rest = [e async for e in events]
    assert [n for n, _ in rest] == ["output", "done"]
    assert rest[-1][1]["previous_checkpoint_id"] == first["checkpoint_id"]


async def test_done_event_carries_the_same_body_as_json(host: FunctionHost) -> None:
    streamed = await post(host, {"messages": "hi"}, stream=True)
    events = [e async for e in streamed.events()]
    name, done = events[-1]
    assert name == "done"
    assert set(done) == BODY_KEYS
    assert events[0] == ("output", {"executor_id": "responder", "message": done["messages"][0]})


async def test_accept_header_selects_streaming(host: FunctionHost) -> None:
    response = await host.request(
        "POST", "/api/runs", json_body={"messages": "hi"}, headers={"Accept": "text/event-stream"}
    )
    assert response.is_stream
    assert [name async for name, _ in response.events()] == ["output", "done"]


# -- other routes ----------------------------------------------------------------


async def test_get_checkpoint_errors(host: FunctionHost) -> None:
    missing = await host.request("GET", "/api/checkpoints/nope")
    assert missing.status == 404
    assert (await missing.json())["error"]["code"] == "checkpoint_not_found"
    bad = await host.request("GET", "/api/checkpoints/a..b")
    assert bad.status == 400


async def test_health_needs_no_storage(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHECKPOINT_STORAGE")
    response = await host.request("GET", "/api/health")
    assert response.status == 200
    body = await response.json()
    assert body["status"] == "ok"
    assert body["agent_framework"] == importlib.metadata.version("agent-framework-core")


def test_routes_and_auth_levels_are_registered_as_documented(host: FunctionHost) -> None:
    table = {(r.name, tuple(sorted(r.methods)), r.auth_level) for r in host.routes}
    assert table == {
        ("runs", ("POST",), "FUNCTION"),
        ("get_run", ("GET",), "FUNCTION"),
        ("join_run", ("GET",), "FUNCTION"),
        ("cancel_run", ("POST",), "FUNCTION"),
        ("thread_runs", ("POST",), "FUNCTION"),
        ("get_thread", ("GET",), "FUNCTION"),
        ("delete_thread", ("DELETE",), "FUNCTION"),
        ("thread_history", ("GET",), "FUNCTION"),
        ("put_thread_metadata", ("PUT",), "FUNCTION"),
        ("get_checkpoint", ("GET",), "FUNCTION"),
        ("checkpoint_state", ("GET",), "FUNCTION"),
        ("fork_edited", ("POST",), "FUNCTION"),
        ("responses", ("POST",), "FUNCTION"),
        ("get_response", ("GET",), "FUNCTION"),
        ("delete_response", ("DELETE",), "FUNCTION"),
        ("cancel_response", ("POST",), "FUNCTION"),
        ("response_input_items", ("GET",), "FUNCTION"),
        ("ag_ui", ("POST",), "FUNCTION"),
        ("a2a_card", ("GET",), "FUNCTION"),
        ("a2a_rpc", ("POST",), "FUNCTION"),
        ("list_threads", ("GET",), "FUNCTION"),
        ("list_workflows", ("GET",), "FUNCTION"),
        ("get_workflow", ("GET",), "FUNCTION"),
        ("console_page", ("GET",), "ANONYMOUS"),
        ("console_asset", ("GET",), "ANONYMOUS"),
        ("create_conversation", ("POST",), "FUNCTION"),
        ("get_conversation", ("GET",), "FUNCTION"),
        ("update_conversation", ("POST",), "FUNCTION"),
        ("delete_conversation", ("DELETE",), "FUNCTION"),
        ("conversation_items", ("GET",), "FUNCTION"),
        ("health", ("GET",), "ANONYMOUS"),
        ("openapi", ("GET",), "ANONYMOUS"),
    }
    queues = {
        name: (t.binding["queueName"], t.binding["connection"])
        for name, t in host.triggers.items()
        if t.binding["type"] == "queueTrigger"
    }
    assert queues == {
        "run_in_background": ("%RUNS_QUEUE%", "AzureWebJobsStorage"),
        "fail_poisoned_run": ("%RUNS_QUEUE%-poison", "AzureWebJobsStorage"),
    }
