"""Demo: a three-turn conversation resumed from Blob checkpoints, one workflow run per turn,
then a streamed turn, a webhook retry on a thread, and a background turn (202, a queue
runner, then the caller joins its stream and reads its status).

Starts Azurite (unless CHECKPOINT_STORAGE is already set), then drives the registered
functions in-process exactly as the Functions host would. Each section is headed by the HTTP
call it makes. Each turn shows what it cost, counted where it happens: blob operations as
they leave the storage client, workflow runs by the framework's ``workflow.started`` span
events (on its run span, whatever the installed version names it). Next to it, the upstream
two-step pattern (restore run, then message run) is run on the same checkpoint and input, its
checkpoint reads and writes counted.

    python examples/three_turns.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_framework import InMemoryCheckpointStorage, Message, WorkflowCheckpoint
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from devtools.azurite import start_azurite
from devtools.function_host import FunctionHost, HostResponse
from devtools.op_counter import OperationCounter
from devtools.queue_runner import QueueRunner
from functions_adapter.settings import Settings
from functions_adapter.wiring import build_service, container_for
from resumable.base.tracing import WORKFLOW_STARTED_EVENT, is_workflow_run_span
from resumable.storage import clients as storage_client
from resumable.storage.clients import close_all
from resumable.storage.run_queue import close_all as close_queues
from workflows import load_spec


class Meter:
    """What one call costs: blob operations leaving the client, and workflow runs started."""

    def __init__(self) -> None:
        self.ops = OperationCounter()
        storage_client.request_hook = self.ops  # before any client is built
        self.spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        trace.set_tracer_provider(provider)

    def reset(self) -> None:
        self.ops.reset()
        self.spans.clear()

    def runs(self) -> int:
        return count_runs(self.spans.get_finished_spans())

    def storage(self) -> str:
        counts = self.ops.counts
        return " + ".join(f"{counts[m]} {m}" for m in ("GET", "HEAD", "PUT", "DELETE") if counts[m]) or "none"


def count_runs(spans: Sequence[ReadableSpan]) -> int:
    """The framework's ``started`` events, one per workflow run (an event on its run span)."""
    runs = [s for s in spans if is_workflow_run_span(s.name)]
    return sum(1 for s in runs for e in s.events if e.name == WORKFLOW_STARTED_EVENT)


def heading(call: str, body: dict | None = None) -> None:
    print(f"\n{call}" + (f"  {json.dumps(body)}" if body is not None else ""))


def runs(n: int) -> str:
    return f"{n} workflow run{'s' * (n != 1)} ({n} `started` event{'s' * (n != 1)})"


async def post_run(host: FunctionHost, meter: Meter, body: dict, headers: dict | None = None) -> HostResponse:
    shown = "".join(f"  {name}: {value}" for name, value in (headers or {}).items())
    heading(f"POST /api/runs{shown}", body)
    meter.reset()
    return await host.request("POST", "/api/runs", json_body=body, headers=headers)


