"""Background execution under failure: a workflow factory that raises, a join whose run
disappears, a cancel racing a commit in flight, a clock that is wrong, a claim whose answer
was lost. Real Azurite, through the registered queue trigger and the HTTP routes."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import types
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agent_framework import Message

import workflows
from devtools.azurite import Azurite
from devtools.function_host import FunctionHost
from devtools.record_faults import lose_answers
from functions_adapter import wiring
from resumable.base.cancel_safe import wait_for_cleanups
from resumable.base.errors import ConfigurationError
from resumable.checkpoints.blob_store import BlobCheckpointStorage
from resumable.core.resume import TurnInput
from resumable.core.runs import RunRequest
from resumable.core.thread_turns import ThreadRunner
from resumable.threads.pointers import ThreadLocks
from tests import recording_workflow
from tests.adapter.test_background_runs import (
    _accept,
    _checkpoint_ids,
    _deliver,
    _join,
    _lapse_lease,
    _records,
    _running,
    _status,
    _take_message,
)

FACTORY_FAILS = asyncio.Event()


def _build_or_fail() -> Any:
    if FACTORY_FAILS.is_set():
        raise ConfigurationError("MODEL_DEPLOYMENT is required (a setting read by the factory)")
    return recording_workflow.build()


BREAKS = workflows.WorkflowSpec(build=_build_or_fail)


def _head_calls() -> list[tuple[str, str]]:
    return [call for call in recording_workflow.CALLS if call[0] == "head"]


# -- 10. a workflow factory error ------------------------------------------------------------


async def test_a_workflow_factory_error_fails_the_run_as_misconfigured_and_leaks_no_task(
    recording: FunctionHost, queue_env: str, azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(workflows.REGISTRY, "breaks", f"{__name__}:BREAKS")
    monkeypatch.setenv("WORKFLOW", "breaks")
    wiring.workflow_spec.cache_clear()
    FACTORY_FAILS.clear()
    run_id = (await _accept(recording, messages="factory"))["run_id"]  # validated with a working factory
    message = await _take_message(queue_env, azurite)
    FACTORY_FAILS.set()  # the factory's setting is gone by the time the run executes
    before = asyncio.all_tasks()
    try:
        await _deliver(recording, message)  # returns: the message is done with, not retried
    finally:
        FACTORY_FAILS.clear()
    await wait_for_cleanups()
    await asyncio.sleep(0.5)  # longer than the event log's flush period
    assert [task for task in asyncio.all_tasks() - before if not task.done()] == []
    status = await _status(recording, run_id)
    assert status["status"] == "failed" and status["error"]["code"] == "server_misconfigured", status
    assert "MODEL_DEPLOYMENT" not in str(status)
    events = await asyncio.wait_for(_join(recording, run_id), 5)
    assert events[-1][1] == "error" and events[-1][2]["error"]["code"] == "server_misconfigured"


# -- 14. a join whose run disappears ---------------------------------------------------------


async def test_a_join_whose_run_record_disappears_ends_with_run_not_found(
    recording: FunctionHost, queue_env: str
) -> None:
    created = await recording.request("POST", "/api/threads/vanishing/runs", json_body={"messages": "first"})
    assert created.status == 200
    run_id = (await _accept(recording, "/api/threads/vanishing/runs", messages="queued"))["run_id"]
    joined = asyncio.ensure_future(_join(recording, run_id))
    await asyncio.sleep(0.3)
    assert not joined.done()
    deleted = await recording.request("DELETE", "/api/threads/vanishing")
    assert deleted.status in (202, 204), await deleted.body()
    assert await (await _records()).get(run_id) is None
    events = await asyncio.wait_for(joined, 5)
    assert events[-1][1] == "error" and events[-1][2]["error"]["code"] == "run_not_found"


# -- (a) a cancel racing a commit that is already on the wire --------------------------------


@pytest.fixture
async def saves_in_flight(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[asyncio.Event, asyncio.Event]]:
    """Checkpoint uploads wait for ``gate``, and land even if their caller stops waiting
    (as a PUT already sent does). Yields (started, gate)."""
    started, gate = asyncio.Event(), asyncio.Event()
    original = BlobCheckpointStorage._upload_create_only
    landing: set[asyncio.Task[Any]] = set()

    async def in_flight(self: BlobCheckpointStorage, *args: Any, **kwargs: Any) -> Any:
        async def land() -> Any:
            await gate.wait()
            return await original(self, *args, **kwargs)

        task = asyncio.ensure_future(land())
        landing.add(task)
        started.set()
        return await asyncio.shield(task)

    monkeypatch.setattr(BlobCheckpointStorage, "_upload_create_only", in_flight)
    yield started, gate
    gate.set()
    await asyncio.gather(*landing, return_exceptions=True)


async def test_a_cancel_while_the_commit_is_in_flight_reports_the_commit_that_landed(
    recording: FunctionHost, queue_env: str, azurite: Azurite, saves_in_flight: Any
) -> None:
    started, gate = saves_in_flight
    run_id = (await _accept(recording, messages="commit then cancel"))["run_id"]
    delivery = asyncio.ensure_future(_deliver(recording, await _take_message(queue_env, azurite)))
    await asyncio.wait_for(started.wait(), 10)  # past its commit point: the save is on the wire
    assert (await recording.request("POST", f"/api/runs/{run_id}/cancel")).status == 200
    await asyncio.sleep(1.5)  # the attempt's watcher has seen the cancel
    gate.set()
    await asyncio.wait_for(delivery, 10)
    await asyncio.sleep(0.2)
    status = await _status(recording, run_id)
    assert await _checkpoint_ids() == [f"checkpoints/{run_id}.json"]
    assert status["status"] == "succeeded", status  # never "cancelled" beside a committed checkpoint


async def test_a_later_delivery_leaves_a_cancelled_run_alone_while_an_intent_may_still_land(
    recording: FunctionHost, queue_env: str, azurite: Azurite, saves_in_flight: Any
) -> None:
    started, gate = saves_in_flight
    run_id = (await _accept(recording, messages="stall in the commit"))["run_id"]
    message = await _take_message(queue_env, azurite)
    first = asyncio.ensure_future(_deliver(recording, message))
    await asyncio.wait_for(started.wait(), 10)
    records = await _records()
    await _lapse_lease(records, run_id)  # the holder stalls mid-commit past its lease
    assert (await recording.request("POST", f"/api/runs/{run_id}/cancel")).status == 200
    await _deliver(recording, message)  # the message comes back while the save is in flight
    middle = await _status(recording, run_id)
    assert middle["status"] == "running", middle  # not "cancelled": the commit may still land
    gate.set()
    await asyncio.wait_for(first, 10)
    status = await _status(recording, run_id)
    assert await _checkpoint_ids() == [f"checkpoints/{run_id}.json"]
    assert status["status"] == "succeeded" and status["attempts"] == 1, status


# -- (b) lease expiry does not depend on this instance's clock -------------------------------


def _skew_clocks(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Every library module's wall clock runs ``seconds`` ahead (its monotonic clock is fine)."""
    skewed = types.SimpleNamespace(**{name: getattr(time, name) for name in dir(time) if not name.startswith("_")})
    skewed.time = lambda: time.time() + seconds
    for name, module in list(sys.modules.items()):
        if name.startswith("resumable.") and getattr(module, "time", None) is time:
            monkeypatch.setattr(module, "time", skewed)


