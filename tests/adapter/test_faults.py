"""Faults against real Azurite: outage mid-request, restart, failure before save, slow storage."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from devtools.azurite import Azurite, free_port, start_azurite
from devtools.function_host import FunctionHost
from devtools.slow_proxy import start_slow_proxy
from functions_adapter import wiring as composition
from functions_adapter.settings import Settings
from resumable.base.errors import StorageUnavailable
from resumable.checkpoints.blob_store import BlobCheckpointStorage
from resumable.storage import clients as storage_client
from tests import recording_workflow


@pytest.fixture
def disk_azurite(tmp_path: Path) -> Iterator[list[Azurite]]:
    """An Azurite that keeps its data on disk, so it can be stopped and restarted on its port."""
    port = free_port()
    box = [start_azurite(port=port, location=tmp_path / "azurite")]
    yield box
    box[0].stop()


@pytest.fixture
async def faulty(recording: FunctionHost, monkeypatch) -> AsyncIterator[FunctionHost]:
    """The recording app with a 1 s storage timeout, on the session's Azurite (a container
    of its own): the faults below are injected at the storage SDK or the write helper."""
    await storage_client.close_all()
    monkeypatch.setenv("STORAGE_TIMEOUT_SECONDS", "1")
    yield recording
    await storage_client.close_all()


@pytest.fixture
async def on_disk(faulty: FunctionHost, disk_azurite: list[Azurite], monkeypatch) -> FunctionHost:
    """``faulty`` on an Azurite of the test's own, which the test may stop, slow or restart."""
    await storage_client.close_all()
    monkeypatch.setenv("CHECKPOINT_STORAGE", disk_azurite[0].connection_string)
    return faulty


async def turn(host: FunctionHost, text: str) -> tuple[int, dict, dict[str, str]]:
    response = await host.request("POST", "/api/threads/t/runs", json_body={"messages": text})
    return response.status, await response.json(), response.headers


async def head_id() -> str | None:
    return (await composition.build_service(Settings.from_env()).pointers.read("t")).checkpoint_id


async def test_storage_outage_mid_request_is_503_and_moves_nothing(on_disk: FunctionHost, disk_azurite) -> None:
    faulty = on_disk
    status, first, _ = await turn(faulty, "one")
    assert status == 200
    recording_workflow.ON_TAIL.append(disk_azurite[0].stop)
    started = time.monotonic()
    status, body, headers = await turn(faulty, "two")
    elapsed = time.monotonic() - started
    assert (status, body["error"]["code"]) == (503, "storage_unavailable")
    assert headers["retry-after"] == "5"
    assert ("tail", "two") in recording_workflow.CALLS

    recording_workflow.ON_TAIL.clear()
    disk_azurite[0] = start_azurite(port=disk_azurite[0].port, location=disk_azurite[0].location)
    assert await head_id() == first["checkpoint_id"]  # the pointer did not move
    status, third, _ = await turn(faulty, "three")
    assert status == 200
    assert third["previous_checkpoint_id"] == first["checkpoint_id"]
    print(f"\n[faults] outage mid-request answered 503 in {elapsed:.2f} s")


async def test_a_failure_between_run_and_save_moves_nothing(faulty: FunctionHost, monkeypatch) -> None:
    _, first, _ = await turn(faulty, "one")

    async def broken_save(self, checkpoint, **_):
        raise StorageUnavailable("Checkpoint storage failed during save.")

    with monkeypatch.context() as patch:
        patch.setattr(BlobCheckpointStorage, "save", broken_save)
        status, body, _ = await turn(faulty, "two")
    assert (status, body["error"]["code"]) == (503, "storage_unavailable")
    assert ("tail", "two") in recording_workflow.CALLS  # the run happened; its result did not land
    assert await head_id() == first["checkpoint_id"]