class CountingStorage(InMemoryCheckpointStorage):
    """The framework's checkpoint storage, counting its reads and writes (each a blob GET or PUT
    on Blob Storage). In memory: this app's guarded store refuses the two-step pattern's
    mid-run checkpoints (in-flight types it does not allow), and the framework only logs that."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = self.writes = 0

    async def load(self, checkpoint_id: str) -> WorkflowCheckpoint:
        self.reads += 1
        return await super().load(checkpoint_id)

    async def save(self, checkpoint: WorkflowCheckpoint) -> str:
        self.writes += 1
        return await super().save(checkpoint)


async def two_step(checkpoint_id: str, text: str) -> None:
    """The upstream pattern on the same checkpoint and input: ``run(checkpoint_id=...)``, then
    ``run(message)``, with runtime checkpointing as the framework does it."""
    settings = Settings.from_env()
    storage = CountingStorage()
    await InMemoryCheckpointStorage.save(storage, await build_service(settings).store.load(checkpoint_id))
    workflow = load_spec(settings.workflow).build()
    restored = [e async for e in workflow.run(checkpoint_id=checkpoint_id, checkpoint_storage=storage, stream=True)]
    restore_writes = storage.writes
    ran = [
        e async for e in workflow.run([Message(role="user", contents=[text])], checkpoint_storage=storage, stream=True)
    ]
    started = sum(e.type == "started" for e in restored + ran)
    steps = sum(e.type == "superstep_started" for e in ran)
    print(
        f"  two-step pattern, same turn: {runs(started)}, checkpoint storage {storage.reads} GET + {storage.writes} PUT"
        f" (the restore run writes {restore_writes}, the message run N + 1 = {storage.writes - restore_writes}"
        f" for its N = {steps} supersteps)"
    )


async def converse(host: FunctionHost, meter: Meter) -> None:
    checkpoint_id = None
    turns = ["Hello, I am planning a trip.", "Make it a week in Lisbon.", "Book it, pending approval."]
    for text in turns:
        resp = await post_run(host, meter, {"checkpoint_id": checkpoint_id, "messages": text})
        body = await resp.json()
        if resp.status != 200:
            raise SystemExit(f"HTTP {resp.status}: {body}")
        print(f"  user> {text}")
        for message in body["messages"]:
            print(f"  bot > {message['content']}")
        print(f"  this call: {runs(meter.runs())}, blob storage {meter.storage()}")
        if checkpoint_id:
            await two_step(checkpoint_id, text)
        if body["status"] == "pending_requests":
            request = body["pending_requests"][0]
            print("  (paused; the reply's pending request, as JSON:)")
            print(_indent(json.dumps(request, indent=2), "    "))
            answer = {"checkpoint_id": body["checkpoint_id"], "responses": {request["request_id"]: "approved"}}
            resp = await post_run(host, meter, answer)
            body = await resp.json()
            print(f"  approver> approved\n  bot > {body['messages'][0]['content']}")
            print(f"  this call: {runs(meter.runs())}, blob storage {meter.storage()}")
        checkpoint_id = body["checkpoint_id"]

    heading("GET /api/checkpoints/{checkpoint_id}, from the newest back (read from Blob metadata):")
    latest = checkpoint_id
    while checkpoint_id:
        info = await (await host.request("GET", f"/api/checkpoints/{checkpoint_id}")).json()
        print(f"  {info['checkpoint_id']}  status={info['status']:<16} size={info['size_bytes']}B")
        checkpoint_id = info["previous_checkpoint_id"]
    print(
        "  Three turns, four checkpoints: each run saves one, and the approval was a run of its own\n"
        "  (it resumed the paused checkpoint with `responses` instead of `messages`)."
    )

    text = "What did I say?"
    resp = await post_run(host, meter, {"checkpoint_id": latest, "messages": text}, {"Accept": "text/event-stream"})
    print("  A fourth turn, streamed as server-sent events:")
    async for event, data in resp.events():
        shown = data if event != "done" else {"checkpoint_id": data["checkpoint_id"]}
        print(f"  event: {event:<12} {json.dumps(shown)}")
    print(f"  this call: {runs(meter.runs())}, blob storage {meter.storage()}")
    await two_step(latest, text)
    await webhook_retry(host, meter)
    await background_turn(host)


async def webhook_retry(host: FunctionHost, meter: Meter) -> None:
    body = {"messages": "Customer says: the invoice is wrong."}
    heading("POST /api/threads/ticket-42/runs  Idempotency-Key: delivery-7f3a", body)
    print("  A webhook delivers a turn on thread 'ticket-42', then retries it (same Idempotency-Key):")
    delivered: list[str] = []
    for attempt in ("first delivery", "retry"):
        blobs_before = await _blob_names()
        meter.reset()
        resp = await host.request(
            "POST", "/api/threads/ticket-42/runs", json_body=body, headers={"Idempotency-Key": "delivery-7f3a"}
        )
        answer = await resp.json()
        cost = f"{runs(meter.runs())}, blob storage {meter.storage()}"
        written = sorted(await _blob_names() - blobs_before)
        delivered.append(answer["checkpoint_id"])
        kinds = f" ({', '.join(name.split('/')[0] + '/…' for name in written)})" if written else ""
        checkpoint = answer["checkpoint_id"]
        print(f"  {attempt:<15} HTTP {resp.status}  checkpoint {checkpoint}  new blobs: {len(written)}{kinds}")
        print(f"  {'':<15} this call: {cost}")
    heading("GET /api/threads/ticket-42")
    thread = await (await host.request("GET", "/api/threads/ticket-42")).json()
    same = "the same checkpoint ID" if delivered[0] == delivered[1] else "DIFFERENT checkpoint IDs"
    print(f"  The retry got {same} and created no blob: the first reply, replayed.")
    print(f"  thread head {thread['checkpoint_id']} after {thread['turns']} turn(s): the retry ran nothing")


async def background_turn(host: FunctionHost) -> None:
    """A sender that cannot wait (Slack: 3 s): 202 at once, a queue runner does the turn."""
    body = {"messages": "Customer adds: and it was charged twice."}
    heading("POST /api/threads/ticket-42/runs  Prefer: respond-async", body)
    print("  A webhook that cannot wait asks for a background turn on 'ticket-42':")
    started = time.perf_counter()
    resp = await host.request(
        "POST",
        "/api/threads/ticket-42/runs",
        json_body=body,
        headers={"Prefer": "respond-async", "Idempotency-Key": "delivery-8b21"},
    )
    accepted = await resp.json()
    waited = (time.perf_counter() - started) * 1000
    print(f"  HTTP {resp.status} in {waited:.0f} ms  Location: {resp.headers['location']}  status={accepted['status']}")
    run_id = accepted["run_id"]
    print("  The queue runner (the Functions host's part) pulls the message and runs the turn:")
    processed = await QueueRunner(host).run_until_idle()
    print(f"  processed {processed} message(s)")
    heading(f"GET /api/runs/{run_id}/stream")
    print("  The caller joins the run's stream (replayed from the start, since the run is done):")
    joined = await host.request("GET", f"/api/runs/{run_id}/stream")
    async for event, data in joined.events():
        shown = data if event != "done" else {"checkpoint_id": data["checkpoint_id"]}
        print(f"  event: {event:<12} {json.dumps(shown)}")
    heading(f"GET /api/runs/{run_id}")
    status = await (await host.request("GET", f"/api/runs/{run_id}")).json()
    reply = status["result"]["messages"][0]["content"] if status["result"] else None
    print(f"  GET /api/runs/{run_id}: status={status['status']} attempts={status['attempts']}")
    print(f"  bot > {reply}")


async def _blob_names() -> set[str]:
    """Every blob in the checkpoint container (checkpoints, thread pointers, idempotency records)."""
    container = container_for(Settings.from_env())
    return {blob.name async for blob in container.list_blobs()}


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


async def main() -> None:
    azurite = None
    if not os.environ.get("CHECKPOINT_STORAGE"):
        azurite = start_azurite()
        os.environ["CHECKPOINT_STORAGE"] = azurite.connection_string
        print(f"Azurite listening on 127.0.0.1:{azurite.port} (in memory)")
    # The run queue lives where the Functions host keeps its own state.
    os.environ.setdefault("AzureWebJobsStorage", os.environ["CHECKPOINT_STORAGE"])
    # The queue trigger's %RUNS_QUEUE% comes from app settings (local.settings.sample.json).
    os.environ.setdefault("RUNS_QUEUE", "runs")
    # Cold, like the two-step pattern each turn is compared with: a warm instance would take
    # the checkpoint the turn before wrote from its cache and skip the GET (docs/reliability.md).
    os.environ.setdefault("CHECKPOINT_CACHE_BYTES", "0")
    meter = Meter()
    try:
        import function_app

        host = FunctionHost(function_app.app)
        await build_service(Settings.from_env()).store.ensure_container()  # so turn 1 counts only itself
        await converse(host, meter)
    finally:
        await close_all()
        await close_queues()
        if azurite:
            azurite.stop()


if __name__ == "__main__":
    asyncio.run(main())