async def test_an_instance_whose_clock_runs_ahead_does_not_take_over_a_live_lease(
    recording: FunctionHost, queue_env: str, azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id, message, first = await _running(recording, queue_env, azurite, "skewed wait")
    with monkeypatch.context() as patch:
        _skew_clocks(patch, 120)  # the message comes back to an instance two minutes ahead
        second = asyncio.ensure_future(_deliver(recording, message))
        await asyncio.sleep(0.5)
    recording_workflow.RELEASE.set()
    await asyncio.wait_for(asyncio.gather(first, second), 15)
    status = await _status(recording, run_id)
    assert status["status"] == "succeeded" and status["attempts"] == 1, status
    assert _head_calls() == [("head", "skewed wait")]


# -- (c) a claim whose answer was lost --------------------------------------------------------


@pytest.mark.parametrize("error", ["conflict", "unavailable"])
async def test_run_record_writes_whose_answers_are_lost_still_run_once_in_one_delivery(
    recording: FunctionHost, queue_env: str, azurite: Azurite, monkeypatch: pytest.MonkeyPatch, error: str
) -> None:
    run_id = (await _accept(recording, messages="lost answers"))["run_id"]
    message = await _take_message(queue_env, azurite)
    # The claim, the commit intent and the outcome all land, and their callers hear otherwise.
    with lose_answers(monkeypatch, "runs/", name=run_id, times=3, error=error) as hits:
        await _deliver(recording, message)
    assert len(hits.writes) == 3
    # Done in this one delivery: a claim it took for another holder's would have left the
    # run to a later delivery, once the lease lapsed.
    status = await _status(recording, run_id)
    assert status["status"] == "succeeded" and status["attempts"] == 1, status
    assert _head_calls() == [("head", "lost answers")]


# -- structured lifetimes: a delivery cancelled mid-run -------------------------------------


async def test_a_cancelled_delivery_leaves_no_task_behind_and_the_next_delivery_runs_it(
    recording: FunctionHost, queue_env: str, azurite: Azurite
) -> None:
    before = asyncio.all_tasks()
    run_id, message, delivery = await _running(recording, queue_env, azurite, "cancelled delivery wait")
    delivery.cancel()  # the host gives up on the invocation (a timeout, a shutdown)
    with pytest.raises(asyncio.CancelledError):
        await delivery
    await wait_for_cleanups()
    await asyncio.sleep(0.5)
    assert [task for task in asyncio.all_tasks() - before if not task.done()] == []
    stored = await (await _records()).get(run_id)
    assert stored is not None and stored.value.status == "running"
    assert stored.value.lease is not None and stored.value.lease.seconds == 0  # released: no wait
    recording_workflow.RELEASE.set()
    await _deliver(recording, message)
    status = await _status(recording, run_id)
    assert status["status"] == "succeeded" and status["attempts"] == 2, status


# -- a thread turn that loses its commit to another instance's turn ---------------------------


async def test_a_thread_turn_that_loses_its_commit_runs_again_on_the_new_head(
    recording: FunctionHost, queue_env: str, azurite: Azurite
) -> None:
    path = "/api/threads/raced/runs"
    assert (await recording.request("POST", path, json_body={"messages": "first"})).status == 200
    run_id = (await _accept(recording, path, messages="raced wait"))["run_id"]
    delivery = asyncio.ensure_future(_deliver(recording, await _take_message(queue_env, azurite)))
    await asyncio.wait_for(recording_workflow.WAITING.wait(), 10)
    # Another instance (its own locks) commits a turn on the thread meanwhile.
    service = wiring.build_service(wiring.load_settings())
    other = ThreadRunner(service, "raced", ThreadLocks())
    elsewhere = json.loads(
        await other.run_to_json(
            RunRequest(None, TurnInput(messages=[Message("user", ["elsewhere"])]), stream=False, origin="api")
        )
    )
    recording_workflow.RELEASE.set()
    await asyncio.wait_for(delivery, 15)
    status = await _status(recording, run_id)
    assert status["status"] == "succeeded" and status["attempts"] == 2, status
    info = await (await recording.request("GET", f"/api/checkpoints/{status['result']['checkpoint_id']}")).json()
    assert info["previous_checkpoint_id"] == elsewhere["checkpoint_id"]  # ran again on the new head
    stored = await (await _records()).get(run_id)
    assert stored is not None and len(stored.value.commits) == 1  # the lost attempt's intent was retracted