async def test_an_oversized_result_is_refused_and_nothing_is_saved(faulty: FunctionHost, monkeypatch) -> None:
    _, first, _ = await turn(faulty, "one")
    store = composition.build_service(Settings.from_env()).store
    before = await store.list_checkpoint_ids(workflow_name=recording_workflow.NAME)
    monkeypatch.setenv("MAX_CHECKPOINT_BYTES", str(len(store.codec.encode(await store.load(first["checkpoint_id"])))))
    status, body, _ = await turn(faulty, "a longer message that makes the state grow past the cap")
    assert (status, body["error"]["code"]) == (422, "checkpoint_too_large")
    assert await store.list_checkpoint_ids(workflow_name=recording_workflow.NAME) == before
    assert await head_id() == first["checkpoint_id"]


async def test_slow_storage_is_503_not_a_hang(on_disk: FunctionHost, disk_azurite, monkeypatch) -> None:
    faulty = on_disk
    _, first, _ = await turn(faulty, "one")
    proxy = await start_slow_proxy(disk_azurite[0].port, delay_seconds=30)
    try:
        await storage_client.close_all()
        monkeypatch.setenv(
            "CHECKPOINT_STORAGE", disk_azurite[0].connection_string.replace(str(disk_azurite[0].port), str(proxy.port))
        )
        started = time.monotonic()
        status, body, headers = await turn(faulty, "two")
        elapsed = time.monotonic() - started  # printed, not asserted: the 503 is the proof
    finally:
        await storage_client.close_all()
        await proxy.close()
    assert (status, body["error"]["code"]) == (503, "storage_unavailable")
    # A storage that answers after 30 s would have answered (200) had the 1 s timeout not
    # cut every attempt short: the 503 says it did.
    assert headers["retry-after"] == "5"
    monkeypatch.setenv("CHECKPOINT_STORAGE", disk_azurite[0].connection_string)
    assert await head_id() == first["checkpoint_id"]
    print(f"\n[faults] storage 30 s slow, timeout 1 s: 503 after {elapsed:.2f} s")


@pytest.mark.parametrize(
    ("method", "lost_answer"),
    [("create", "conflict"), ("replace", "conflict"), ("replace", "storage_error")],
    ids=["new-thread-retry-meets-itself", "swap-retry-meets-itself", "swap-answer-timed-out"],
)
async def test_a_pointer_write_that_lands_but_loses_its_answer_counts_as_done(
    faulty: FunctionHost, monkeypatch, method: str, lost_answer: str
) -> None:
    from resumable.storage.blob_records import BlobRecords, RecordConflict

    first = None
    if method == "replace":
        _, first, _ = await turn(faulty, "one")
    original = getattr(BlobRecords, method)

    async def lands_then_fails(self, name, *args):
        await original(self, name, *args)
        if lost_answer == "conflict":
            raise RecordConflict(name)
        raise StorageUnavailable("Checkpoint storage could not be reached during replace record.")

    with monkeypatch.context() as patch:
        patch.setattr(BlobRecords, method, lands_then_fails)
        status, second, _ = await turn(faulty, "two")
    # Reporting an error here would make the caller retry a turn that already committed.
    assert status == 200
    assert await head_id() == second["checkpoint_id"]
    assert second["previous_checkpoint_id"] == (first["checkpoint_id"] if first else None)


@contextmanager
def swap_lands_then_reads_fail(reads_failing: int | None = None) -> Iterator[list[str]]:
    """The pointer swap lands and its answer is lost; then the next ``reads_failing``
    record reads (None: every one) fail, so whether the turn committed cannot be told
    until storage answers again."""
    from resumable.storage.blob_records import BlobRecords, RecordConflict

    original_replace, original_get = BlobRecords.replace, BlobRecords.get
    reads_after_swap: list[str] = []

    async def lands_then_conflicts(self, name, *args):
        await original_replace(self, name, *args)
        reads_after_swap.append(name)
        raise RecordConflict(name)

    async def get_fails_after_swap(self, name):
        if reads_after_swap and (reads_failing is None or len(reads_after_swap) <= reads_failing):
            reads_after_swap.append(name)
            raise StorageUnavailable("Checkpoint storage could not be reached during read record.")
        return await original_get(self, name)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BlobRecords, "replace", lands_then_conflicts)
        patch.setattr(BlobRecords, "get", get_fails_after_swap)
        yield reads_after_swap


