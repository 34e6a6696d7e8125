"""The background accept and the run routes: authorized like the thread they act on, one
record per key across routes and across synchronous and background calls, random run
IDs, and an accept that fails half-way leaves nothing that runs or blocks later."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Mapping
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from devtools.record_faults import lose_answers
from functions_adapter.signatures import sign
from resumable.base.errors import StorageUnavailable
from resumable.storage import layout
from resumable.storage.record_store import RecordStore
from tests import recording_workflow

ASYNC = {"Prefer": "respond-async"}
SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()


def owner_only(*, route: str, thread_id: str, headers: Mapping[str, str], metadata: Mapping[str, str]) -> bool:
    """A test authorizer: the caller named in X-Caller owns threads that start with its name."""
    return thread_id.startswith(headers.get("x-caller", "?") + "-")


async def accept(host: FunctionHost, path: str, body: dict[str, Any], **headers: str) -> Any:
    return await host.request("POST", path, json_body=body, headers={**ASYNC, **headers})


async def status_of(host: FunctionHost, run_id: str) -> dict[str, Any]:
    return await (await host.request("GET", f"/api/runs/{run_id}")).json()


async def test_run_routes_are_authorized_on_the_run_s_thread(
    recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREAD_AUTHORIZER", "tests.adapter.test_background_accept:owner_only")
    alice = {"X-Caller": "alice"}
    accepted = await accept(recording, "/api/threads/alice-1/runs", {"messages": "mine"}, **alice)
    assert accepted.status == 202
    run_id = (await accepted.json())["run_id"]
    mallory = {"X-Caller": "mallory"}
    for method, path in [("GET", ""), ("GET", "/stream"), ("POST", "/cancel")]:
        refused = await recording.request(method, f"/api/runs/{run_id}{path}", headers=mallory)
        assert (refused.status, (await refused.json())["error"]["code"]) == (403, "forbidden"), path
    allowed = await recording.request("GET", f"/api/runs/{run_id}", headers=alice)
    assert (allowed.status, (await allowed.json())["status"]) == (200, "queued")  # the cancel did nothing


async def test_run_ids_are_never_derived_from_the_key(recording: FunctionHost, queue_env: str) -> None:
    first = await accept(recording, "/api/runs", {"messages": "a"}, **{"Idempotency-Key": "k-1"})
    other = await accept(recording, "/api/runs", {"messages": "a"}, **{"Idempotency-Key": "k-2"})
    ids = {(await first.json())["run_id"], (await other.json())["run_id"]}
    assert len(ids) == 2
    import hashlib

    for kind in ("idempotency-key", "Idempotency-Key"):
        assert hashlib.sha256(f"{kind}\n/api/runs\nk-1".encode()).hexdigest()[:32] not in ids


def signed(body: bytes, message_id: str) -> dict[str, str]:
    stamp = int(time.time())
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(SECRET, message_id, stamp, body),
    }


@pytest.fixture
def signed_env(recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch) -> FunctionHost:
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
    return recording


async def test_a_captured_background_delivery_replayed_to_another_thread_is_refused(
    signed_env: FunctionHost,
) -> None:
    body = json.dumps({"messages": "pay invoice 8"}).encode()
    first = await signed_env.request(
        "POST", "/api/threads/payer/runs", body=body, headers={**signed(body, "m1"), **ASYNC}
    )
    assert first.status == 202
    moved = await signed_env.request(
        "POST", "/api/threads/other/runs", body=body, headers={**signed(body, "m1"), **ASYNC}
    )
    assert (moved.status, (await moved.json())["error"]["code"]) == (409, "webhook_id_reused")


@pytest.mark.parametrize("first_async", [True, False], ids=["background-then-sync", "sync-then-background"])
async def test_one_webhook_id_runs_once_whether_or_not_it_asks_for_the_background(
    signed_env: FunctionHost, first_async: bool
) -> None:
    body = json.dumps({"messages": "pay invoice 9"}).encode()
    extra = ASYNC if first_async else {}
    first = await signed_env.request(
        "POST", "/api/threads/payer/runs", body=body, headers={**signed(body, "m2"), **extra}
    )
    assert first.status == (202 if first_async else 200)
    await QueueRunner(signed_env).run_until_idle()
    flipped = {} if first_async else ASYNC
    again = await signed_env.request(
        "POST", "/api/threads/payer/runs", body=body, headers={**signed(body, "m2"), **flipped}
    )
    assert (again.status, await again.body()) == (first.status, await first.body())  # the first answer, replayed
    await QueueRunner(signed_env).run_until_idle()
    assert sum(1 for executor, _ in recording_workflow.CALLS if executor == "tail") == 1
    thread = await (await signed_env.request("GET", "/api/threads/payer")).json()
    assert thread["turns"] == 1


async def test_a_failed_accept_does_not_block_its_thread(
    recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = RecordStore._write

    async def run_record_write_fails(self, name, seen, new, token):
        if self.prefix == layout.RUNS:
            raise StorageUnavailable("Checkpoint storage could not be reached during save.")
        return await original(self, name, seen, new, token)

    with monkeypatch.context() as patch:
        patch.setattr(RecordStore, "_write", run_record_write_fails)
        failed = await accept(recording, "/api/threads/busy/runs", {"messages": "lost"})
    assert failed.status == 503
    started = time.monotonic()
    second = await accept(recording, "/api/threads/busy/runs", {"messages": "next"})
    assert second.status == 202
    await QueueRunner(recording).run_until_idle()
    status = await status_of(recording, (await second.json())["run_id"])
    assert status["status"] == "succeeded", status
    assert time.monotonic() - started < 20
    assert [text for executor, text in recording_workflow.CALLS if executor == "tail"] == ["next"]


@pytest.mark.parametrize("error", ["conflict", "outage"])
async def test_an_accept_whose_record_write_lost_its_answer_is_202_and_runs_once(
    recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch, error: str
) -> None:
    with lose_answers(monkeypatch, layout.RUNS, error=error) as hits:
        response = await accept(recording, "/api/runs", {"messages": "once"})
    assert hits.writes and response.status == 202, await response.body()
    await QueueRunner(recording).run_until_idle()
    assert (await status_of(recording, (await response.json())["run_id"]))["status"] == "succeeded"
    assert sum(1 for executor, _ in recording_workflow.CALLS if executor == "tail") == 1


async def test_a_cancel_whose_answer_was_lost_is_still_a_cancel(
    recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = (await (await accept(recording, "/api/runs", {"messages": "no"})).json())["run_id"]
    with lose_answers(monkeypatch, layout.RUNS, name=run_id):
        cancelled = await recording.request("POST", f"/api/runs/{run_id}/cancel")
    assert (cancelled.status, (await cancelled.json())["status"]) == (200, "cancelled")


async def test_a_key_reused_after_its_record_expired_starts_a_new_run(
    recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IDEMPOTENCY_TTL_SECONDS", "1")
    key = {"Idempotency-Key": "expiring"}
    first = await accept(recording, "/api/runs", {"messages": "a"}, **key)
    await QueueRunner(recording).run_until_idle()
    await asyncio.sleep(3.1)  # expiry is read on the storage service's clock: whole seconds, plus one
    again = await accept(recording, "/api/runs", {"messages": "a"}, **key)
    assert again.status == 202
    run_id = (await again.json())["run_id"]
    assert run_id != (await first.json())["run_id"]
    await QueueRunner(recording).run_until_idle()
    status = await status_of(recording, run_id)
    assert status["status"] == "succeeded", status


async def test_a_retry_replays_before_the_callback_address_is_checked_again(
    recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALLBACK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    monkeypatch.setenv("CALLBACK_ALLOW_LOCAL_HTTP", "true")
    body = {"messages": "call me", "callback_url": "http://127.0.0.1:9/hook"}
    key = {"Idempotency-Key": "cb-1"}
    first = await accept(recording, "/api/runs", body, **key)
    assert first.status == 202
    monkeypatch.delenv("CALLBACK_ALLOW_LOCAL_HTTP")  # the address would be refused now
    again = await accept(recording, "/api/runs", body, **key)
    assert (again.status, await again.body()) == (202, await first.body())


async def test_an_entry_whose_run_has_no_record_never_holds_up_its_thread(
    recording: FunctionHost, queue_env: str
) -> None:
    """The accept writes the record before the entry, so an entry without a record was left
    by a deleted run: the drain drops it at once instead of retrying the delivery."""
    from functions_adapter import wiring
    from resumable.background.order import ThreadOrder

    await ThreadOrder(wiring.container_for(wiring.load_settings())).append("held", "0" * 32)
    accepted = await accept(recording, "/api/threads/held/runs", {"messages": "go"})
    run_id = (await accepted.json())["run_id"]
    started = time.monotonic()
    await QueueRunner(recording).run_until_idle()
    assert (await status_of(recording, run_id))["status"] == "succeeded"
    assert time.monotonic() - started < 10
