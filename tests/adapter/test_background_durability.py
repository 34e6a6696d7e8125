"""Background turns with ``superstep`` durability: progress after each superstep, recovery
from it, a hand-on near the time budget, and nothing left behind (issue 41).

Against real Azurite (blob + queue), through the registered functions, with the 21-superstep
loop workflow (``tests/loop_workflow.py``: a start superstep, then one per step).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import ResourceNotFoundError

import workflows
from bench import loop_workflow
from bench.crash_drill import read_stream
from devtools.azurite import Azurite
from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from functions_adapter import wiring
from functions_adapter import wiring as composition
from functions_adapter.settings import Settings
from resumable.background.drain import RecordNotReady
from resumable.background.records import RunRecords
from tests.adapter.test_background_runs import _deliver, _take_message

ASYNC = {"Prefer": "respond-async"}
STEPS = 20


@pytest.fixture
def loop(host: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FunctionHost]:
    monkeypatch.setitem(workflows.REGISTRY, "loop", "bench.loop_workflow:SPEC")
    monkeypatch.setitem(workflows.REGISTRY, "loop-durable", "bench.loop_workflow:SUPERSTEP_SPEC")
    monkeypatch.setenv("WORKFLOW", "loop")
    loop_workflow.CALLS.clear()
    loop_workflow.ON_STEP.clear()
    monkeypatch.setattr(loop_workflow, "STEP_SECONDS", [0.0])
    composition.workflow_spec.cache_clear()
    yield host
    composition.workflow_spec.cache_clear()


async def _accept(host: FunctionHost, path: str, **body: Any) -> str:
    response = await host.request("POST", path, json_body=body, headers=ASYNC)
    assert response.status == 202, await response.body()
    return (await response.json())["run_id"]


async def _status(host: FunctionHost, run_id: str) -> dict[str, Any]:
    response = await host.request("GET", f"/api/runs/{run_id}")
    assert response.status == 200
    return await response.json()


async def _names(prefix: str) -> list[str]:
    container = wiring.container_for(wiring.load_settings())
    try:
        return [b.name async for b in container.list_blobs(name_starts_with=prefix)]
    except ResourceNotFoundError:
        return []


def _step_outputs(events: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    return [data["output"] for _, name, data in events if name == "output"]


async def _uninterrupted(host: FunctionHost, runner: QueueRunner, path: str) -> dict[str, Any]:
    run_id = await _accept(host, path, messages=f"loop {STEPS}")
    await runner.run_until_idle()
    status = await _status(host, run_id)
    assert status["status"] == "succeeded", status
    loop_workflow.CALLS.clear()
    return status["result"]


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    return {k: result[k] for k in ("status", "messages", "outputs", "pending_requests")}


async def test_a_superstep_turn_gives_the_turn_result_and_leaves_no_progress(loop: FunctionHost) -> None:
    runner = QueueRunner(loop)
    expected = await _uninterrupted(loop, runner, "/api/threads/plain/runs")
    run_id = await _accept(loop, "/api/threads/durable/runs", messages=f"loop {STEPS}", durability="superstep")
    await runner.run_until_idle()
    status = await _status(loop, run_id)
    assert status["status"] == "succeeded" and status["attempts"] == 1
    assert _comparable(status["result"]) == _comparable(expected)
    assert list(range(1, STEPS + 1)) == loop_workflow.CALLS
    assert [n for n in await _names(f"runs/{run_id}/") if "/progress-" in n] == []
    history = await (await loop.request("GET", "/api/threads/durable/history")).json()
    assert len(history["checkpoints"]) == 1  # one commit for the turn, whatever progress it saved


async def test_the_request_field_is_validated(loop: FunctionHost) -> None:
    response = await loop.request(
        "POST", "/api/runs", json_body={"messages": "loop 2", "durability": "forever"}, headers=ASYNC
    )
    assert response.status == 400
    assert "durability" in (await response.json())["error"]["message"]


async def test_an_attempt_stopped_mid_run_is_continued_from_its_last_superstep(
    loop: FunctionHost, azurite: Azurite
) -> None:
    """A delivery cancelled at step 12 (an instance recycled) leaves progress; the next
    delivery continues from it: steps 1-11 run once, step 12 at most twice, one commit, and
    the output equals an uninterrupted run's."""
    runner = QueueRunner(loop)
    expected = await _uninterrupted(loop, runner, "/api/threads/plain/runs")
    stopped = asyncio.Event()

    async def stop_at_12(step: int) -> None:
        if step == 12 and not stopped.is_set():
            stopped.set()
            await asyncio.Event().wait()  # held here until the delivery is cancelled

    loop_workflow.ON_STEP.append(stop_at_12)
    run_id = await _accept(loop, "/api/threads/crash/runs", messages=f"loop {STEPS}", durability="superstep")
    message = await _take_message(wiring.load_settings().runs_queue, azurite)
    delivery = asyncio.ensure_future(_deliver(loop, message))
    await asyncio.wait_for(stopped.wait(), 20)
    delivery.cancel()
    with pytest.raises(BaseException):  # noqa: B017 - cancelled, or handed back to the queue
        await delivery
    progress = [n for n in await _names(f"runs/{run_id}/") if "/progress-" in n]
    assert progress == [f"runs/{run_id}/progress-1.bin"]

    await _deliver(loop, message)  # the redelivery
    status = await _status(loop, run_id)
    assert status["status"] == "succeeded" and status["attempts"] == 2, status
    assert _comparable(status["result"]) == _comparable(expected)
    runs = Counter(loop_workflow.CALLS)
    assert all(runs[step] == 1 for step in range(1, STEPS + 1) if step != 12), runs
    assert runs[12] <= 2
    assert [n for n in await _names(f"runs/{run_id}/") if "/progress-" in n] == []
    history = await (await loop.request("GET", "/api/threads/crash/history")).json()
    assert len(history["checkpoints"]) == 1

    events = await read_stream(loop, run_id)
    assert _step_outputs(events) == [f"step {n} of {STEPS} (done {n})" for n in range(1, STEPS + 1)]
    markers = [(event_id, name) for event_id, name, _ in events if name in ("restarted", "resumed")]
    assert [name for _, name in markers] == ["restarted", "resumed"]


