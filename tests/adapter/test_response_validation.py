"""Answers to pending requests are checked before the run, exactly as the run checks them.

A computer-use call is answered by a ``computer_tool_result`` with the same call ID that
acknowledges every pending safety check. An answer the run would refuse is a 400 before
anything runs, never a failure halfway through the run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import workflows
from devtools.function_host import FunctionHost
from functions_adapter import wiring as composition
from tests import computer_call_workflow


@pytest.fixture
def computer(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> Iterator[FunctionHost]:
    monkeypatch.setitem(workflows.REGISTRY, "computer", "tests.computer_call_workflow:SPEC")
    monkeypatch.setenv("WORKFLOW", "computer")
    composition.workflow_spec.cache_clear()
    computer_call_workflow.CALLS.clear()
    yield host
    composition.workflow_spec.cache_clear()


def result(call_id: str, acknowledged: list[str]) -> dict:
    return {
        "type": "computer_tool_result",
        "call_id": call_id,
        "acknowledged_safety_checks": [
            {"id": i, "code": "malicious_instructions", "message": "m"} for i in acknowledged
        ],
    }


async def paused(host: FunctionHost) -> tuple[str, str]:
    first = await host.request("POST", "/api/runs", json_body={"messages": "use the computer"})
    body = await first.json()
    assert first.status == 200, body
    [request] = body["pending_requests"]
    return body["checkpoint_id"], request["request_id"]


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (result("call-other", ["check-1"]), "another call's result"),
        (result("call-1", []), "a safety check not acknowledged"),
        ({"type": "text", "text": "clicked"}, "not a computer result at all"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_the_run_would_refuse_is_400_before_the_run(
    computer: FunctionHost, answer: dict, why: str, stream: bool
) -> None:
    checkpoint_id, request_id = await paused(computer)
    response = await computer.request(
        "POST",
        "/api/runs",
        json_body={"checkpoint_id": checkpoint_id, "responses": {request_id: answer}, "stream": stream},
    )
    assert response.status == 400, (why, await response.body())
    assert (await response.json())["error"]["code"] == "invalid_request"
    assert computer_call_workflow.CALLS == []


async def test_a_matching_answer_runs(computer: FunctionHost) -> None:
    checkpoint_id, request_id = await paused(computer)
    response = await computer.request(
        "POST",
        "/api/runs",
        json_body={"checkpoint_id": checkpoint_id, "responses": {request_id: result("call-1", ["check-1"])}},
    )
    assert response.status == 200, await response.body()
    assert (await response.json())["outputs"] == ["used result of call-1"]
    assert computer_call_workflow.CALLS == ["call-1"]
