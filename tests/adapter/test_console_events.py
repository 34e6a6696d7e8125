"""The executor lifecycle on the wire: ``"events": "all"`` in a run's body adds each superstep
and each executor invocation (with durations, outputs and errors) to its event stream, for
any client, and to a background run's event log. Through the registered functions, on real
Azurite.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from tests.adapter.test_chat_agents import API_KEY, model  # noqa: F401 - the fake model's fixture

LIFECYCLE = {"superstep_started", "superstep_completed", "executor_invoked", "executor_completed", "executor_failed"}


async def _stream(host: FunctionHost, path: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    response = await host.request("POST", path, json_body={**body, "stream": True})
    assert response.status == 200, await response.body()
    return [item async for item in response.events()]


async def test_a_turn_streams_each_superstep_and_executor_when_asked(host: FunctionHost) -> None:
    events = await _stream(host, "/api/threads/live/runs", {"messages": "hello", "events": "all"})
    names = [name for name, _ in events]
    assert names == [
        "superstep_started",
        "executor_invoked",
        "executor_completed",
        "superstep_completed",
        "superstep_started",
        "executor_invoked",
        "output",
        "executor_completed",
        "superstep_completed",
        "done",
    ]
    data = [d for _, d in events]
    assert data[0] == {"iteration": 1}
    assert data[1]["executor_id"] == "memory" and data[1]["iteration"] == 1
    # The memory's input: the turn's messages, as JSON.
    assert data[1]["input"] == [{"role": "user", "content": "hello"}]
    memory_done = data[2]
    assert memory_done["executor_id"] == "memory" and memory_done["iteration"] == 1
    assert memory_done["duration_ms"] >= 0
    # What it sent on: the draft for the responder (a dataclass, rendered as JSON).
    assert memory_done["outputs"] == [{"turn": 1, "text": "hello", "earlier": []}]
    assert data[3]["iteration"] == 1 and data[3]["duration_ms"] >= data[2]["duration_ms"]
    responder_done = data[7]
    assert responder_done["executor_id"] == "responder" and responder_done["iteration"] == 2
    reply = 'turn 1: you said "hello". Earlier you said: nothing yet'
    assert responder_done["outputs"] == [{"role": "assistant", "content": reply}]
    # The final body is the same as without the lifecycle.
    assert data[-1]["messages"] == [{"role": "assistant", "content": reply}]


async def test_without_asking_the_stream_is_as_before(host: FunctionHost) -> None:
    events = await _stream(host, "/api/threads/quiet/runs", {"messages": "hello"})
    assert [name for name, _ in events] == ["output", "done"]
    events = await _stream(host, "/api/runs", {"messages": "hello", "events": "outputs"})
    assert [name for name, _ in events] == ["output", "done"]


async def test_a_failing_executor_streams_its_error_without_a_traceback(recording: FunctionHost) -> None:
    events = await _stream(recording, "/api/runs", {"messages": "fail now", "events": "all"})
    names = [name for name, _ in events]
    assert names[-2:] == ["executor_failed", "error"]
    failed = events[-2][1]
    assert failed["executor_id"] == "tail" and failed["duration_ms"] >= 0
    # The exception's class only: its message and traceback may hold internals (they are logged).
    assert failed["error"] == {"type": "RuntimeError"}
    assert "secret internal detail" not in str(events) and "Traceback" not in str(events)
    # Every executor that ran before it completed, superstep by superstep.
    completed = [d["executor_id"] for n, d in events if n == "executor_completed"]
    assert completed == ["head", "middle"]


async def test_a_json_answer_is_unchanged_by_the_level(host: FunctionHost) -> None:
    response = await host.request("POST", "/api/runs", json_body={"messages": "hello", "events": "all"})
    assert response.status == 200
    assert set(await response.json()) == {
        "checkpoint_id",
        "previous_checkpoint_id",
        "status",
        "messages",
        "outputs",
        "pending_requests",
    }


async def test_an_unknown_level_is_refused(host: FunctionHost) -> None:
    for value in ("everything", ["all"], 1):
        response = await host.request("POST", "/api/runs", json_body={"messages": "hello", "events": value})
        body = await response.json()
        assert (response.status, body["error"]["code"]) == (400, "invalid_request")
        assert body["error"]["details"]["param"] == "events"


async def test_a_background_runs_log_holds_the_lifecycle_when_asked(host: FunctionHost, queue_env: str) -> None:
    accepted = await host.request(
        "POST",
        "/api/threads/later/runs",
        json_body={"messages": "hello", "events": "all"},
        headers={"Prefer": "respond-async"},
    )
    assert accepted.status == 202, await accepted.body()
    run_id = (await accepted.json())["run_id"]
    await QueueRunner(host).run_until_idle()
    joined = await host.request("GET", f"/api/runs/{run_id}/stream")
    names = [name async for name, _ in joined.events()]
    assert [n for n in names if n in LIFECYCLE] == [
        "superstep_started",
        "executor_invoked",
        "executor_completed",
        "superstep_completed",
    ] * 2
    assert "done" in names


@pytest.mark.usefixtures("model")
async def test_agent_executors_lifecycle_renders_as_json_and_holds_no_key(host: FunctionHost) -> None:
    response = await host.request(
        "POST", "/api/threads/agents/runs", json_body={"messages": "hello", "stream": True, "events": "all"}
    )
    assert response.status == 200
    raw = await response.body()
    assert API_KEY.encode() not in raw
    events = [
        (frame.split(b"\n")[1][len(b"event: ") :].decode(), json.loads(frame.split(b"\ndata: ", 1)[1]))
        for frame in raw.strip().split(b"\n\n")
    ]
    completed = [d for n, d in events if n == "executor_completed"]
    assert [d["executor_id"] for d in completed][-1] == "reviewer"
    assert events[-1][0] == "done"
    reply = events[-1][1]["messages"][-1]["content"]
    # The reviewer's outputs, as JSON, hold its reply.
    assert reply in json.dumps(completed[-1]["outputs"])
