"""A thread's DELETE is a privacy erasure: nothing holding the thread's text survives it,
whatever a background turn in flight does afterwards, whatever a crash leaves behind, and
no warm instance's cache answers for what it deleted. Real Azurite; every assertion reads
storage itself."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from azure.core.exceptions import ResourceNotFoundError, ServiceRequestError
from azure.storage.blob.aio import BlobClient

from devtools.azurite import Azurite
from devtools.function_host import FunctionHost
from functions_adapter import wiring
from resumable.base.cancel_safe import wait_for_cleanups
from resumable.base.errors import CheckpointNotFound
from resumable.storage import layout
from resumable.threads import housekeeping
from resumable.threads.delete import delete_thread
from resumable.threads.housekeeping import run_housekeeping
from resumable.threads.ownership import Caller
from tests import recording_workflow
from tests.adapter.test_background_runs import _accept, _deliver, _take_message
from tests.library.test_checkpoint_cache import other_instance

SECRET = "erase-me-7f3a"


async def _blobs_holding(text: str) -> list[str]:
    """Every blob whose body or metadata contains ``text`` (the whole container, read)."""
    container = wiring.container_for(wiring.load_settings())
    found = []
    async for blob in container.list_blobs(include=["metadata"]):
        try:
            body = await (await container.get_blob_client(blob.name).download_blob()).readall()
        except ResourceNotFoundError:
            continue
        if text.encode() in body or text in str(blob.metadata or {}):
            found.append(blob.name)
    return found


async def _names(prefix: str) -> list[str]:
    container = wiring.container_for(wiring.load_settings())
    return [blob.name async for blob in container.list_blobs(name_starts_with=prefix)]


@pytest.fixture
async def log_creates_in_flight(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[asyncio.Event, asyncio.Event]]:
    """An event log's create waits for ``gate`` at the SDK boundary and then lands, as a
    PUT already on the wire does. Yields (started, gate)."""
    started, gate = asyncio.Event(), asyncio.Event()
    original = BlobClient.create_append_blob

    async def in_flight(self: BlobClient, *args: Any, **kwargs: Any) -> Any:
        started.set()
        await gate.wait()
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(BlobClient, "create_append_blob", in_flight)
    yield started, gate
    gate.set()


async def _background_turn_in_flight(
    host: FunctionHost, queue: str, azurite: Azurite, thread: str
) -> tuple[str, asyncio.Future[Any]]:
    """Accept a background turn carrying ``SECRET`` and deliver it; its last executor waits."""
    run_id = (await _accept(host, f"/api/threads/{thread}/runs", messages=f"{SECRET} wait"))["run_id"]
    delivery = asyncio.ensure_future(_deliver(host, await _take_message(queue, azurite)))
    await asyncio.wait_for(recording_workflow.WAITING.wait(), 10)
    return run_id, delivery


async def _finish(delivery: asyncio.Future[Any]) -> None:
    recording_workflow.RELEASE.set()
    await asyncio.wait({delivery}, timeout=20)
    assert delivery.done()
    delivery.exception()  # the run's record is gone: the delivery may end either way
    await wait_for_cleanups()


async def _delete_elsewhere(thread_id: str) -> None:
    """DELETE by a second instance: its own service and caches on the same container."""
    other = other_instance()
    done = await delete_thread(
        other.store.container, other.pointers, thread_id, store=other.store, caller=Caller.MAINTENANCE
    )
    assert done.finished


@pytest.mark.parametrize("deleter", ["this instance", "another instance"])
async def test_an_event_log_created_after_the_delete_removes_itself(
    recording: FunctionHost, queue_env: str, azurite: Azurite, log_creates_in_flight: Any, deleter: str
) -> None:
    """The create of the run's log is on the wire when DELETE runs, and lands after its 204:
    the writer finds the run's record gone and deletes the log it made; nothing of the
    thread's text is left anywhere in the container."""
    started, gate = log_creates_in_flight
    run_id, delivery = await _background_turn_in_flight(recording, queue_env, azurite, "erased")
    await asyncio.wait_for(started.wait(), 10)
    if deleter == "this instance":
        assert (await recording.request("DELETE", "/api/threads/erased")).status == 204
    else:
        await _delete_elsewhere("erased")
    assert await _blobs_holding(SECRET) == []
    gate.set()  # the log's create lands after the delete
    await _finish(delivery)
    assert await _names(layout.run_events_prefix(run_id)) == []
    assert await _blobs_holding(SECRET) == []
    assert (await recording.request("DELETE", "/api/threads/erased")).status == 404


