"""A run whose final state this app could not read back is refused at save time.

Before the check, such a checkpoint was written, the next load refused it with 422, and
a thread whose head pointed at it was stuck for good. Now the run answers 500
``checkpoint_not_saveable`` (a workflow bug, not bad input), nothing is written, and a
thread's head stays where it was, so the next turn works.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from azure.storage.blob.aio import ContainerClient

import workflows
from devtools.function_host import FunctionHost
from functions_adapter import wiring as composition


@pytest.fixture
def unsaveable(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> Iterator[FunctionHost]:
    """The function app hosting ``tests/unsaveable_workflow.py``."""
    monkeypatch.setitem(workflows.REGISTRY, "unsaveable", "tests.unsaveable_workflow:SPEC")
    monkeypatch.setenv("WORKFLOW", "unsaveable")
    composition.workflow_spec.cache_clear()
    yield host
    composition.workflow_spec.cache_clear()


async def checkpoint_blobs(container: str) -> set[str]:
    async with ContainerClient.from_connection_string(os.environ["CHECKPOINT_STORAGE"], container) as client:
        if not await client.exists():
            return set()
        return {blob.name async for blob in client.list_blobs(name_starts_with="checkpoints/")}


async def post(host: FunctionHost, path: str, body: dict) -> tuple[int, dict]:
    response = await host.request("POST", path, json_body=body)
    return response.status, await response.json()


@pytest.mark.parametrize("text", ["poison", "unpicklable"])
async def test_a_run_whose_state_cannot_be_read_back_is_500_and_saves_nothing(
    unsaveable: FunctionHost, storage_env: str, text: str
) -> None:
    status, first = await post(unsaveable, "/api/runs", {"messages": "hello"})
    assert status == 200, first
    before = await checkpoint_blobs(storage_env)
    status, body = await post(unsaveable, "/api/runs", {"checkpoint_id": first["checkpoint_id"], "messages": text})
    assert (status, body["error"]["code"]) == (500, "checkpoint_not_saveable")
    message = body["error"]["message"]
    if text == "poison":  # the answer names the class and what to change, as the log does
        assert body["error"]["details"] == {"type": "tests.unsaveable_workflow:Souvenir"}
        assert "tests.unsaveable_workflow:Souvenir" in message
        assert "checkpoint_types" in message and "CHECKPOINT_ALLOWED_TYPES" in message
    else:  # a value that does not pickle: what to keep instead, never the value itself
        assert "cannot be pickled" in message and "JSON-native" in message
        assert "lambda" not in message and "0x" not in message and "details" not in body["error"]
    assert "hello" not in json.dumps(body) and "Traceback" not in message  # no state, no stack
    assert await checkpoint_blobs(storage_env) == before


async def test_a_thread_does_not_move_and_its_next_turn_works(unsaveable: FunctionHost, storage_env: str) -> None:
    status, first = await post(unsaveable, "/api/threads/t-1/runs", {"messages": "hello"})
    assert status == 200, first
    status, body = await post(unsaveable, "/api/threads/t-1/runs", {"messages": "poison"})
    assert (status, body["error"]["code"]) == (500, "checkpoint_not_saveable")
    head = await (await unsaveable.request("GET", "/api/threads/t-1")).json()
    assert (head["checkpoint_id"], head["turns"]) == (first["checkpoint_id"], 1)

    status, third = await post(unsaveable, "/api/threads/t-1/runs", {"messages": "still here"})
    assert status == 200, third
    assert third["previous_checkpoint_id"] == first["checkpoint_id"]
    assert third["messages"][0]["content"] == "kept 2: still here"
