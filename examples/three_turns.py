"""Demo: a three-turn conversation resumed from Blob checkpoints, one workflow run per turn,
then a streamed turn, a webhook retry on a thread, and a background turn (202, a queue
runner, then the caller joins its stream and reads its status).

Starts Azurite (unless CHECKPOINT_STORAGE is already set), then drives the registered
functions in-process exactly as the Functions host would, and prints each turn's
reply, the checkpoint chain read back from Blob Storage, a streamed turn, and a
webhook retry that replays the first answer without writing anything.

    python examples/three_turns.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from devtools.azurite import start_azurite
from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from functions_adapter.settings import Settings
from functions_adapter.wiring import container_for
from resumable.run_queue import close_all as close_queues
from resumable.storage_client import close_all


async def converse(host: FunctionHost) -> None:
    checkpoint_id = None
    turns = ["Hello, I am planning a trip.", "Make it a week in Lisbon.", "Book it, pending approval."]
    for text in turns:
        resp = await host.request("POST", "/api/runs", json_body={"checkpoint_id": checkpoint_id, "messages": text})
        body = await resp.json()
        if resp.status != 200:
            raise SystemExit(f"HTTP {resp.status}: {body}")
        for message in body["messages"]:
            print(f"  user> {text}\n  bot > {message['content']}")
        if body["status"] == "pending_requests":
            request = body["pending_requests"][0]
            print(f"  user> {text}\n  (paused; the reply's pending request, as JSON:)")
            print(_indent(json.dumps(request, indent=2), "    "))
            resp = await host.request(
                "POST",
                "/api/runs",
                json_body={"checkpoint_id": body["checkpoint_id"], "responses": {request["request_id"]: "approved"}},
            )
            body = await resp.json()
            print(f"  approver> approved\n  bot > {body['messages'][0]['content']}")
        checkpoint_id = body["checkpoint_id"]

    print("\nCheckpoint chain, newest first (read from Blob metadata):")
    latest = checkpoint_id
    while checkpoint_id:
        info = await (await host.request("GET", f"/api/checkpoints/{checkpoint_id}")).json()
        print(f"  {info['checkpoint_id']}  status={info['status']:<16} size={info['size_bytes']}B")
        checkpoint_id = info["previous_checkpoint_id"]
    print(
        "  Three turns, four checkpoints: each run saves one, and the approval was a run of its own\n"
        "  (it resumed the paused checkpoint with `responses` instead of `messages`)."
    )

    print("\nA fourth turn from the latest checkpoint, streamed as server-sent events:")
    resp = await host.request(
        "POST",
        "/api/runs",
        json_body={"checkpoint_id": latest, "messages": "What did I say?"},
        headers={"Accept": "text/event-stream"},
    )
    async for event, data in resp.events():
        shown = data if event != "done" else {"checkpoint_id": data["checkpoint_id"]}
        print(f"  event: {event:<12} {json.dumps(shown)}")

    print("\nA webhook delivers a turn on thread 'ticket-42', then retries it (same Idempotency-Key):")
    delivered: list[str] = []
    for attempt in ("first delivery", "retry"):
        blobs_before = await _blob_names()
        resp = await host.request(
            "POST",
            "/api/threads/ticket-42/runs",
            json_body={"messages": "Customer says: the invoice is wrong."},
            headers={"Idempotency-Key": "delivery-7f3a"},
        )
        body = await resp.json()
        written = sorted(await _blob_names() - blobs_before)
        delivered.append(body["checkpoint_id"])
        kinds = f" ({', '.join(name.split('/')[0] + '/…' for name in written)})" if written else ""
        print(
            f"  {attempt:<15} HTTP {resp.status}  checkpoint {body['checkpoint_id']}  new blobs: {len(written)}{kinds}"
        )
    thread = await (await host.request("GET", "/api/threads/ticket-42")).json()
    same = "the same checkpoint ID" if delivered[0] == delivered[1] else "DIFFERENT checkpoint IDs"
    print(f"  The retry got {same} and created no blob: the first reply, replayed.")
    print(f"  thread head {thread['checkpoint_id']} after {thread['turns']} turn(s): the retry ran nothing")

    await background_turn(host)


async def background_turn(host: FunctionHost) -> None:
    """A sender that cannot wait (Slack: 3 s): 202 at once, a queue runner does the turn."""
    print("\nA webhook that cannot wait asks for a background turn on 'ticket-42' (Prefer: respond-async):")
    started = time.perf_counter()
    resp = await host.request(
        "POST",
        "/api/threads/ticket-42/runs",
        json_body={"messages": "Customer adds: and it was charged twice."},
        headers={"Prefer": "respond-async", "Idempotency-Key": "delivery-8b21"},
    )
    accepted = await resp.json()
    waited = (time.perf_counter() - started) * 1000
    print(f"  HTTP {resp.status} in {waited:.0f} ms  Location: {resp.headers['location']}  status={accepted['status']}")
    run_id = accepted["run_id"]
    print("  The queue runner (the Functions host's part) pulls the message and runs the turn:")
    processed = await QueueRunner(host).run_until_idle()
    print(f"  processed {processed} message(s)")
    print("  The caller joins the run's stream (replayed from the start, since the run is done):")
    joined = await host.request("GET", f"/api/runs/{run_id}/stream")
    async for event, data in joined.events():
        shown = data if event != "done" else {"checkpoint_id": data["checkpoint_id"]}
        print(f"  event: {event:<12} {json.dumps(shown)}")
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
        print(f"Azurite listening on 127.0.0.1:{azurite.port} (in memory)\n")
    # The run queue lives where the Functions host keeps its own state.
    os.environ.setdefault("AzureWebJobsStorage", os.environ["CHECKPOINT_STORAGE"])
    # The queue trigger's %RUNS_QUEUE% comes from app settings (local.settings.sample.json).
    os.environ.setdefault("RUNS_QUEUE", "runs")
    try:
        import function_app

        await converse(FunctionHost(function_app.app))
    finally:
        await close_all()
        await close_queues()
        if azurite:
            azurite.stop()


if __name__ == "__main__":
    asyncio.run(main())
