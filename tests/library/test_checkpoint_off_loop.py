"""Large checkpoints do not stall the event loop: /api/health answers while one decodes,
and a burst of resumes takes turns for the worker's transfer slots."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import AsyncExitStack
from typing import Any

import pytest
from agent_framework import Message
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from devtools.function_host import FunctionHost
from functions_adapter import wiring
from functions_adapter.settings import Settings
from resumable.checkpoints import transfers
from resumable.checkpoints.af_internals import encode_checkpoint_value
from resumable.checkpoints.transfers import MAX_IN_FLIGHT, OFF_LOOP_BYTES
from resumable.storage import clients as storage_client
from tests.tamper import attacker_container, first_turn


async def test_health_answers_while_a_large_checkpoint_decodes(
    host: FunctionHost, storage_env: str, spans: InMemorySpanExporter
) -> None:
    genuine = await first_turn(host)
    async with attacker_container(storage_env) as client:
        raw = json.loads(await (await client.download_blob(f"checkpoints/{genuine['checkpoint_id']}.json")).readall())
        # A long conversation kept as messages: thousands of small pickles, ~3 MB.
        history = [Message(role="user", contents=[f"message {i} " + "lorem ipsum " * 8]) for i in range(2500)]
        raw["state"]["history"] = encode_checkpoint_value(history)
        raw["checkpoint_id"] = big_id = uuid.uuid4().hex
        blob = json.dumps(raw).encode()
        assert len(blob) > 20 * OFF_LOOP_BYTES
        await client.upload_blob(f"checkpoints/{big_id}.json", blob)

    resume = asyncio.ensure_future(
        host.request("POST", "/api/runs", json_body={"checkpoint_id": big_id, "messages": "again"})
    )
    answered: list[int] = []
    while not resume.done():
        health = await host.request("GET", "/api/health")
        assert health.status == 200
        answered.append(time.time_ns())
        await asyncio.sleep(0.001)
    response = await resume
    assert response.status == 200, await response.body()

    [load] = [s for s in spans.get_finished_spans() if s.name == "checkpoint.load"]
    decode_ns = int(float(load.attributes["checkpoint.decode_ms"]) * 1e6)
    started, ended = load.end_time - decode_ns, load.end_time
    during = [t for t in answered if started <= t <= ended]
    print(f"decode of {len(blob) / 1e6:.1f} MB took {decode_ns / 1e6:.0f} ms; /api/health answered {len(during)} times")
    assert during, "the event loop was blocked for the whole decode"


async def test_health_answers_while_a_large_new_checkpoint_encodes(
    host: FunctionHost, storage_env: str, spans: InMemorySpanExporter
) -> None:
    """A checkpoint's size is known only once it is encoded: a large one that follows no
    large checkpoint (a first run's, or one that grew in a single turn) encodes off the loop too."""
    genuine = await first_turn(host)
    store = wiring.build_service(Settings.from_env()).store
    checkpoint = await store.load(genuine["checkpoint_id"])
    # A conversation that grew to thousands of messages in one turn, from a small checkpoint.
    checkpoint.state["history"] = [
        Message(role="user", contents=[f"message {i} " + "lorem ipsum " * 8]) for i in range(2500)
    ]
    checkpoint.checkpoint_id, checkpoint.previous_checkpoint_id = uuid.uuid4().hex, genuine["checkpoint_id"]

    spans.clear()
    save = asyncio.ensure_future(store.save(checkpoint))
    answered: list[int] = []
    while not save.done():
        health = await host.request("GET", "/api/health")
        assert health.status == 200
        answered.append(time.time_ns())
        await asyncio.sleep(0.001)
    await save

    [saved] = [s for s in spans.get_finished_spans() if s.name == "checkpoint.save"]
    assert saved.attributes["checkpoint.size_bytes"] > 20 * OFF_LOOP_BYTES
    encode_ns = int(float(saved.attributes["checkpoint.encode_ms"]) * 1e6)
    # The save takes its transfer slot at once (nothing else runs), then encodes.
    started, ended = saved.start_time, saved.start_time + encode_ns
    during = [t for t in answered if started <= t <= ended]
    print(f"encode took {encode_ns / 1e6:.0f} ms; /api/health answered {len(during)} times")
    assert during, "the event loop was blocked for the whole encode"


async def test_a_worker_runs_a_bounded_number_of_checkpoint_transfers_at_once(
    host: FunctionHost, storage_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst of resumes queues for the worker's transfer slots instead of all loading at once."""
    in_flight = peak = 0

    def sent(request: Any) -> None:
        nonlocal in_flight, peak
        if "/checkpoints/" in request.http_request.url:
            in_flight += 1
            peak = max(peak, in_flight)

    def received(response: Any) -> None:
        nonlocal in_flight
        if "/checkpoints/" in response.http_request.url:
            in_flight -= 1

    monkeypatch.setattr(storage_client, "request_hook", sent)
    monkeypatch.setattr(storage_client, "response_hook", received)
    genuine = await first_turn(host)
    body = {"checkpoint_id": genuine["checkpoint_id"], "messages": "again"}
    burst = 4 * MAX_IN_FLIGHT
    responses = await asyncio.gather(*(host.request("POST", "/api/runs", json_body=body) for _ in range(burst)))
    assert [r.status for r in responses] == [200] * burst
    assert in_flight == 0
    assert 1 < peak <= MAX_IN_FLIGHT, peak


async def test_a_request_never_waits_for_a_slot_longer_than_the_bound(
    host: FunctionHost, storage_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Transfers stuck elsewhere (a hung storage call) hold every slot: a resume still runs."""
    genuine = await first_turn(host)
    monkeypatch.setattr(transfers, "MAX_WAIT_SECONDS", 0.05)
    async with AsyncExitStack() as held:
        for _ in range(MAX_IN_FLIGHT):
            await held.enter_async_context(transfers.transfer_slot())
        body = {"checkpoint_id": genuine["checkpoint_id"], "messages": "again"}
        response = await asyncio.wait_for(host.request("POST", "/api/runs", json_body=body), 10)
        assert response.status == 200, await response.body()
