"""Completion callbacks under the queue's and the instances' faults: one delivery chain per
run, each attempt POSTed once where that can be avoided, final outcomes final, nothing
pending forever, nothing sent for a run that has not finished.

Everything goes through the registered functions (HTTP routes, the queue triggers run by
``QueueRunner``) against real Azurite and a real loopback receiver. Interleavings are
forced by wrapping the run queue's ``enqueue`` or the receiver, never by mocking storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from azure.functions.queue import QueueMessage
from azure.storage.queue.aio import QueueClient

from devtools.azurite import Azurite
from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from devtools.record_faults import Hits, lose_answers, race_writes
from devtools.webhook_receiver import WebhookReceiver
from functions_adapter import callbacks, wiring
from resumable.background.callback_records import DELIVERED, Attempt, CallbackDelivery, DeliveryLease, callback_store
from resumable.base.errors import StorageUnavailable
from resumable.storage import layout
from resumable.storage.run_queue import RunQueue
from tests.conftest import CALLBACK_SECRET as SECRET

ASYNC = {"Prefer": "respond-async"}
ROOT = Path(__file__).resolve().parents[2]


class SlowFailures(WebhookReceiver):
    """Answers its failures half a second late, so a duplicate's POST overtakes them."""

    async def _handle(self, request: web.Request) -> web.Response:
        response = await super()._handle(request)
        if response.status >= 500:
            await asyncio.sleep(0.5)
        return response


@pytest.fixture
async def slow_failures() -> AsyncIterator[WebhookReceiver]:
    hook = SlowFailures(SECRET)
    await hook.start()
    yield hook
    await hook.stop()


@pytest.fixture
def eager_host_json(tmp_path: Path) -> Path:
    """host.json with ``visibilityTimeout`` 0: a failed delivery comes back at once, as
    after a crash, so one ``run_until_idle`` sees every redelivery."""
    config = json.loads((ROOT / "host.json").read_text())
    config["extensions"]["queues"]["visibilityTimeout"] = "00:00:00"
    path = tmp_path / "host.json"
    path.write_text(json.dumps(config))
    return path


async def _background(host: FunctionHost, callback_url: str, path: str = "/api/runs", text: str = "call") -> str:
    body = {"messages": text, "callback_url": callback_url}
    response = await host.request("POST", path, json_body=body, headers=ASYNC)
    assert response.status == 202, await response.body()
    return str((await response.json())["run_id"])


async def _callback(host: FunctionHost, run_id: str) -> dict[str, Any]:
    return (await (await host.request("GET", f"/api/runs/{run_id}")).json())["callback"]


def _message(text: str, message_id: str = "m1", dequeue_count: int = 1) -> QueueMessage:
    return QueueMessage(id=message_id, body=text.encode(), dequeue_count=dequeue_count)


Enqueue = Callable[..., Awaitable[None]]


def _wrap_enqueue(monkeypatch: pytest.MonkeyPatch, before: Callable[[Enqueue, Any, str, int], Awaitable[None]]) -> None:
    """Run ``before(original, queue, message, delay)`` ahead of every enqueue."""
    original = RunQueue.enqueue

    async def enqueue(self: RunQueue, message: str, *, delay_seconds: int = 0) -> None:
        await before(original, self, message, delay_seconds)
        await original(self, message, delay_seconds=delay_seconds)

    monkeypatch.setattr(RunQueue, "enqueue", enqueue)


async def _queued(azurite: Azurite, queue: str) -> int:
    async with QueueClient.from_connection_string(azurite.connection_string, queue) as client:
        return (await client.get_queue_properties()).approximate_message_count


# -- 19: a duplicate delivery, and a final outcome recorded under a conflict ---------------------


