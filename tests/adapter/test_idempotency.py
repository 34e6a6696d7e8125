"""Idempotency-Key: byte-identical replays, key reuse, in-progress duplicates."""

from __future__ import annotations

import asyncio
import contextvars
import json

import pytest

from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from functions_adapter import wiring as composition
from functions_adapter.settings import Settings
from tests import recording_workflow

URL = "/api/runs"


async def keyed(host: FunctionHost, key: str, body: dict, url: str = URL, **headers: str):
    return await host.request("POST", url, json_body=body, headers={"Idempotency-Key": key, **headers})


def fail_completed_writes(monkeypatch: pytest.MonkeyPatch):
    """Every write that would mark a key ``completed`` fails with an outage; returns the
    unpatched ``replace``, so a test can restore it."""
    from resumable.base.errors import StorageUnavailable
    from resumable.storage.blob_records import BlobRecords

    original_replace = BlobRecords.replace

    async def failing_replace(self, name, data, etag):
        if data.get("state") == "completed":
            raise StorageUnavailable("Checkpoint storage failed during replace record.")
        return await original_replace(self, name, data, etag)

    monkeypatch.setattr(BlobRecords, "replace", failing_replace)
    return original_replace


async def test_a_retry_gets_the_same_bytes_and_runs_nothing(recording: FunctionHost, ops: OperationCounter) -> None:
    first = await keyed(recording, "key-1", {"messages": "hello"})
    first_bytes = await first.body()
    assert first.status == 200
    calls = list(recording_workflow.CALLS)
    ops.reset()
    again = await keyed(recording, "key-1", {"messages": "hello"})
    assert again.status == 200
    assert await again.body() == first_bytes
    assert calls == recording_workflow.CALLS
    assert dict(ops.counts) == {"PUT": 1, "GET": 1}  # the failed claim, then the stored record
    print(f"\n[idempotency] replay cost: {dict(ops.counts)}")


async def test_the_same_key_with_another_body_is_422(recording: FunctionHost) -> None:
    assert (await keyed(recording, "key-2", {"messages": "hello"})).status == 200
    reused = await keyed(recording, "key-2", {"messages": "something else"})
    assert reused.status == 422
    assert (await reused.json())["error"]["code"] == "idempotency_key_reused"
    other_route = await keyed(recording, "key-2", {"messages": "hello"}, url="/api/threads/t/runs")
    assert other_route.status == 422


async def test_a_duplicate_while_the_first_runs_is_409(recording: FunctionHost) -> None:
    body = {"messages": "wait for it"}
    first = asyncio.ensure_future(keyed(recording, "key-3", body))
    await asyncio.wait_for(recording_workflow.WAITING.wait(), timeout=10)
    duplicate = await keyed(recording, "key-3", body)
    assert duplicate.status == 409
    assert duplicate.headers["retry-after"] == "1"
    assert (await duplicate.json())["error"]["code"] == "request_in_progress"
    recording_workflow.RELEASE.set()
    assert (await first).status == 200
    assert (await keyed(recording, "key-3", body)).status == 200


async def test_a_failure_releases_the_key(recording: FunctionHost) -> None:
    failed = await keyed(recording, "key-4", {"messages": "fail"})
    assert failed.status == 500
    calls = len(recording_workflow.CALLS)
    retried = await keyed(recording, "key-4", {"messages": "fail"})
    assert retried.status == 500
    assert len(recording_workflow.CALLS) > calls  # it ran again


async def test_an_error_leaves_no_record_so_a_retry_is_judged_afresh(recording: FunctionHost) -> None:
    body = {"checkpoint_id": "later", "messages": "x"}
    assert (await keyed(recording, "key-5", body)).status == 404
    first = await recording.request("POST", URL, json_body={"messages": "x"})
    checkpoint = await first.json()
    # The same key now finds the checkpoint it named (copied under the awaited ID).
    store = composition.build_service(Settings.from_env()).store
    saved = await store.load(checkpoint["checkpoint_id"])
    saved.checkpoint_id = "later"
    await store.save(saved)
    assert (await keyed(recording, "key-5", body)).status == 200


async def test_streaming_replays_the_done_payload(recording: FunctionHost) -> None:
    body = {"messages": "stream me", "stream": True}
    first = [e async for e in (await keyed(recording, "key-6", body)).events()]
    assert first[-1][0] == "done"
    calls = list(recording_workflow.CALLS)
    replay = [e async for e in (await keyed(recording, "key-6", body)).events()]
    assert replay == [first[-1]]
    assert calls == recording_workflow.CALLS