async def test_a_landed_pointer_write_whose_check_also_fails_is_outcome_unknown_and_keeps_the_checkpoint(
    faulty: FunctionHost,
) -> None:
    """The swap lands, its answer is lost, and the re-read that would tell fails too: the
    turn may have committed, so it must not be reported as lost (thread_busy), nor as a
    503 a client retries blindly (the retry would apply the turn twice), and its
    checkpoint, possibly the new head, must not be deleted."""
    _, first, _ = await turn(faulty, "one")
    with swap_lands_then_reads_fail():
        status, body, headers = await turn(faulty, "two")
    assert (status, body["error"]["code"]) == (500, "outcome_unknown")
    assert headers["x-should-retry"] == "false" and "retry-after" not in headers
    head = await head_id()
    assert head != first["checkpoint_id"]  # the swap did land
    # The error names what to check: the checkpoint the turn was committing, on its thread.
    assert body["error"]["details"] == {"checkpoint_id": head, "thread_id": "t"}
    service = composition.build_service(Settings.from_env())
    assert (await service.store.load(head)).previous_checkpoint_id == first["checkpoint_id"]


async def test_a_streamed_turn_whose_outcome_is_unknown_ends_with_outcome_unknown(faulty: FunctionHost) -> None:
    await turn(faulty, "one")
    with swap_lands_then_reads_fail():
        response = await faulty.request("POST", "/api/threads/t/runs", json_body={"messages": "two", "stream": True})
        text = (await response.body()).decode()
    assert response.status == 200
    last = [line for line in text.splitlines() if line.startswith("data:")][-1]
    assert json.loads(last.removeprefix("data:"))["error"]["code"] == "outcome_unknown"
    assert "event: error" in text and "storage_unavailable" not in text


async def test_a_failure_after_the_commit_point_that_did_commit_answers_the_turn(faulty: FunctionHost) -> None:
    """The swap's own re-read fails, but the pipeline's check (storage back) finds the turn
    committed: the caller gets its 200, not an error it would retry."""
    _, first, _ = await turn(faulty, "one")
    with swap_lands_then_reads_fail(reads_failing=1):
        status, second, _ = await turn(faulty, "two")
    assert status == 200, second
    assert await head_id() == second["checkpoint_id"]
    assert second["previous_checkpoint_id"] == first["checkpoint_id"]


async def test_an_mcp_turn_whose_outcome_is_unknown_is_a_tool_error_not_to_retry(faulty: FunctionHost) -> None:
    await turn(faulty, "one")
    (trigger,) = [t for t in faulty.triggers.values() if t.binding.get("toolName") == "run_turn"]
    context = {"name": "run_turn", "arguments": {"thread_id": "t", "message": "two"}, "transport": {"name": "http"}}
    with swap_lands_then_reads_fail():
        envelope = json.loads(await trigger.handler(context=json.dumps(context)))
    result = json.loads(envelope["content"])
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == "outcome_unknown"
    assert result["structuredContent"]["status"] == 500 and "retry_after" not in result["structuredContent"]


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/api/runs", {"messages": "hello"}),
        ("/api/threads/t/runs", {"messages": "hello"}),
        ("/api/responses", {"input": "hello"}),
    ],
)
async def test_storage_refusing_every_connection_is_503_with_retry_after_not_outcome_unknown(
    faulty: FunctionHost, azurite: Azurite, monkeypatch: pytest.MonkeyPatch, route: str, body: dict
) -> None:
    """Storage down before the call arrives: no request ever reached it, so nothing of the
    call can have landed. That is an outage to retry (503, Retry-After), not an outcome
    nobody can tell (500 ``outcome_unknown``, ``x-should-retry: false``), on every route,
    ``POST /api/runs`` too, whose commit is its checkpoint's upload."""
    refusing = azurite.connection_string.replace(f":{azurite.port}/", f":{free_port()}/")
    assert refusing != azurite.connection_string
    monkeypatch.setenv("CHECKPOINT_STORAGE", refusing)
    response = await faulty.request("POST", route, json_body=body)
    answer = await response.json()
    assert response.status == 503, answer
    assert answer["error"]["code"] == "storage_unavailable", answer
    assert response.headers["retry-after"] == "5"
    assert response.headers.get("x-should-retry") != "false"