async def test_a_duplicated_message_posts_its_attempt_once_and_delivered_stays_delivered(
    callback_env: FunctionHost, slow_failures: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue delivers the first callback message twice, at once. The receiver answers
    500 (slowly) then 200. Before: both copies POSTed, the 200 recorded ``delivered``,
    then the 500's late write put ``pending`` back and sent a third POST."""
    duplicated: list[str] = []

    async def duplicate_first(original: Enqueue, queue: Any, message: str, delay: int) -> None:
        if message.startswith("callback.") and not duplicated:
            duplicated.append(message)
            await original(queue, message, delay_seconds=delay)

    _wrap_enqueue(monkeypatch, duplicate_first)
    receiver = slow_failures
    receiver.fail_first = 1
    run_id = await _background(callback_env, receiver.url)
    await QueueRunner(callback_env).run_until_idle()
    assert [d.answered for d in receiver.deliveries] == [500, 200]
    callback = await _callback(callback_env, run_id)
    assert callback["outcome"] == "delivered"
    assert [a.get("status") for a in callback["attempts"]] == [500, 200]


async def test_an_attempt_recorded_after_a_conflict_never_moves_a_final_outcome_back(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While this delivery's 500 is being recorded, another one (which took over its
    claim) records a 200. The 500 is added to the attempts; ``delivered`` stays, and no
    retry is sent."""
    receiver.fail_first = 1
    run_id = await _background(callback_env, receiver.url)

    def rival(state: CallbackDelivery) -> CallbackDelivery:
        return dataclasses.replace(state, outcome=DELIVERED, attempts=(*state.attempts, Attempt(time.time(), 200)))

    faults = contextlib.ExitStack()
    hits: list[Hits] = []
    original = callbacks.post

    async def post_then_a_rival_records_first(*args: Any) -> tuple[int | None, str | None]:
        answer = await original(*args)
        if not hits:  # the conflict meets this attempt's recording write
            hits.append(faults.enter_context(race_writes(monkeypatch, layout.CALLBACKS, rival, name=run_id)))
        return answer

    monkeypatch.setattr(callbacks, "post", post_then_a_rival_records_first)
    with faults:
        await QueueRunner(callback_env).run_until_idle()
    assert hits[0].writes == [(layout.CALLBACKS, run_id)]
    assert [d.answered for d in receiver.deliveries] == [500]
    callback = await _callback(callback_env, run_id)
    assert callback["outcome"] == "delivered"
    assert [a.get("status") for a in callback["attempts"]] == [200, 500]


@pytest.mark.parametrize("error", ["conflict", "outage"])
async def test_lost_answers_at_every_callback_write_post_once(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch, error: str
) -> None:
    run_id = await _background(callback_env, receiver.url)
    with lose_answers(monkeypatch, layout.CALLBACKS, name=run_id, times=3, error=error) as hits:
        await QueueRunner(callback_env).run_until_idle()
    assert len(hits.writes) == 3
    assert len(receiver.deliveries) == 1
    callback = await _callback(callback_env, run_id)
    assert callback["outcome"] == "delivered" and [a["status"] for a in callback["attempts"]] == [200]


# -- claims: a live one defers a duplicate, a stale one is taken over ------------------------------


async def _claim(run_id: str, token: str, until: float) -> None:
    store = callback_store(wiring.container_for(wiring.load_settings()))
    await store.update(run_id, lambda s: dataclasses.replace(s, claim=DeliveryLease(token, until - 30, until)))


async def _pending_after_one_failure(host: FunctionHost, receiver: WebhookReceiver) -> str:
    receiver.fail_first = 1
    run_id = await _background(host, receiver.url)
    await QueueRunner(host).run_until_idle()
    assert [d.answered for d in receiver.deliveries] == [500]
    return run_id


async def test_a_claim_left_by_a_crashed_instance_is_taken_over_once_stale(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    from resumable.background import callbacks as deliveries

    monkeypatch.setenv("CALLBACK_RETRY_SCHEDULE", "1")
    # A claim lapses CLAIM_SECONDS after it was written, by the storage service's clock.
    monkeypatch.setattr(deliveries, "CLAIM_SECONDS", 0.0)
    run_id = await _pending_after_one_failure(callback_env, receiver)
    await _claim(run_id, "crashed", until=time.time() - 1)  # it claimed the retry, then died
    runner = QueueRunner(callback_env)
    async with asyncio.timeout(10):  # the retry's message becomes visible in 1 to 2 s
        while len(receiver.deliveries) < 2:
            await runner.run_until_idle()
            await asyncio.sleep(0.1)
    assert [d.answered for d in receiver.deliveries] == [500, 200]
    callback = await _callback(callback_env, run_id)
    assert callback["outcome"] == "delivered"
    assert [a.get("status") or a.get("error") for a in callback["attempts"]] == [500, "interrupted", 200]


async def test_a_live_claim_defers_another_delivery_and_its_own_message_resumes_it(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch, azurite: Azurite
) -> None:
    monkeypatch.setenv("CALLBACK_RETRY_SCHEDULE", "600")
    run_id = await _pending_after_one_failure(callback_env, receiver)
    store = callback_store(wiring.container_for(wiring.load_settings()))
    await store.update(run_id, lambda s: dataclasses.replace(s, next_at=time.time(), wait=0.0))  # the retry is due
    await _claim(run_id, "holder", until=time.time() + 30)  # another instance is POSTing it now
    queued = await _queued(azurite, os.environ["RUNS_QUEUE"])
    await callback_env.invoke_queue_trigger("run_in_background", _message(f"callback.{run_id}", "duplicate"))
    assert len(receiver.deliveries) == 1  # the duplicate did not POST...
    assert await _queued(azurite, os.environ["RUNS_QUEUE"]) == queued + 1  # ...it comes back after the claim
    # The holder's own message, delivered again by the host (its invocation failed), resumes.
    await callback_env.invoke_queue_trigger("run_in_background", _message(f"callback.{run_id}", "holder", 2))
    assert [d.answered for d in receiver.deliveries] == [500, 200]
    callback = await _callback(callback_env, run_id)
    assert callback["outcome"] == "delivered"
    assert [a.get("status") or a.get("error") for a in callback["attempts"]] == [500, "interrupted", 200]


# -- 20: one delivery chain per run ---------------------------------------------------------------


async def test_two_concurrent_drains_of_a_finished_turn_start_one_delivery_chain(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the drain that finished the turn schedules its callback, another instance
    gets a second delivery of the turn's message and finds it finished too."""
    run_id = await _background(callback_env, receiver.url, "/api/threads/drained/runs")
    callback_messages: list[str] = []

    async def second_drain_meanwhile(original: Enqueue, queue: Any, message: str, delay: int) -> None:
        if not message.startswith("callback."):
            return
        callback_messages.append(message)
        if len(callback_messages) == 1:
            await original(queue, run_id)  # the turn's message, delivered again...
            assert await QueueRunner(callback_env).run_once() == 1  # ...to another instance

    _wrap_enqueue(monkeypatch, second_drain_meanwhile)
    await QueueRunner(callback_env).run_until_idle()
    assert callback_messages == [f"callback.{run_id}"]
    assert len(receiver.deliveries) == 1


async def test_a_failed_first_enqueue_undoes_the_schedule_so_the_redelivery_starts_the_chain(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch, eager_host_json: Path
) -> None:
    failed: list[str] = []

    async def first_callback_enqueue_fails(original: Enqueue, queue: Any, message: str, delay: int) -> None:
        if message.startswith("callback.") and not failed:
            failed.append(message)
            raise StorageUnavailable("Queue storage could not be reached during enqueue run.")

    _wrap_enqueue(monkeypatch, first_callback_enqueue_fails)
    run_id = await _background(callback_env, receiver.url, "/api/threads/undone/runs")
    await QueueRunner(callback_env, host_json=eager_host_json).run_until_idle()
    assert failed == [f"callback.{run_id}"]
    assert len(receiver.deliveries) == 1
    assert (await _callback(callback_env, run_id))["outcome"] == "delivered"


# -- 21: only finished, scheduled runs are reported -----------------------------------------------


async def test_a_forged_callback_message_for_a_queued_run_posts_nothing(
    callback_env: FunctionHost, receiver: WebhookReceiver
) -> None:
    run_id = await _background(callback_env, receiver.url)
    assert await _callback(callback_env, run_id) == {"url": receiver.url, "outcome": "pending", "attempts": []}
    await callback_env.invoke_queue_trigger("run_in_background", _message(f"callback.{run_id}", "forged"))
    assert receiver.deliveries == []
    # The run then finishes, and its one real callback reports the real outcome.
    await QueueRunner(callback_env).run_until_idle()
    assert [d.json()["status"] for d in receiver.deliveries] == ["succeeded"]
    assert (await _callback(callback_env, run_id))["outcome"] == "delivered"


# -- 22: nothing pending forever, no retry before its time ----------------------------------------


async def test_a_poisoned_callback_message_gives_up_with_its_reason(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALLBACK_RETRY_SCHEDULE", "600")  # the next attempt waits on the queue
    receiver.status = 503
    run_id = await _background(callback_env, receiver.url)
    await QueueRunner(callback_env).run_until_idle()
    assert (await _callback(callback_env, run_id))["outcome"] == "pending"
    # The retry's message then fails maxDequeueCount times (storage trouble): the host
    # moves it to the poison queue.
    poisoned = _message(f"callback.{run_id}", "retry", dequeue_count=5)
    await callback_env.invoke_queue_trigger("fail_poisoned_run", poisoned)
    callback = await _callback(callback_env, run_id)
    assert (callback["outcome"], callback.get("reason")) == ("gave_up", "queue_deliveries_exhausted")
    assert len(callback["attempts"]) == 1
    assert len(receiver.deliveries) == 1


async def test_a_failed_re_enqueue_does_not_post_again_before_the_retry_is_due(
    callback_env: FunctionHost,
    receiver: WebhookReceiver,
    monkeypatch: pytest.MonkeyPatch,
    eager_host_json: Path,
    azurite: Azurite,
    queue_env: str,
) -> None:
    monkeypatch.setenv("CALLBACK_RETRY_SCHEDULE", "60")
    receiver.fail_first = 1
    failed: list[str] = []

    async def first_retry_fails(original: Enqueue, queue: Any, message: str, delay: int) -> None:
        if message.startswith("callback.") and delay > 0 and not failed:
            failed.append(message)
            raise StorageUnavailable("Queue storage could not be reached during enqueue run.")

    _wrap_enqueue(monkeypatch, first_retry_fails)
    run_id = await _background(callback_env, receiver.url)
    started = time.time()
    await QueueRunner(callback_env, host_json=eager_host_json).run_until_idle()
    assert failed  # the fault hit: the host redelivered the attempt's message at once
    assert [d.answered for d in receiver.deliveries] == [500]  # and it did not POST again
    callback = await _callback(callback_env, run_id)
    assert callback["outcome"] == "pending" and len(callback["attempts"]) == 1
    assert await _queued(azurite, queue_env) == 1  # the retry waits on the queue for its time
    assert time.time() - started < 30


async def test_a_callback_that_cannot_be_signed_at_delivery_gives_up_unsent(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = await _background(callback_env, receiver.url)
    monkeypatch.delenv("CALLBACK_SECRET")  # removed from the deployment after the accept
    await QueueRunner(callback_env).run_until_idle()
    assert receiver.deliveries == []  # never sent unsigned
    callback = await _callback(callback_env, run_id)
    assert (callback["outcome"], callback["reason"]) == ("gave_up", "server_misconfigured")
    assert [a["error"] for a in callback["attempts"]] == ["server_misconfigured"]
