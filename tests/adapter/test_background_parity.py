"""A background turn behaves as the same synchronous turn would: one turn factory builds
both, so a fork, an expired thread, a thread being deleted and unanswered requests are
handled alike, and what a synchronous call refuses is refused before the 202."""

from __future__ import annotations

from typing import Any

import pytest

from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from functions_adapter import wiring
from resumable.threads.delete_progress import DeleteProgress

MODES = ["sync", "background"]


async def call(host: FunctionHost, path: str, body: dict[str, Any], mode: str) -> tuple[int, dict[str, Any]]:
    """The turn's outcome as (HTTP status, body): the synchronous answer, or for a background
    run the 202's refusal, else its finished result (200) or error (the run's error body)."""
    headers = {"Prefer": "respond-async"} if mode == "background" else {}
    response = await host.request("POST", path, json_body=body, headers=headers)
    answer = await response.json()
    if mode == "sync" or response.status != 202:
        return response.status, answer
    await QueueRunner(host).run_until_idle()
    status = await (await host.request("GET", f"/api/runs/{answer['run_id']}")).json()
    if status["status"] == "succeeded":
        return 200, status["result"]
    return 202, {"error": status["error"], "status": status["status"]}


async def two_turns(host: FunctionHost, thread: str) -> tuple[str, str]:
    first = await (await host.request("POST", f"/api/threads/{thread}/runs", json_body={"messages": "one"})).json()
    second = await (await host.request("POST", f"/api/threads/{thread}/runs", json_body={"messages": "two"})).json()
    return first["checkpoint_id"], second["checkpoint_id"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_fork_resumes_from_the_named_checkpoint(host: FunctionHost, queue_env: str, mode: str) -> None:
    first, _ = await two_turns(host, "forked")
    status, body = await call(
        host, "/api/threads/forked/runs", {"messages": "again", "from_checkpoint_id": first}, mode
    )
    assert status == 200, body
    assert body["previous_checkpoint_id"] == first
    head = await (await host.request("GET", "/api/threads/forked")).json()
    assert head["checkpoint_id"] == body["checkpoint_id"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_fork_from_another_threads_checkpoint_is_refused_before_anything_runs(
    host: FunctionHost, queue_env: str, mode: str
) -> None:
    theirs, _ = await two_turns(host, "theirs")
    await two_turns(host, "mine")
    status, body = await call(host, "/api/threads/mine/runs", {"messages": "x", "from_checkpoint_id": theirs}, mode)
    assert (status, body["error"]["code"]) == (409, "checkpoint_not_in_thread")


@pytest.mark.parametrize("mode", MODES)
async def test_an_expired_thread_restarts_when_configured(
    host: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setenv("THREAD_EXPIRED", "restart")
    _, head = await two_turns(host, "idle")
    await wiring.build_service(wiring.load_settings()).store.delete(head)  # retention removed it
    status, body = await call(host, "/api/threads/idle/runs", {"messages": "back"}, mode)
    assert status == 200, body
    assert body["thread_created"] is True
    assert body["previous_checkpoint_id"] is None


@pytest.mark.parametrize("mode", MODES)
async def test_an_expired_thread_is_410_when_not_restarting(host: FunctionHost, queue_env: str, mode: str) -> None:
    _, head = await two_turns(host, "idle")
    await wiring.build_service(wiring.load_settings()).store.delete(head)
    status, body = await call(host, "/api/threads/idle/runs", {"messages": "back"}, mode)
    assert (status, body["error"]["code"]) == (410, "thread_expired")


@pytest.mark.parametrize("mode", MODES)
async def test_a_thread_being_deleted_refuses_turns(host: FunctionHost, queue_env: str, mode: str) -> None:
    await two_turns(host, "going")
    pointers = wiring.build_service(wiring.load_settings()).pointers
    head = await pointers.read("going")
    fenced = await pointers.update(lambda p: p.marked_deleting(DeleteProgress(found=True)), current=head)
    assert fenced is not None
    status, body = await call(host, "/api/threads/going/runs", {"messages": "late"}, mode)
    assert (status, body["error"]["code"]) == (409, "thread_busy")


@pytest.mark.parametrize("mode", MODES)
async def test_new_messages_over_unanswered_requests_are_refused(host: FunctionHost, queue_env: str, mode: str) -> None:
    asked = await host.request("POST", "/api/threads/hitl/runs", json_body={"messages": "needs approval"})
    assert asked.status == 200
    assert (await asked.json())["pending_requests"]
    status, body = await call(host, "/api/threads/hitl/runs", {"messages": "ignore that"}, mode)
    assert (status, body["error"]["code"]) == (409, "pending_requests")
