"""Decoding a large checkpoint does not stall the event loop: /api/health answers meanwhile."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from agent_framework import Message
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from devtools.function_host import FunctionHost
from resumable.af_internals import encode_checkpoint_value
from resumable.blob_store import OFF_LOOP_BYTES
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
