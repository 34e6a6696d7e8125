"""Threads: pointer compare-and-swap, reject/enqueue under concurrency, lineage, orphans."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from agent_framework import Message

from devtools.function_host import FunctionHost
from functions_adapter import wiring as composition
from functions_adapter.settings import Settings
from resumable.base.errors import ThreadBusy
from resumable.core.resume import TurnInput
from resumable.core.runs import RunRequest
from resumable.core.thread_turns import ThreadRunner
from resumable.threads.pointers import ThreadLocks
from resumable.threads.sweep import sweep_orphans


async def thread_turn(host: FunctionHost, thread_id: str, body: dict) -> tuple[int, dict]:
    response = await host.request("POST", f"/api/threads/{thread_id}/runs", json_body=body)
    return response.status, await response.json()


async def lineage(service, head_id: str | None) -> list[str]:
    chain = []
    while head_id:
        chain.append(head_id)
        head_id = (await service.store.get_info(head_id)).previous_checkpoint_id
    return chain


async def test_a_thread_remembers_its_head(host: FunctionHost) -> None:
    status, first = await thread_turn(host, "conv-1", {"messages": "hello"})
    assert status == 200
    assert first["previous_checkpoint_id"] is None
    status, second = await thread_turn(host, "conv-1", {"messages": "again"})
    assert status == 200
    assert second["previous_checkpoint_id"] == first["checkpoint_id"]
    assert "turn 2" in second["messages"][0]["content"]

    head = await (await host.request("GET", "/api/threads/conv-1")).json()
    assert head == {
        "thread_id": "conv-1",
        "checkpoint_id": second["checkpoint_id"],
        "turns": 2,
        "recent_checkpoint_ids": [second["checkpoint_id"], first["checkpoint_id"]],
        "metadata": {},
    }


async def test_thread_errors(host: FunctionHost) -> None:
    missing = await host.request("GET", "/api/threads/nobody")
    assert (missing.status, (await missing.json())["error"]["code"]) == (404, "thread_not_found")
    assert (await host.request("GET", "/api/threads/a..b")).status == 400
    status, body = await thread_turn(host, "t1", {"checkpoint_id": "x", "messages": "hi"})
    assert (status, body["error"]["code"]) == (400, "invalid_request")
    status, body = await thread_turn(host, "t1", {"messages": "hi", "multitask": "sometimes"})
    assert status == 400
    status, body = await thread_turn(host, "fresh", {"responses": {"r1": "yes"}})
    assert status == 400


async def test_human_in_the_loop_on_a_thread(host: FunctionHost) -> None:
    _, paused = await thread_turn(host, "hitl", {"messages": "needs approval"})
    [request] = paused["pending_requests"]
    status, refused = await thread_turn(host, "hitl", {"messages": "hello?"})
    assert (status, refused["error"]["code"]) == (409, "pending_requests")
    _, done = await thread_turn(host, "hitl", {"responses": {request["request_id"]: "ok"}})
    assert done["status"] == "idle"
    assert done["previous_checkpoint_id"] == paused["checkpoint_id"]


async def test_streaming_thread_turn_advances_the_pointer(host: FunctionHost) -> None:
    await thread_turn(host, "s", {"messages": "one"})
    response = await host.request("POST", "/api/threads/s/runs", json_body={"messages": "two", "stream": True})
    events = [e async for e in response.events()]
    assert events[-1][0] == "done"
    head = await (await host.request("GET", "/api/threads/s")).json()
    assert head["checkpoint_id"] == events[-1][1]["checkpoint_id"]
    assert head["turns"] == 2


# -- concurrency ---------------------------------------------------------------------

TURNS = 20


@pytest.mark.parametrize("multitask", ["reject", "enqueue"])
async def test_concurrent_turns_through_one_worker(host: FunctionHost, multitask: str) -> None:
    results = await asyncio.gather(
        *(thread_turn(host, "busy", {"messages": f"m{i}", "multitask": multitask}) for i in range(TURNS))
    )
    winners = [body for status, body in results if status == 200]
    losers = [body for status, body in results if status != 200]
    assert all(body["error"]["code"] == "thread_busy" for body in losers)
    service = composition.build_service(Settings.from_env())
    head = await service.pointers.read("busy")
    chain = await lineage(service, head.checkpoint_id)
    assert head.turns == len(winners) == len(chain)
    assert sorted(chain) == sorted(w["checkpoint_id"] for w in winners)
    if multitask == "reject":
        # Turns that find the thread busy fail fast; a turn that starts after the winner
        # committed starts from the new head and may win too. Exactly one winner among
        # turns from the same head is pinned by test_reject_has_exactly_one_winner_per_head.
        assert 1 <= len(winners) < TURNS
    else:
        assert len(winners) == TURNS
        turns = sorted(int(re.search(r"turn (\d+)", w["messages"][0]["content"])[1]) for w in winners)
        assert turns == list(range(1, TURNS + 1))
    print(f"\n[threads] one worker, {multitask}: {len(winners)}/{TURNS} applied, {len(losers)} thread_busy")


def _turn(text: str, multitask: str) -> RunRequest:
    return RunRequest(None, TurnInput(messages=[Message(role="user", contents=[text])]), False, multitask)


@pytest.mark.parametrize("multitask", ["reject", "enqueue"])
async def test_concurrent_turns_across_workers_race_on_the_etag(storage_env: str, multitask: str) -> None:
    """Each runner has its own locks, like separate worker processes: only the ETag decides."""
    service = composition.build_service(Settings.from_env())
    await service.store.ensure_container()
    runners = [ThreadRunner(service, "race", ThreadLocks()) for _ in range(TURNS)]

    async def attempt(i: int) -> dict | None:
        try:
            return json.loads(await runners[i].run_to_json(_turn(f"m{i}", multitask)))
        except ThreadBusy:
            return None

    results = await asyncio.gather(*(attempt(i) for i in range(TURNS)))
    winners = [r for r in results if r is not None]
    head = await service.pointers.read("race")
    chain = await lineage(service, head.checkpoint_id)
    # Exactly one winner per parent, and the chain is exactly the winners: no gaps, no forks.
    parents = [w["previous_checkpoint_id"] for w in winners]
    assert len(parents) == len(set(parents))
    assert sorted(chain) == sorted(w["checkpoint_id"] for w in winners)
    assert head.turns == len(chain)
    # Losers' checkpoints were deleted: only the chain remains.
    assert sorted(await service.store.list_checkpoint_ids(workflow_name="conversation-demo")) == sorted(chain)
    if multitask == "enqueue":
        assert len(winners) == TURNS
    else:
        assert 1 <= len(winners) < TURNS
    print(f"\n[threads] {TURNS} workers, {multitask}: {len(winners)}/{TURNS} applied")


async def test_reject_has_exactly_one_winner_per_head(recording: FunctionHost) -> None:
    """Every turn reads the same head and runs (separate locks: separate workers); then all
    try to commit at once. The ETag lets exactly one through, and only its checkpoint stays."""
    from tests import recording_workflow

    racers = 8
    service = composition.build_service(Settings.from_env())
    await service.store.ensure_container()
    runners = [ThreadRunner(service, "same-head", ThreadLocks()) for _ in range(racers)]

    async def attempt(i: int) -> bytes | None:
        try:
            return await runners[i].run_to_json(_turn(f"wait {i}", "reject"))
        except ThreadBusy:
            return None

    tasks = [asyncio.ensure_future(attempt(i)) for i in range(racers)]
    async with asyncio.timeout(20):
        while sum(1 for executor, _ in recording_workflow.CALLS if executor == "tail") < racers:  # noqa: ASYNC110
            await asyncio.sleep(0.01)  # every turn has read the (empty) head and is running
    recording_workflow.RELEASE.set()
    results = await asyncio.gather(*tasks)
    winners = [json.loads(r) for r in results if r is not None]
    assert len(winners) == 1
    head = await service.pointers.read("same-head")
    assert (head.checkpoint_id, head.turns) == (winners[0]["checkpoint_id"], 1)
    assert await service.store.list_checkpoint_ids(workflow_name=recording_workflow.NAME) == [head.checkpoint_id]


async def test_sweep_orphans_deletes_only_unreachable_thread_checkpoints(host: FunctionHost) -> None:
    await thread_turn(host, "keep", {"messages": "one"})
    await thread_turn(host, "keep", {"messages": "two"})
    service = composition.build_service(Settings.from_env())
    head = await service.pointers.read("keep")
    # An orphan: a thread checkpoint that lost its race and was not cleaned up.
    orphan = await service.store.load(head.checkpoint_id)
    orphan.checkpoint_id = "orphan-1"
    await service.store.save(orphan, thread_id="keep")
    # A checkpoint from /api/runs is not a thread's, so it is never swept.
    assert (await host.request("POST", "/api/runs", json_body={"messages": "x"})).status == 200
    assert await sweep_orphans(service.pointers, service.store, older_than_seconds=60) == []
    assert await sweep_orphans(service.pointers, service.store, older_than_seconds=-1) == ["orphan-1"]
    assert len(await lineage(service, head.checkpoint_id)) == 2
    assert len(await service.store.list_checkpoint_ids(workflow_name="conversation-demo")) == 3


async def test_a_busy_thread_tells_the_caller_when_to_retry(host: FunctionHost) -> None:
    results = await asyncio.gather(
        *(host.request("POST", "/api/threads/rt/runs", json_body={"messages": f"m{i}"}) for i in range(3))
    )
    busy = [r for r in results if r.status == 409]
    assert busy
    assert all(r.headers["retry-after"] == "1" for r in busy)


async def test_a_client_that_disconnects_mid_stream_commits_nothing_and_frees_the_thread(
    recording: FunctionHost,
) -> None:
    from tests import recording_workflow

    assert (await thread_turn(recording, "drop", {"messages": "one"}))[0] == 200
    service = composition.build_service(Settings.from_env())
    before = await service.pointers.read("drop")
    response = await recording.request(
        "POST", "/api/threads/drop/runs", json_body={"messages": "wait for me", "stream": True}
    )
    frames = response.response.body_iterator
    assert b"event: output" in await anext(frames)
    await frames.aclose()  # what the server does when the client goes away
    recording_workflow.RELEASE.set()
    after = await service.pointers.read("drop")
    assert after.checkpoint_id == before.checkpoint_id
    assert await service.store.list_checkpoint_ids(workflow_name=recording_workflow.NAME) == [before.checkpoint_id]
    # The thread is not left locked. Its release runs in the stream's own task, just after the
    # disconnect, so the next turn waits for it (enqueue) rather than racing it; a lock never
    # released would make it time out with 409.
    status, body = await thread_turn(recording, "drop", {"messages": "two", "multitask": "enqueue"})
    assert status == 200
    assert body["previous_checkpoint_id"] == before.checkpoint_id


async def test_the_daily_timer_sweeps_orphans(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    from functions_adapter import housekeeping

    sweep = host.triggers["sweep_orphan_checkpoints"]
    assert sweep.binding["type"] == "timerTrigger"
    assert sweep.binding["schedule"] == "0 17 * * * *"
    await thread_turn(host, "swept", {"messages": "one"})
    service = composition.build_service(Settings.from_env())
    orphan = await service.store.load((await service.pointers.read("swept")).checkpoint_id)
    orphan.checkpoint_id = "orphan-2"
    await service.store.save(orphan, thread_id="swept")
    monkeypatch.setattr(housekeeping, "ORPHAN_MIN_AGE_SECONDS", -1)
    await sweep.handler(None)
    assert await service.store.list_checkpoint_ids(workflow_name="conversation-demo") == [
        (await service.pointers.read("swept")).checkpoint_id
    ]


async def test_an_enqueue_turn_waits_for_a_held_thread_only_as_long_as_configured(
    recording: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that never reads its stream holds the thread; the next turn must not wait forever."""
    from tests import recording_workflow

    monkeypatch.setenv("THREAD_LOCK_WAIT_SECONDS", "1")
    assert (await thread_turn(recording, "held", {"messages": "one"}))[0] == 200
    stalled = await recording.request(
        "POST", "/api/threads/held/runs", json_body={"messages": "wait for me", "stream": True, "multitask": "enqueue"}
    )
    frames = stalled.response.body_iterator
    try:
        assert b"event: output" in await anext(frames)  # then never read again
        # 8 s only catches a hang: the setting asks for 1 s, the old code waited forever.
        status, body = await asyncio.wait_for(
            thread_turn(recording, "held", {"messages": "two", "multitask": "enqueue"}), timeout=8
        )
        assert (status, body["error"]["code"]) == (409, "thread_busy")
    finally:
        recording_workflow.RELEASE.set()
        await frames.aclose()
    status, body = await thread_turn(recording, "held", {"messages": "three", "multitask": "enqueue"})
    assert status == 200, "the thread is free again once the stalled stream ends"
