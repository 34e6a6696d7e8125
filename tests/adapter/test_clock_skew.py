""" "Has this lapsed?" is read on the storage service's clock, never by comparing one
instance's wall clock with a time another instance wrote.

Each test runs one side of a race on an instance whose wall clock is minutes off
(``tests/clocks.py``): an idempotency claim, a callback delivery's claim, a thread head
taken from the warm cache. A record's age is its Last-Modified against the Date of the
answer that carried it (``Stored.age``), both the service's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from devtools.function_host import FunctionHost
from devtools.webhook_receiver import WebhookReceiver
from functions_adapter import wiring
from resumable.background.callback_records import callback_store
from tests import recording_workflow
from tests.adapter.test_callback_deliveries import _claim, _message, _pending_after_one_failure
from tests.adapter.test_idempotency import keyed
from tests.clocks import skew_clocks
from tests.library.test_checkpoint_cache import other_instance, post, turn_on


def _tails() -> int:
    return sum(1 for executor, _ in recording_workflow.CALLS if executor == "tail")


# -- the idempotency claim -----------------------------------------------------------------


async def test_an_instance_whose_clock_runs_ahead_does_not_take_over_a_live_idempotency_claim(
    recording: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {"messages": "wait for the payment"}
    first = asyncio.ensure_future(keyed(recording, "pay-skewed", body, url="/api/threads/skew/runs"))
    await asyncio.wait_for(recording_workflow.WAITING.wait(), timeout=10)
    with monkeypatch.context() as instance:
        skew_clocks(instance, 600)  # the retry reaches an instance ten minutes ahead
        duplicate = await keyed(recording, "pay-skewed", body, url="/api/threads/skew/runs")
    assert (duplicate.status, (await duplicate.json())["error"]["code"]) == (409, "request_in_progress")
    recording_workflow.RELEASE.set()
    assert (await first).status == 200
    assert _tails() == 1  # the turn ran once


async def test_an_instance_whose_clock_runs_behind_still_takes_over_an_abandoned_claim(
    recording: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder stopped renewing (it died, as far as anyone can tell): after the claim's
    time on the service's clock, a retry takes it over, even on an instance an hour behind."""
    from resumable.core import idempotency

    monkeypatch.setattr(idempotency, "RENEW_SECONDS", 3600)
    monkeypatch.setattr(idempotency, "CLAIM_SECONDS", 0)
    body = {"messages": "wait, then stall"}
    first = asyncio.ensure_future(keyed(recording, "stalled", body))
    await asyncio.wait_for(recording_workflow.WAITING.wait(), timeout=10)
    recording_workflow.WAITING.clear()
    await asyncio.sleep(2.1)  # the service's clock has whole seconds
    with monkeypatch.context() as instance:
        skew_clocks(instance, -3600)
        second = asyncio.ensure_future(keyed(recording, "stalled", body))
        done, _ = await asyncio.wait(
            {second, asyncio.ensure_future(recording_workflow.WAITING.wait())},
            timeout=10,
            return_when=asyncio.FIRST_COMPLETED,
        )
    assert second not in done, "the retry was refused instead of taking the abandoned claim over"
    recording_workflow.RELEASE.set()
    results = [await first, await second]
    assert sorted(r.status for r in results) == [200, 409]  # one commit (the claim's planned checkpoint)


# -- a callback delivery's claim -----------------------------------------------------------


async def test_an_instance_whose_clock_runs_ahead_does_not_take_over_a_live_callback_claim(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another instance claimed the due retry and is POSTing it now; the queue hands a
    duplicate of the message to an instance two minutes ahead: it must not POST too."""
    monkeypatch.setenv("CALLBACK_RETRY_SCHEDULE", "600")
    run_id = await _pending_after_one_failure(callback_env, receiver)
    store = callback_store(wiring.container_for(wiring.load_settings()))
    await store.update(run_id, lambda s: dataclasses.replace(s, next_at=time.time(), wait=0.0))  # the retry is due
    await _claim(run_id, "holder", until=time.time() + 30)
    with monkeypatch.context() as instance:
        skew_clocks(instance, 120)
        await callback_env.invoke_queue_trigger("run_in_background", _message(f"callback.{run_id}", "duplicate"))
    assert len(receiver.deliveries) == 1  # only the first attempt's POST: the duplicate waited
    stored = await store.get(run_id)
    assert stored is not None and stored.value.claim is not None and stored.value.claim.token == "holder"


# -- the thread head taken from the warm cache ---------------------------------------------


async def test_an_instance_whose_clock_runs_behind_tells_a_stale_cached_head_from_a_race(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This instance cached the thread's head; another instance advanced it since, before
    this turn began. The swap on the stale head fails, and that is no race: the turn runs on
    the real head (200), even on an instance ten minutes behind the one that advanced it."""
    await post(host, "/api/threads/stale-head/runs", {"messages": "one"})
    elsewhere = await turn_on(other_instance(), "stale-head", "two")
    with monkeypatch.context() as instance:
        skew_clocks(instance, -600)
        status, mine = await post(host, "/api/threads/stale-head/runs", {"messages": "three"})
    assert status == 200, mine
    assert mine["previous_checkpoint_id"] == elsewhere["checkpoint_id"]


async def test_an_instance_whose_clock_runs_ahead_still_reports_a_race_on_a_cached_head(
    recording: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other way round: another instance commits while this turn runs on its cached
    head. That is a race (409 ``thread_busy`` under ``reject``), not a stale cache, even on
    an instance ten minutes ahead of the one that committed."""
    url = "/api/threads/raced-head/runs"
    await post(recording, url, {"messages": "one"})
    with monkeypatch.context() as instance:
        skew_clocks(instance, 600)  # while this turn starts (one process: one clock at a time)
        mine = asyncio.ensure_future(post(recording, url, {"messages": "wait for the race"}))
        await asyncio.wait_for(recording_workflow.WAITING.wait(), timeout=10)
    await asyncio.sleep(2.5)  # past the service clock's resolution: the order is certain
    await turn_on(other_instance(), "raced-head", "two")  # committed on a correct clock
    recording_workflow.RELEASE.set()
    status, body = await mine
    assert (status, body["error"]["code"]) == (409, "thread_busy")


async def test_an_instance_whose_clock_runs_ahead_still_replays_a_key_that_has_not_expired(
    recording: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A completed key replays for ``IDEMPOTENCY_TTL_SECONDS`` (a day) after it completed, by
    the service's clock: a retry reaching an instance two days ahead replays, it runs nothing."""
    first = await keyed(recording, "paid", {"messages": "charge card"})
    assert first.status == 200
    calls = list(recording_workflow.CALLS)
    with monkeypatch.context() as instance:
        skew_clocks(instance, 2 * 86_400)
        retry = await keyed(recording, "paid", {"messages": "charge card"})
    assert (retry.status, await retry.body()) == (200, await first.body())
    assert calls == recording_workflow.CALLS


async def test_an_instance_whose_clock_runs_ahead_does_not_send_a_callback_retry_early(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first POST failed and the retry is due in ten minutes; the host delivers the
    retry's message at once (its re-enqueue failed, say) to an instance a quarter of an hour
    ahead: it waits out the retry's delay, by the service's clock, instead of POSTing now."""
    monkeypatch.setenv("CALLBACK_RETRY_SCHEDULE", "600")
    run_id = await _pending_after_one_failure(callback_env, receiver)
    with monkeypatch.context() as instance:
        skew_clocks(instance, 900)
        await callback_env.invoke_queue_trigger("run_in_background", _message(f"callback.{run_id}", "early"))
    assert len(receiver.deliveries) == 1  # only the first attempt's POST
