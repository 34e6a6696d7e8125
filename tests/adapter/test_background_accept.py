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
    second = await accept(recording, "/api/threads/busy/runs", {"messages": "next"})
    assert second.status == 202
    # One pass of the queue runs it: a turn held up by the failed accept would have been put
    # back on the queue, invisible, and still be queued here.
    await QueueRunner(recording).run_until_idle()
    status = await status_of(recording, (await second.json())["run_id"])
    assert status["status"] == "succeeded", status
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
    # One pass of the queue (which never waits for an invisible message) runs it.
    await QueueRunner(recording).run_until_idle()
    assert (await status_of(recording, run_id))["status"] == "succeeded"


# -- a keyed accept that failed: its retry runs the turn, never a 202 for a dead run ------


def _failing_writes(monkeypatch: pytest.MonkeyPatch, prefixes: set[str], *, spare: int = 0) -> None:
    """Every write under ``prefixes`` fails with an outage (after the first ``spare`` of them)."""
    original = RecordStore._write
    seen: list[str] = []

    async def outage(self: RecordStore[Any], name: str, seen_: Any, new: Any, token: str) -> Any:
        if self.prefix in prefixes:
            seen.append(name)
            if len(seen) > spare:
                raise StorageUnavailable("Checkpoint storage could not be reached during replace record.")
        return await original(self, name, seen_, new, token)

    monkeypatch.setattr(RecordStore, "_write", outage)


@pytest.mark.parametrize("key_released", [True, False], ids=["key-released", "key-release-failed-too"])
async def test_a_keyed_retry_after_an_accept_failed_on_its_pending_list_runs_the_turn(
    recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch, key_released: bool
) -> None:
    key = {"Idempotency-Key": "after-outage"}
    with monkeypatch.context() as patch:
        # One outage on the run-order/ write; with the key release failing too, the retry
        # meets the key's stored 202 and the run it names, marked accept_failed.
        prefixes = {layout.RUN_ORDER} if key_released else {layout.RUN_ORDER, layout.IDEMPOTENCY}
        _failing_writes(patch, prefixes, spare=0 if key_released else 1)
        failed = await accept(recording, "/api/threads/kept/runs", {"messages": "hello"}, **key)
    assert failed.status == 503, await failed.body()
    again = await accept(recording, "/api/threads/kept/runs", {"messages": "hello"}, **key)
    assert again.status == 202, await again.body()
    await QueueRunner(recording).run_until_idle()
    run_id = (await again.json())["run_id"]
    assert (await status_of(recording, run_id))["status"] == "succeeded"
    assert [text for executor, text in recording_workflow.CALLS if executor == "tail"] == ["hello"]
    third = await accept(recording, "/api/threads/kept/runs", {"messages": "hello"}, **key)
    assert (third.status, await third.body()) == (202, await again.body())  # now a replay
    await QueueRunner(recording).run_until_idle()
    assert (await (await recording.request("GET", "/api/threads/kept")).json())["turns"] == 1


