"""What ``superstep`` durability costs a background thread turn (issue 41).

For a turn of 1, 10 and 50 supersteps (``loop 0``, ``loop 9``, ``loop 49`` of
``bench/loop_workflow.py``), under ``turn`` and under ``superstep`` durability: the storage
operations of its execution (counted where requests leave the client, through the registered
queue trigger, on the instance that committed the thread's head, as
``tests/adapter/test_background_costs.py`` counts the 8) and its time (median of ``--runs``).
The work a crash redoes is the crash drill's figure (``python -m bench.crash_drill``).

``python -m bench.durability [--runs 5]`` starts its own Azurite.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections import Counter
from typing import Any

SUPERSTEPS = (1, 10, 50)
MODES = ("turn", "superstep")


async def _measure(host: Any, counter: Any, queue: Any, supersteps: int, mode: str) -> tuple[Counter[str], float]:
    from azure.functions.queue import QueueMessage

    thread = f"cost-{uuid.uuid4().hex[:8]}"
    path = f"/api/threads/{thread}/runs"
    warm = await host.request("POST", path, json_body={"messages": "loop 0"})  # the thread has a head
    assert warm.status == 200, await warm.body()
    body = {"messages": f"loop {supersteps - 1}", "durability": mode}
    accepted = await host.request("POST", path, json_body=body, headers={"Prefer": "respond-async"})
    assert accepted.status == 202, await accepted.body()
    run_id = (await accepted.json())["run_id"]
    received = await anext(aiter(queue.receive_messages(visibility_timeout=600, max_messages=1)))
    message = QueueMessage(id=received.id, body=received.content.encode(), dequeue_count=1)
    await queue.delete_message(received)
    counter.reset()
    started = time.perf_counter()
    await host.triggers["run_in_background"].handler(message)
    elapsed = (time.perf_counter() - started) * 1000
    counts = Counter(counter.counts)
    status = await (await host.request("GET", f"/api/runs/{run_id}")).json()
    assert status["status"] == "succeeded", status
    return counts, elapsed


async def measure(runs: int) -> list[dict[str, Any]]:
    from azure.storage.queue import TextBase64DecodePolicy
    from azure.storage.queue.aio import QueueClient

    import workflows
    from devtools.azurite import start_azurite
    from devtools.function_host import FunctionHost
    from devtools.op_counter import OperationCounter
    from resumable.storage import clients as storage_client

    azurite = start_azurite()
    try:
        queue_name = f"cost-{uuid.uuid4().hex[:8]}"
        os.environ.update(
            {
                "CHECKPOINT_STORAGE": azurite.connection_string,
                "CHECKPOINT_CONTAINER": f"cost{uuid.uuid4().hex[:12]}",
                "AzureWebJobsStorage": azurite.connection_string,
                "RUNS_QUEUE": queue_name,
                "WORKFLOW": "loop",
            }
        )
        workflows.REGISTRY["loop"] = "bench.loop_workflow:SPEC"
        counter = OperationCounter()
        storage_client.request_hook = counter
        import function_app

        host = FunctionHost(function_app.app)
        rows = []
        queue = QueueClient.from_connection_string(
            azurite.connection_string, queue_name, message_decode_policy=TextBase64DecodePolicy()
        )
        async with queue:
            await _measure(host, counter, queue, 2, "superstep")  # warm-up: imports, container, queue
            for supersteps in SUPERSTEPS:
                for mode in MODES:
                    samples = [await _measure(host, counter, queue, supersteps, mode) for _ in range(runs)]
                    counts = samples[-1][0]
                    rows.append(
                        {
                            "supersteps": supersteps,
                            "mode": mode,
                            "ops": sum(counts.values()),
                            "by_method": dict(sorted(counts.items())),
                            "ms": statistics.median(ms for _, ms in samples),
                        }
                    )
        return rows
    finally:
        azurite.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rows = asyncio.run(measure(args.runs))
    print("| supersteps | durability | storage operations | by method | median ms |")
    print("|---:|---|---:|---|---:|")
    for row in rows:
        methods = ", ".join(f"{k} {v}" for k, v in row["by_method"].items())
        print(f"| {row['supersteps']} | {row['mode']} | {row['ops']} | {methods} | {row['ms']:.0f} |")


if __name__ == "__main__":
    main()