async def test_a_log_whose_run_check_meets_an_outage_gets_no_text_until_a_check_succeeds(
    recording: FunctionHost,
    queue_env: str,
    azurite: Azurite,
    log_creates_in_flight: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The log's create lands after the delete and the writer's read of the run's record meets
    an outage: nothing is appended to the log until a read succeeds, and that read (at the next
    flush) finds the record gone and deletes the log."""
    started, gate = log_creates_in_flight
    original, failed = BlobClient.exists, []

    async def first_fails(self: BlobClient, *args: Any, **kwargs: Any) -> Any:
        if self.blob_name.startswith(layout.RUNS) and not failed:
            failed.append(self.blob_name)
            raise ServiceRequestError("connection reset")
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(BlobClient, "exists", first_fails)
    run_id, delivery = await _background_turn_in_flight(recording, queue_env, azurite, "outage")
    await asyncio.wait_for(started.wait(), 10)
    assert (await recording.request("DELETE", "/api/threads/outage")).status == 204
    gate.set()
    await _finish(delivery)
    assert failed == [layout.record_blob(layout.RUNS, run_id)]
    assert await _names(layout.run_events_prefix(run_id)) == []
    assert await _blobs_holding(SECRET) == []


async def test_a_delete_removes_a_thread_s_event_logs_even_without_their_run_record(
    recording: FunctionHost, queue_env: str, azurite: Azurite
) -> None:
    """A delete that crashed after a run's record went leaves its log with no record to name
    the thread: the log says whose it is (its metadata), so the next DELETE still finds it."""
    run_id, delivery = await _background_turn_in_flight(recording, queue_env, azurite, "crashed")
    container = wiring.container_for(wiring.load_settings())
    for _ in range(100):  # the first flush creates the log
        if await _names(layout.run_events_prefix(run_id)):
            break
        await asyncio.sleep(0.05)
    await container.delete_blob(layout.record_blob(layout.RUNS, run_id))  # as far as the crash got
    assert (await recording.request("DELETE", "/api/threads/crashed")).status == 204
    await _finish(delivery)
    assert await _blobs_holding(SECRET) == []


async def test_housekeeping_removes_event_logs_whose_run_record_is_gone(
    recording: FunctionHost, queue_env: str, azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a crash leaves (a log whose record is gone, whoever's it was) goes at the next
    housekeeping pass; a log whose run still has its record stays."""
    monkeypatch.setattr(housekeeping, "EVENT_PAGE", 1)  # the record and its log on different pages
    run_id, delivery = await _background_turn_in_flight(recording, queue_env, azurite, "kept")
    for _ in range(100):
        if await _names(layout.run_events_prefix(run_id)):
            break
        await asyncio.sleep(0.05)
    await _finish(delivery)
    kept_logs = await _names(layout.run_events_prefix(run_id))
    container = wiring.container_for(wiring.load_settings())
    orphan = layout.run_events_blob("0" * 32, 1)
    await container.get_blob_client(orphan).upload_blob(f'{{"text": "{SECRET}"}}\n'.encode())
    service = wiring.build_service(wiring.load_settings())
    while not (
        await run_housekeeping(
            container, service.pointers, service.store, budget_seconds=60, orphan_min_age_seconds=600
        )
    ).pass_finished:
        pass
    assert await _names(layout.run_events_prefix("0" * 32)) == []
    assert kept_logs and await _names(layout.run_events_prefix(run_id)) == kept_logs


async def test_a_deleted_thread_s_head_is_not_served_from_this_instance_s_cache(host: FunctionHost) -> None:
    """The instance that deleted the thread had its head in memory: deletion goes through the
    checkpoint store, so the cache forgets it, and a load as that thread's head finds nothing."""
    for text in ("one", "two"):
        response = await host.request("POST", "/api/threads/cached/runs", json_body={"messages": text})
        assert response.status == 200
    head = (await response.json())["checkpoint_id"]
    service = wiring.build_service(wiring.load_settings())
    await service.store.load(head, head_of="cached")  # warm
    assert (await host.request("DELETE", "/api/threads/cached")).status == 204
    with pytest.raises(CheckpointNotFound):
        await service.store.load(head, head_of="cached")


async def test_a_delete_removes_the_thread_s_stored_responses(host: FunctionHost) -> None:
    """A Responses conversation is a thread, and its stored responses are run records
    (``runs/<run_id>.json``, ID ``resp_<run_id>``) naming it: DELETE removes them with it."""
    created = await host.request("POST", "/api/responses", json_body={"input": SECRET, "conversation": "talk"})
    assert created.status == 200, await created.body()
    response_id = (await created.json())["id"]
    assert (await host.request("GET", f"/api/responses/{response_id}")).status == 200
    assert await _blobs_holding(SECRET)
    assert (await host.request("DELETE", "/api/threads/talk")).status == 204
    assert (await host.request("GET", f"/api/responses/{response_id}")).status == 404
    assert await _blobs_holding(SECRET) == []


async def test_a_log_deleted_under_a_running_turn_is_never_written_again(
    recording: FunctionHost, queue_env: str, azurite: Azurite
) -> None:
    """The log existed before the delete (the run's first flush): the delete removes it, and
    the run's later flushes and its last events do not bring it back (appends never create)."""
    run_id, delivery = await _background_turn_in_flight(recording, queue_env, azurite, "flushed")
    for _ in range(100):
        if await _names(layout.run_events_prefix(run_id)):
            break
        await asyncio.sleep(0.05)
    assert await _blobs_holding(SECRET)
    assert (await recording.request("DELETE", "/api/threads/flushed")).status == 204
    await asyncio.sleep(0.5)  # more than one flush period of the running turn
    await _finish(delivery)
    assert await _blobs_holding(SECRET) == []