async def test_a_thread_turn_is_not_applied_twice(host: FunctionHost) -> None:
    body = {"messages": "pay the invoice"}
    first = await keyed(host, "webhook-delivery-1", body, url="/api/threads/billing/runs")
    again = await keyed(host, "webhook-delivery-1", body, url="/api/threads/billing/runs")
    assert await first.body() == await again.body()
    head = await (await host.request("GET", "/api/threads/billing")).json()
    assert head["turns"] == 1


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", "é"])
async def test_malformed_keys_are_400(host: FunctionHost, key: str) -> None:
    response = await host.request(
        "POST",
        URL,
        body=json.dumps({"messages": "x"}).encode(),
        headers={"Idempotency-Key": key, "content-type": "application/json"},
    )
    assert response.status == 400


async def test_a_done_turn_is_not_failed_because_its_record_could_not_be_stored(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_completed_writes(monkeypatch)
    response = await keyed(host, "key-7", {"messages": "pay"}, url="/api/threads/bills/runs")
    assert response.status == 200  # the turn committed; telling the caller otherwise invites a double run
    head = await (await host.request("GET", "/api/threads/bills")).json()
    assert head["checkpoint_id"] == (await response.json())["checkpoint_id"]
    # The claim could not be marked completed, but it names the checkpoint it committed:
    # a retry finds that checkpoint in the thread and replays instead of running again.
    retry = await keyed(host, "key-7", {"messages": "pay"}, url="/api/threads/bills/runs")
    assert retry.status == 200
    assert await retry.body() == await response.body()
    assert (await (await host.request("GET", "/api/threads/bills")).json())["turns"] == 1


@pytest.mark.parametrize("url", [URL, "/api/threads/ledger/runs"])
async def test_a_committed_turn_never_runs_again_once_its_claim_is_stale(
    recording: FunctionHost, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """The last write (marking the key completed) is lost and the claim then goes stale:
    a webhook retry hours later must replay, not take the claim over and run again."""
    from resumable.core import idempotency
    from resumable.storage.blob_records import BlobRecords

    original_replace = fail_completed_writes(monkeypatch)
    first = await keyed(recording, "key-9", {"messages": "charge card"}, url=url)
    assert first.status == 200
    calls = list(recording_workflow.CALLS)
    monkeypatch.setattr(BlobRecords, "replace", original_replace)
    monkeypatch.setattr(idempotency, "CLAIM_SECONDS", 0)  # every unfinished claim now looks abandoned
    await asyncio.sleep(0.01)
    retry = await keyed(recording, "key-9", {"messages": "charge card"}, url=url)
    assert retry.status == 200
    assert await retry.body() == await first.body()
    assert calls == recording_workflow.CALLS  # nothing ran a second time


async def test_a_long_run_keeps_its_claim_alive(recording: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that outlives the takeover age is renewing its claim, so a retry waits."""
    from resumable.core import idempotency

    monkeypatch.setattr(idempotency, "CLAIM_SECONDS", 0.3)
    monkeypatch.setattr(idempotency, "RENEW_SECONDS", 0.05)
    body = {"messages": "wait a long time"}
    first = asyncio.ensure_future(keyed(recording, "key-10", body))
    await asyncio.wait_for(recording_workflow.WAITING.wait(), timeout=10)
    await asyncio.sleep(0.6)  # twice the takeover age
    duplicate = await keyed(recording, "key-10", body)
    assert (duplicate.status, (await duplicate.json())["error"]["code"]) == (409, "request_in_progress")
    recording_workflow.RELEASE.set()
    assert (await first).status == 200
    assert sum(1 for executor, _ in recording_workflow.CALLS if executor == "tail") == 1


async def test_a_claim_whose_answer_was_lost_is_still_ours(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim is created, its answer lost, and the SDK's retry meets it: not a 409."""
    from resumable.storage.blob_records import BlobRecords, RecordConflict

    original_create = BlobRecords.create

    async def create_then_conflict(self, name, data):
        await original_create(self, name, data)
        raise RecordConflict(name)

    monkeypatch.setattr(BlobRecords, "create", create_then_conflict)
    response = await keyed(host, "key-8", {"messages": "hello"})
    assert response.status == 200


async def test_a_large_response_is_replayed_whole(recording: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """A response of ~1.8 MB (its record ~2.4 MB as base64) replays byte for byte."""
    monkeypatch.setenv("MAX_MESSAGE_CHARS", "1000000")
    monkeypatch.setenv("MAX_REQUEST_BYTES", "2000000")
    body = {"messages": "y" * 900_000}
    first = await keyed(recording, "key-big", body)
    first_bytes = await first.body()
    assert first.status == 200
    assert len(first_bytes) > 1_500_000
    calls = list(recording_workflow.CALLS)
    again = await keyed(recording, "key-big", body)
    assert again.status == 200
    assert await again.body() == first_bytes
    assert calls == recording_workflow.CALLS


@pytest.mark.parametrize("content", [b"", b"{not json", b"[1, 2]", b'{"state": "completed", "fingerprint": 1}'])
async def test_an_unreadable_record_is_an_error_not_another_request(
    recording: FunctionHost, storage_env: str, content: bytes
) -> None:
    import hashlib

    body = {"messages": "hello"}
    assert (await keyed(recording, "key-corrupt", body)).status == 200
    calls = list(recording_workflow.CALLS)
    container = composition.build_service(Settings.from_env()).store.container
    name = hashlib.sha256(b"key-corrupt").hexdigest()
    await container.upload_blob(f"idempotency/{name}.json", content, overwrite=True)
    again = await keyed(recording, "key-corrupt", body)
    assert (again.status, (await again.json())["error"]["code"]) == (500, "idempotency_record_unreadable")
    assert calls == recording_workflow.CALLS


@pytest.mark.parametrize("error", ["conflict", "outage"])
@pytest.mark.parametrize("url", [URL, "/api/threads/lost-answers/runs"])
async def test_every_claim_write_whose_answer_was_lost_still_counts(
    recording: FunctionHost, monkeypatch: pytest.MonkeyPatch, error: str, url: str
) -> None:
    """Each write of a keyed call (claim, committing for a thread turn, completed) lands and
    loses its answer in turn: the call succeeds once, and a retry replays it without running
    again. (``/api/runs`` has no ``committing`` write: its checkpoint records the commit.)"""
    from devtools.record_faults import lose_answers
    from resumable.storage import layout

    writes = 2 if url == URL else 3
    with lose_answers(monkeypatch, layout.IDEMPOTENCY, times=writes, error=error) as hits:
        first = await keyed(recording, "key-lost", {"messages": "once"}, url=url)
    assert len(hits.writes) == writes
    assert first.status == 200, await first.body()
    calls = list(recording_workflow.CALLS)
    retry = await keyed(recording, "key-lost", {"messages": "once"}, url=url)
    assert (retry.status, await retry.body()) == (200, await first.body())
    assert calls == recording_workflow.CALLS


async def test_a_keyed_resume_costs_four_operations_and_a_replay_two(
    host: FunctionHost, ops: OperationCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claim, read the checkpoint, save it (carrying the response), complete: no
    ``committing`` write for a call whose commit is the checkpoint it creates."""
    monkeypatch.setenv("CHECKPOINT_CACHE_BYTES", "0")  # a cold instance: the checkpoint is read
    start = await (await host.request("POST", URL, json_body={"messages": "hello"})).json()
    body = {"checkpoint_id": start["checkpoint_id"], "messages": "again"}
    ops.reset()
    first = await keyed(host, "key-ops", body)
    assert first.status == 200
    assert dict(ops.counts) == {"PUT": 3, "GET": 1}, ops.log
    ops.reset()
    again = await keyed(host, "key-ops", body)
    assert (again.status, await again.body()) == (200, await first.body())
    assert dict(ops.counts) == {"PUT": 1, "GET": 1}
    print(f"\n[idempotency] keyed resume: 4 ops; replay: {dict(ops.counts)}")


async def test_a_retry_right_after_a_lost_completed_write_replays_at_once(
    recording: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim is still fresh (not stale), but its checkpoint exists: the retry replays the
    response that checkpoint carries instead of answering 409 for the next five minutes."""
    from resumable.storage.blob_records import BlobRecords

    original_replace = fail_completed_writes(monkeypatch)
    first = await keyed(recording, "key-fresh", {"messages": "charge card"})
    assert first.status == 200
    calls = list(recording_workflow.CALLS)
    monkeypatch.setattr(BlobRecords, "replace", original_replace)
    retry = await keyed(recording, "key-fresh", {"messages": "charge card"})
    assert (retry.status, await retry.body()) == (200, await first.body())
    assert calls == recording_workflow.CALLS


@pytest.mark.parametrize("winner", ["original", "taker"])
async def test_a_taken_over_claim_and_its_taker_never_both_commit(
    recording: FunctionHost, monkeypatch: pytest.MonkeyPatch, storage_env: str, winner: str
) -> None:
    """The original stops renewing (its claim goes stale) but keeps running; a retry takes the
    claim over and runs too. Both save under the claim's one planned checkpoint, create-only:
    one commits, the other fails, and every 200 (and every later replay) is the one commit."""
    from resumable.checkpoints.blob_store import BlobCheckpointStorage
    from resumable.core import idempotency

    original_save = BlobCheckpointStorage.save
    saves: list[str] = []
    caller: contextvars.ContextVar[str] = contextvars.ContextVar("caller")
    winner_saved = asyncio.Event()

    async def ordered_save(self, checkpoint, **kwargs):
        saves.append(checkpoint.checkpoint_id)
        if caller.get() != winner:  # the loser saves only once the winner has
            await asyncio.wait_for(winner_saved.wait(), timeout=10)
            return await original_save(self, checkpoint, **kwargs)
        try:
            return await original_save(self, checkpoint, **kwargs)
        finally:
            winner_saved.set()

    monkeypatch.setattr(BlobCheckpointStorage, "save", ordered_save)
    monkeypatch.setattr(idempotency, "RENEW_SECONDS", 3600)
    monkeypatch.setattr(idempotency, "CLAIM_SECONDS", 0.05)
    body = {"messages": "wait for it"}
    caller.set("original")
    first = asyncio.ensure_future(keyed(recording, "key-race", body))
    await asyncio.wait_for(recording_workflow.WAITING.wait(), timeout=10)
    # Past CLAIM_SECONDS on the storage clock, which has whole seconds: lapsed on every read.
    await asyncio.sleep(2.1 + idempotency.CLAIM_SECONDS)
    recording_workflow.WAITING.clear()
    caller.set("taker")
    second = asyncio.ensure_future(keyed(recording, "key-race", body))
    await asyncio.wait_for(recording_workflow.WAITING.wait(), timeout=10)
    recording_workflow.RELEASE.set()
    results = [await first, await second]
    assert len(saves) == 2 and saves[0] == saves[1]  # both ran, towards the one planned checkpoint
    statuses = [r.status for r in results]
    assert statuses == ([409, 200] if winner == "taker" else [200, 409]), statuses
    loser = results[statuses.index(409)]
    assert (await loser.json())["error"]["code"] == "checkpoint_exists"
    monkeypatch.setattr(idempotency, "CLAIM_SECONDS", 300)
    replay = await keyed(recording, "key-race", body)
    assert replay.status == 200
    for result in results:
        if result.status == 200:
            assert await result.body() == await replay.body()
    container = composition.build_service(Settings.from_env()).store.container
    saved = [b.name async for b in container.list_blobs(name_starts_with="checkpoints/")]
    assert saved == [f"checkpoints/{saves[0]}.json"]  # one commit between the two runs


async def _claim_elsewhere(monkeypatch: pytest.MonkeyPatch, skew_seconds: float) -> tuple[object, object]:
    """Another instance, its clock ``skew_seconds`` off, claims a key and keeps running."""
    import time

    from resumable.core.idempotency import KeyClaim

    settings = Settings.from_env()
    service = composition.build_service(settings)
    await service.store.ensure_container()
    store = composition.idempotency_store(settings, service, ttl_seconds=3600)
    real = time.time
    with monkeypatch.context() as patch:
        patch.setattr(time, "time", lambda: real() + skew_seconds)
        held = await store.begin("key-skewed", "fingerprint")
    assert isinstance(held, KeyClaim)
    return store, held


async def test_a_live_claim_from_an_instance_with_a_slow_clock_is_not_taken_over(
    storage_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its ``claimed_at`` reads an hour old on this instance's clock; on the storage clock the
    claim was written just now, so a retry is 409, not a second run beside the first."""
    from resumable.base.errors import RequestInProgress

    store, _ = await _claim_elsewhere(monkeypatch, -3600)
    with pytest.raises(RequestInProgress):
        await store.begin("key-skewed", "fingerprint")


async def test_an_abandoned_claim_from_an_instance_with_a_fast_clock_is_taken_over(
    storage_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its ``claimed_at`` lies an hour ahead; once it lapsed on the storage clock (here at once:
    every claim counts as lapsed) a retry takes it over instead of waiting out the skew."""
    from resumable.core import idempotency

    store, held = await _claim_elsewhere(monkeypatch, 3600)
    monkeypatch.setattr(idempotency, "CLAIM_SECONDS", -2)
    taken = await store.begin("key-skewed", "fingerprint")
    assert isinstance(taken, idempotency.KeyClaim) and taken.token != held.token
