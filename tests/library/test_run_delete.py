"""Deleting one finished background run (``resumable/background/run_delete.py``), against
real Azurite: the record and every event log go, nothing of the run is left under its
name, a repeat is harmless, and a run still going is left alone."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from azure.storage.blob.aio import ContainerClient

from functions_adapter import wiring
from functions_adapter.settings import Settings
from resumable.background.events import EventWriter
from resumable.background.records import RUNNING, SUCCEEDED, RunRecord, RunRecords
from resumable.background.run_delete import delete_finished_run
from resumable.storage import layout
from resumable.storage.failures import create_container_if_missing
from resumable.storage.record_store import Stored


@pytest.fixture
async def container(storage_env: str) -> AsyncIterator[ContainerClient]:
    client = wiring.container_for(Settings.from_env())
    await create_container_if_missing(client)
    yield client


async def names(container: ContainerClient, prefix: str = layout.RUNS) -> list[str]:
    return sorted([blob.name async for blob in container.list_blobs(name_starts_with=prefix)])


async def a_run_with_logs(container: ContainerClient, run_id: str, status: str, attempts: int = 2) -> Stored[RunRecord]:
    """A run's record and one event log per attempt, written as the executor writes them."""
    stored = await RunRecords(container).create(RunRecord(run_id, b"{}", "f", b"{}", 1.0, status=status))
    for attempt in range(1, attempts + 1):
        writer = EventWriter(container, run_id, attempt)
        writer.add("output", {"text": f"attempt {attempt}"})
        await writer.close()
    return stored


async def test_a_finished_run_goes_whole_and_its_neighbour_stays(container: ContainerClient) -> None:
    found = await a_run_with_logs(container, "run-a", SUCCEEDED)
    await a_run_with_logs(container, "run-b", SUCCEEDED, attempts=1)
    assert await names(container, layout.run_events_prefix("run-a")) == [
        layout.run_events_blob("run-a", 1),
        layout.run_events_blob("run-a", 2),
    ]

    assert await delete_finished_run(container, found) is True

    left = await names(container)
    assert [name for name in left if "run-a" in name] == []
    assert left == [layout.record_blob(layout.RUNS, "run-b"), layout.run_events_blob("run-b", 1)]


async def test_a_run_already_gone_is_deleted_again_without_error(container: ContainerClient) -> None:
    found = await a_run_with_logs(container, "run-a", SUCCEEDED)
    assert await delete_finished_run(container, found) is True

    assert await delete_finished_run(container, found) is True  # the same stale read, again
    assert await names(container) == []


async def test_logs_left_by_an_earlier_delete_go_on_the_repeat(container: ContainerClient) -> None:
    """A call that removed the record and then failed left the logs: the repeat, reading the
    record as gone, still removes them."""
    found = await a_run_with_logs(container, "run-a", SUCCEEDED)
    await container.delete_blob(layout.record_blob(layout.RUNS, "run-a"))  # as far as the crash got

    assert await delete_finished_run(container, found) is True
    assert await names(container) == []


async def test_a_run_still_going_is_left_whole(container: ContainerClient) -> None:
    found = await a_run_with_logs(container, "run-a", RUNNING)
    before = await names(container)

    assert await delete_finished_run(container, found) is False
    assert await names(container) == before
    assert (await RunRecords(container).get("run-a")) is not None
