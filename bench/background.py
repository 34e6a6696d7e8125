"""Background runs: what the 202 costs a webhook sender, and what a run costs afterwards.

Measured side by side in one run, against the best alternative a caller has without
background runs: the synchronous call itself (which a sender can only use when the
workflow is faster than its deadline).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from devtools.queue_runner import QueueRunner

ASYNC = {"Prefer": "respond-async"}


def _split(log: list[tuple[str, str]]) -> tuple[int, int]:
    """(blob operations, queue operations) in an operation log, told apart by endpoint."""
    connection = os.environ.get("AzureWebJobsStorage", "")  # noqa: SIM112 - the platform's own name
    settings = dict(part.split("=", 1) for part in connection.split(";") if "=" in part)
    queue = sum(1 for _, url in log if url.startswith(settings["QueueEndpoint"]))
    return len(log) - queue, queue


async def background_runs(bench: Any, report: Any, summary: Any, ms: Any, interleaved: Any) -> None:
    """Section: 202 latency and storage operations, next to the synchronous call."""
    host, counter, plan = bench.host, bench.counter, bench.plan
    bench.use(2, 20 * 1024)
    base = await bench.base_checkpoint()
    body = {"checkpoint_id": base, "messages": "next"}

    async def accept() -> dict[str, Any]:
        response = await host.request("POST", "/api/runs", json_body=body, headers=ASYNC)
        if response.status != 202:
            raise RuntimeError(f"HTTP {response.status}: {await response.body()}")
        return await response.json()

    async def synchronous() -> None:
        await bench.post(body)

    runner = QueueRunner(host)
    samples = await interleaved(plan, accept=accept, synchronous=synchronous)
    await runner.run_until_idle(limit_seconds=300)  # drain what the timing loop queued
    (a_med, a_p99), (s_med, s_p99) = summary(samples["accept"]), summary(samples["synchronous"])

    counter.reset()
    run_id = (await accept())["run_id"]
    accept_blob, accept_queue = _split(counter.log)
    counter.reset()
    started = time.perf_counter()
    await runner.run_until_idle(limit_seconds=60)
    run_ms = (time.perf_counter() - started) * 1000
    run_blob, run_queue = _split(counter.log)
    status = await (await host.request("GET", f"/api/runs/{run_id}")).json()
    assert status["status"] == "succeeded", status

    # End to end as a caller sees it: 202, then a long-poll until the runner finishes it.
    latencies: list[float] = []
    runner.start()
    try:
        for _ in range(max(3, plan.iterations // 4)):
            started = time.perf_counter()
            run_id = (await accept())["run_id"]
            polled = await host.request("GET", f"/api/runs/{run_id}", headers={"Prefer": "wait=30"})
            assert (await polled.json())["status"] == "succeeded"
            latencies.append((time.perf_counter() - started) * 1000)
    finally:
        await runner.stop()
    e_med, e_p99 = summary(latencies)
    report.table(
        "7. Background runs: the 202 next to the synchronous call (20 KB checkpoint, 2 supersteps)",
        ["what", "p50 ms", "p99 ms", "blob ops", "queue ops (app)"],
        [
            ["202 accept (`Prefer: respond-async`)", ms(a_med), ms(a_p99), accept_blob, accept_queue],
            ["synchronous `POST /api/runs`", ms(s_med), ms(s_p99), "2", "0"],
            ["background execution of that run (queue trigger)", ms(run_ms), "", run_blob, run_queue],
            ["202 → `succeeded` seen by a long-poll (runner polling)", ms(e_med), ms(e_p99), "", ""],
        ],
        f"Accept / synchronous p50: **{a_med / s_med:.2f}×**. The accept loads and validates the checkpoint "
        "(one blob read), enqueues, and writes the run record; no executor runs, so its cost does not grow "
        "with the workflow's. The background execution is the synchronous run's read and write plus the "
        "record's claim, commit entry and outcome (CAS writes, and a re-read before the claim), the event "
        "log (create + appends) and a record read per second while it runs (cancel and lease watch); the "
        "host's own receive and delete of the message are not counted. The end-to-end row is 202, queue "
        "pickup (the runner polls every 50 ms; the Functions host polls up to host.json's "
        "maxPollingInterval, 2 s, when idle) and a `Prefer: wait` long-poll that re-reads the record at "
        "50 ms, doubling to 0.5 s. With a model-backed workflow the synchronous call takes seconds to "
        "minutes; the 202 stays where it is here.",
    )
    await asyncio.sleep(0)