async def test_a_slack_message_whose_accept_failed_is_run_on_slack_s_retry(
    recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slack retries an event it got no 2xx for (same event_id): the retry runs the turn."""
    from tests.adapter.test_webhook_adapters import CALLBACK_SECRET, MENTION, SLACK_SECRET, SLACK_THREAD, _slack

    monkeypatch.setenv("SLACK_SIGNING_SECRET", SLACK_SECRET)
    monkeypatch.setenv("CALLBACK_SECRET", CALLBACK_SECRET)
    for name in ("WEBHOOK_SECRET", "WEBHOOK_SCHEME", "IDEMPOTENCY_HEADERS", "ADAPTER_ANSWER_URL"):
        monkeypatch.delenv(name, raising=False)
    slack = _second_instance()  # indexed with the adapter's secret set
    body = json.dumps(MENTION).encode()
    with monkeypatch.context() as patch:
        _failing_writes(patch, {layout.RUN_ORDER})
        first = await slack.request("POST", "/api/adapters/slack/events", body=body, headers=_slack(body))
    assert first.status == 503  # Slack sees no 2xx and retries
    retried = await slack.request(
        "POST", "/api/adapters/slack/events", body=body, headers={**_slack(body), "X-Slack-Retry-Num": "1"}
    )
    assert retried.status == 200
    await QueueRunner(slack).run_until_idle()
    # The thread is the Slack adapter's (its origin): read it from storage, not through the API.
    from functions_adapter.wiring import build_service, load_settings

    assert (await build_service(load_settings()).pointers.read(SLACK_THREAD)).turns == 1  # not dropped
    assert [text for executor, text in recording_workflow.CALLS if executor == "tail"] == [MENTION["event"]["text"]]


# -- an accept racing a drain on another instance leaves no entry behind ----------------


def _second_instance() -> FunctionHost:
    """function_app imported anew: another app object on the same Azurite."""
    import importlib.util
    import uuid
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "function_app.py"
    spec = importlib.util.spec_from_file_location(f"function_app_{uuid.uuid4().hex}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return FunctionHost(module.app)


@pytest.mark.parametrize("before", [layout.RUNS, layout.RUN_ORDER], ids=["record", "pending-list"])
async def test_a_drain_on_another_instance_racing_the_accept_leaves_no_pending_entry(
    recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch, before: str
) -> None:
    """Whatever the second instance's drain does just before the accept writes the run's
    record or the thread's pending list (here: it handles every message there is, to the
    end), the run runs once and its entry is gone afterwards."""
    from functions_adapter import wiring
    from resumable.background.order import ThreadOrder

    other = _second_instance()
    original = RecordStore._write
    raced: list[int] = []

    async def other_drains_first(self: RecordStore[Any], name: str, seen: Any, new: Any, token: str) -> Any:
        if self.prefix == before and not raced:
            raced.append(await QueueRunner(other).run_until_idle())
        return await original(self, name, seen, new, token)

    with monkeypatch.context() as patch:
        patch.setattr(RecordStore, "_write", other_drains_first)
        accepted = await accept(recording, "/api/threads/raced/runs", {"messages": "one"})
        assert accepted.status == 202 and raced
        await QueueRunner(recording).run_until_idle()
        await QueueRunner(other).run_until_idle()
    run_id = (await accepted.json())["run_id"]
    assert (await status_of(recording, run_id))["status"] == "succeeded"
    assert await ThreadOrder(wiring.container_for(wiring.load_settings())).pending("raced") == []
    assert [text for executor, text in recording_workflow.CALLS if executor == "tail"] == ["one"]


async def test_a_thread_turn_cancelled_while_queued_leaves_no_pending_entry(
    recording: FunctionHost, queue_env: str
) -> None:
    """Its message then finds the run finished: it still drains the thread, which pops it."""
    from functions_adapter import wiring
    from resumable.background.order import ThreadOrder

    run_id = (await (await accept(recording, "/api/threads/called-off/runs", {"messages": "no"})).json())["run_id"]
    cancelled = await recording.request("POST", f"/api/runs/{run_id}/cancel")
    assert (await cancelled.json())["status"] == "cancelled"
    await QueueRunner(recording).run_until_idle()
    assert await ThreadOrder(wiring.container_for(wiring.load_settings())).pending("called-off") == []
    assert recording_workflow.CALLS == []


async def test_an_accept_whose_message_failed_after_a_drain_started_its_run_is_202(
    recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry is listed before the message is sent, so a drain of the thread (here on
    another instance, for the turn before) can run the turn first: the run then stands,
    and a 503 would have the caller send it again."""
    from resumable.storage.run_queue import RunQueue

    other = _second_instance()
    first = await accept(recording, "/api/threads/ahead/runs", {"messages": "first"})
    original = RunQueue.enqueue
    sent: list[str] = []

    async def drained_then_outage(self: RunQueue, run_id: str, *, delay_seconds: int = 0) -> None:
        if not sent:
            sent.append(run_id)
            await QueueRunner(other).run_until_idle()  # drains "first", then the front: ours
            raise StorageUnavailable("Checkpoint storage could not be reached during enqueue run.")
        await original(self, run_id, delay_seconds=delay_seconds)

    with monkeypatch.context() as patch:
        patch.setattr(RunQueue, "enqueue", drained_then_outage)
        second = await accept(recording, "/api/threads/ahead/runs", {"messages": "second"})
    assert second.status == 202, await second.body()
    assert sent == [(await second.json())["run_id"]]
    await QueueRunner(recording).run_until_idle()
    for answer in (first, second):
        assert (await status_of(recording, (await answer.json())["run_id"]))["status"] == "succeeded"
    assert [text for executor, text in recording_workflow.CALLS if executor == "tail"] == ["first", "second"]


async def test_a_thread_turn_failed_by_its_poisoned_message_leaves_no_pending_entry(
    recording: FunctionHost, queue_env: str, azurite: Any
) -> None:
    from functions_adapter import wiring
    from resumable.background.order import ThreadOrder
    from tests.adapter.test_background_runs import _deliver, _take_message

    run_id = (await (await accept(recording, "/api/threads/poisoned/runs", {"messages": "never"})).json())["run_id"]
    await _deliver(recording, await _take_message(queue_env, azurite), "fail_poisoned_run")
    assert (await status_of(recording, run_id))["status"] == "failed"
    assert await ThreadOrder(wiring.container_for(wiring.load_settings())).pending("poisoned") == []


async def test_a_keyed_retry_answered_while_the_first_accept_fails_gets_a_run_that_runs(
    recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The retry arrives while the first accept is still under way (the sender timed out):
    it is answered the stored 202; the first accept then fails to send its message, and
    its undo must leave that run to run."""
    from resumable.storage.run_queue import RunQueue

    key = {"Idempotency-Key": "impatient"}
    original = RunQueue.enqueue
    retried: list[Any] = []
    sends: list[str] = []

    async def retry_then_outage(self: RunQueue, run_id: str, *, delay_seconds: int = 0) -> None:
        sends.append(run_id)
        if len(sends) == 1:  # the first accept's message: the retry comes in, then the send fails
            retried.append(await accept(recording, "/api/threads/impatient/runs", {"messages": "once"}, **key))
            raise StorageUnavailable("Checkpoint storage could not be reached during enqueue run.")
        await original(self, run_id, delay_seconds=delay_seconds)

    with monkeypatch.context() as patch:
        patch.setattr(RunQueue, "enqueue", retry_then_outage)
        first = await accept(recording, "/api/threads/impatient/runs", {"messages": "once"}, **key)
    [second] = retried
    assert second.status == 202, await second.body()
    await QueueRunner(recording).run_until_idle()
    run_id = (await second.json())["run_id"]
    assert (await status_of(recording, run_id))["status"] == "succeeded"
    if first.status == 202:
        assert (await first.json())["run_id"] == run_id
    assert [text for executor, text in recording_workflow.CALLS if executor == "tail"] == ["once"]