async def test_a_turn_durability_run_starts_over_after_the_same_stop(loop: FunctionHost, azurite: Azurite) -> None:
    """The control: without progress, the redelivery redoes every step."""
    stopped = asyncio.Event()

    async def stop_at_5(step: int) -> None:
        if step == 5 and not stopped.is_set():
            stopped.set()
            await asyncio.Event().wait()

    loop_workflow.ON_STEP.append(stop_at_5)
    run_id = await _accept(loop, "/api/threads/control/runs", messages="loop 6")
    message = await _take_message(wiring.load_settings().runs_queue, azurite)
    delivery = asyncio.ensure_future(_deliver(loop, message))
    await asyncio.wait_for(stopped.wait(), 20)
    delivery.cancel()
    with pytest.raises(BaseException):  # noqa: B017
        await delivery
    await _deliver(loop, message)
    assert (await _status(loop, run_id))["status"] == "succeeded"
    assert Counter(loop_workflow.CALLS)[1] == 2


@pytest.mark.parametrize("path", ["/api/threads/long/runs", "/api/runs"])
async def test_a_run_longer_than_its_budget_is_handed_on_and_commits_once(
    loop: FunctionHost, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """Each step takes 0.05 s and an invocation's budget is 0.3 s: the run needs about three
    budgets, finishes over several invocations, commits once, and its stream is one."""
    monkeypatch.setenv("RUN_BUDGET_SECONDS", "0.3")
    loop_workflow.STEP_SECONDS[0] = 0.05
    monkeypatch.setenv("WORKFLOW", "loop-durable")  # the workflow's own default this time
    runner = QueueRunner(loop)
    run_id = await _accept(loop, path, messages=f"loop {STEPS}")
    await runner.run_until_idle(limit_seconds=120)
    status = await _status(loop, run_id)
    assert status["status"] == "succeeded", status
    record = (await RunRecords(wiring.container_for(wiring.load_settings())).get(run_id)).value
    assert record.handoffs >= 2 and status["attempts"] == record.handoffs + 1
    assert list(range(1, STEPS + 1)) == loop_workflow.CALLS  # a hand-on redoes nothing
    assert len(await _names("checkpoints/")) == 1  # one commit, however many invocations
    events = await read_stream(loop, run_id)
    assert _step_outputs(events) == [f"step {n} of {STEPS} (done {n})" for n in range(1, STEPS + 1)]
    assert sum(1 for _, name, _ in events if name == "resumed") == record.handoffs
    ids = [event_id for event_id, _, _ in events]
    assert len(ids) == len(set(ids))
    assert [n for n in await _names(f"runs/{run_id}/") if "/progress-" in n] == []


async def test_a_turn_that_pauses_on_a_request_commits_as_usual_and_keeps_no_progress(loop: FunctionHost) -> None:
    runner = QueueRunner(loop)
    path = "/api/threads/asking/runs"
    run_id = await _accept(loop, path, messages="loop 6 ask", durability="superstep")
    await runner.run_until_idle()
    result = (await _status(loop, run_id))["result"]
    assert result["status"] == "pending_requests" and len(result["pending_requests"]) == 1
    assert len(result["outputs"]) == 5
    assert [n for n in await _names(f"runs/{run_id}/") if "/progress-" in n] == []
    request_id = result["pending_requests"][0]["request_id"]
    answer = await _accept(loop, path, responses={request_id: "yes"}, durability="superstep")
    await runner.run_until_idle()
    answered = (await _status(loop, answer))["result"]
    assert answered["status"] == "idle" and answered["outputs"] == ["approve 6 steps? yes"]
    history = await (await loop.request("GET", "/api/threads/asking/history")).json()
    assert len(history["checkpoints"]) == 2
    assert [n for n in await _names("runs/") if "/progress-" in n] == []


async def test_a_thread_delete_mid_run_removes_its_progress(loop: FunctionHost, azurite: Azurite) -> None:
    stopped = asyncio.Event()

    async def stop_at_4(step: int) -> None:
        if step == 4 and not stopped.is_set():
            stopped.set()
            await asyncio.Event().wait()

    loop_workflow.ON_STEP.append(stop_at_4)
    run_id = await _accept(loop, "/api/threads/deleted/runs", messages="loop 8", durability="superstep")
    message = await _take_message(wiring.load_settings().runs_queue, azurite)
    delivery = asyncio.ensure_future(_deliver(loop, message))
    await asyncio.wait_for(stopped.wait(), 20)
    delivery.cancel()
    with pytest.raises(BaseException):  # noqa: B017
        await delivery
    assert [n for n in await _names(f"runs/{run_id}/") if "/progress-" in n]
    deleted = await loop.request("DELETE", "/api/threads/deleted")
    assert deleted.status in (202, 204), await deleted.body()
    assert await _names(f"runs/{run_id}") == []
    with pytest.raises(RecordNotReady):  # the message comes back: its run is gone, nothing recreated
        await _deliver(loop, message)
    assert await _names(f"runs/{run_id}") == []


async def _execution_log(
    host: FunctionHost, azurite: Azurite, ops: Any, thread: str, mode: str
) -> list[tuple[str, str]]:
    path = f"/api/threads/{thread}/runs"
    assert (await host.request("POST", path, json_body={"messages": "loop 0"})).status == 200
    run_id = await _accept(host, path, messages="loop 9", durability=mode)
    message = await _take_message(wiring.load_settings().runs_queue, azurite)
    ops.reset()
    await _deliver(host, message)
    assert (await _status(host, run_id))["status"] == "succeeded"
    # Time-dependent in either mode: the lease's watcher reads the record once a second, and a
    # run that lasts over one flush period creates its event log (create, the record's HEAD, appends).
    record = f"runs/{run_id}.json"
    return [
        (method, url.split("/", 3)[-1])
        for method, url in ops.log
        if "/events-" not in url and not (method in ("GET", "HEAD") and url.endswith(record))
    ]


async def test_superstep_durability_costs_one_write_per_superstep_and_no_read(
    loop: FunctionHost, azurite: Azurite, ops: Any
) -> None:
    """10 supersteps: 9 progress writes (the last superstep's checkpoint is the commit) and
    one delete at the end; no read on the happy path; everything else as in ``turn``."""
    turn = await _execution_log(loop, azurite, ops, "cost-turn", "turn")
    superstep = await _execution_log(loop, azurite, ops, "cost-superstep", "superstep")
    progress = [(method, name) for method, name in superstep if "/progress-" in name]
    assert Counter(method for method, _ in progress) == {"PUT": 9, "DELETE": 1}
    others = Counter(method for method, name in superstep if "/progress-" not in name)
    assert others == Counter(method for method, _ in turn)


async def test_a_progress_save_that_fails_stops_the_run_at_that_boundary(
    loop: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The framework logs and ignores a failing checkpoint save; the run must not go on
    without its progress. A checkpoint over the size cap fails the run right after the
    superstep whose save failed (no step runs), where ``turn`` durability runs every step and
    fails only at its commit."""
    monkeypatch.setenv("MAX_CHECKPOINT_BYTES", "300")
    runner = QueueRunner(loop)
    turn = await _accept(loop, "/api/runs", messages="loop 4", durability="turn")
    await runner.run_until_idle()
    assert (await _status(loop, turn))["error"]["code"] == "checkpoint_too_large"
    assert loop_workflow.CALLS == [1, 2, 3, 4]
    loop_workflow.CALLS.clear()
    superstep = await _accept(loop, "/api/runs", messages="loop 4", durability="superstep")
    await runner.run_until_idle()
    status = await _status(loop, superstep)
    assert (status["status"], status["error"]["code"]) == ("failed", "checkpoint_too_large")
    assert loop_workflow.CALLS == []
    assert await _names(f"runs/{superstep}/progress-") == []


def test_the_default_budget_leaves_room_under_the_function_timeout() -> None:
    """An invocation hands on before host.json's functionTimeout ends it, with minutes to spare
    for the superstep under way."""
    hours, minutes, seconds = (
        int(part) for part in json.loads(Path("host.json").read_text())["functionTimeout"].split(":")
    )
    timeout = hours * 3600 + minutes * 60 + seconds
    budget = Settings.from_env({"CHECKPOINT_STORAGE": "UseDevelopmentStorage=true"}).run_budget_seconds
    assert budget <= timeout - 300
