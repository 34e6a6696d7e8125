"""Section 6: a warm instance against a cold one, and storage operations per call type.

"Cold" is the same call with the checkpoint (and, for a thread, its pointer) dropped from
this instance's caches first, so everything else is identical and the iterations alternate.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable
from typing import Any

from bench.background import ASYNC, _split
from bench.harness import KB, Bench, Report, interleaved, ms, ops_text, summary
from devtools.queue_runner import QueueRunner


def _forget(bench: Bench, checkpoint_id: str | None = None, thread: str | None = None) -> None:
    """Make this instance cold for a checkpoint, or for a thread (its pointer and head)."""
    service = bench.service()
    scope = service.store.container.url
    if thread is not None:
        head = service.pointers.cached(thread)
        checkpoint_id = head.checkpoint_id if head is not None else checkpoint_id
        service.pointers._heads.forget(scope, thread)
    if checkpoint_id is not None:
        service.store.cache.forget(scope, checkpoint_id)


async def warm_vs_cold(bench: Bench, report: Report) -> None:
    rows = []
    for size in (20 * KB, 1024 * KB):
        bench.use(2, size)
        base = await bench.base_checkpoint()  # written here, so cached here
        thread = f"warm-{size}"
        await bench.post({"messages": "first"}, url=f"/api/threads/{thread}/runs")

        async def resume(base: str = base) -> None:
            await bench.post({"checkpoint_id": base, "messages": "next"})

        async def cold_resume(base: str = base) -> None:
            _forget(bench, checkpoint_id=base)
            await resume()

        async def turn(thread: str = thread) -> None:
            await bench.post({"messages": "next"}, url=f"/api/threads/{thread}/runs")

        async def cold_turn(thread: str = thread) -> None:
            _forget(bench, thread=thread)
            await turn()

        samples = await interleaved(bench.plan, warm=resume, cold=cold_resume, warm_turn=turn, cold_turn=cold_turn)
        for label, warm, cold in (("resume", "warm", "cold"), ("thread turn", "warm_turn", "cold_turn")):
            (w, w99), (c, c99) = summary(samples[warm]), summary(samples[cold])
            fns = {"warm": resume, "cold": cold_resume, "warm_turn": turn, "cold_turn": cold_turn}
            w_ops, c_ops = await bench.ops_of(fns[warm]), await bench.ops_of(fns[cold])
            rows.append(
                [
                    f"{label}, {size // KB} KB",
                    f"{ms(w)} / {ms(w99)}",
                    f"{ms(c)} / {ms(c99)}",
                    f"**{w / c:.2f}×**",
                    ops_text(w_ops),
                    ops_text(c_ops),
                ]
            )
            report.facts[f"warm_{label}_{size // KB}"] = (w_ops, c_ops, w / c)
    report.table(
        "6a. A warm instance (checkpoint cache) against a cold one (2 supersteps)",
        ["call", "warm p50 / p99 ms", "cold p50 / p99 ms", "warm / cold", "warm storage ops", "cold storage ops"],
        rows,
        "Warm: the checkpoint this instance just wrote (and, for a thread, the pointer it just swapped) is "
        "in its cache, so the resume reads nothing and the turn commits by compare-and-swap on the cached "
        "ETag. Cold: the same call after dropping them from the cache. Iterations alternate. What the cache "
        "may answer for, and why a deleted or expired checkpoint stays 404/410: docs/reliability.md, *Warm instances*.",
    )


async def ops_per_call(bench: Bench, report: Report) -> None:
    """Storage operations of each call type, counted where they leave the SDK."""
    bench.use(2, 20 * KB)
    base = await bench.base_checkpoint()
    thread = "ops-thread"
    await bench.post({"messages": "first"}, url=f"/api/threads/{thread}/runs")
    keys = iter(range(1_000_000))

    async def call(url: str, body: dict[str, Any], key: str | None = None) -> None:
        await bench.post(body, url=url, headers={"Idempotency-Key": key} if key else None)

    def runs(cold: bool, key: bool = False) -> Callable[[], Awaitable[None]]:
        async def fn() -> None:
            if cold:
                _forget(bench, checkpoint_id=base)
            await call("/api/runs", {"checkpoint_id": base, "messages": "n"}, f"k{next(keys)}" if key else None)

        return fn

    def turn(cold: bool, key: bool = False) -> Callable[[], Awaitable[None]]:
        async def fn() -> None:
            if cold:
                _forget(bench, thread=thread)
            await call(f"/api/threads/{thread}/runs", {"messages": "n"}, f"k{next(keys)}" if key else None)

        return fn

    async def replay() -> None:
        await call("/api/runs", {"checkpoint_id": base, "messages": "replayed"}, "replayed-key")

    await replay()
    rows = []
    for label, cold_fn, warm_fn, target in (
        ("resume (`POST /api/runs`)", runs(True), runs(False), "warm: 0 GET, 1 PUT"),
        ("thread turn", turn(True), turn(False), "warm ≤ 3; 2 on a current ETag"),
        ("`/api/runs` + Idempotency-Key, first call", runs(True, True), runs(False, True), "≤ 4"),
        ("the same, replayed", replay, replay, "≤ 2"),
        ("thread turn + Idempotency-Key", turn(True, True), turn(False, True), ""),
    ):
        cold, warm = await bench.ops_of(cold_fn), await bench.ops_of(warm_fn)
        rows.append([label, ops_text(cold), ops_text(warm), target])
        report.facts[f"ops {label}"] = (cold, warm)
    rows += await _background_ops(bench, report, base, thread)
    report.table(
        "6b. Storage operations per call type",
        ["call", "cold instance", "warm instance", "issue target"],
        rows,
        "Counted with the storage SDK's request hook (a retried request counts per attempt, as storage bills "
        "it). Background rows: blob operations, plus the app's queue operations; the Functions host's own "
        "receive and delete of the message are not counted. Background execution is the queue trigger's "
        "work after the 202 (`devtools.queue_runner` plays the host).",
    )


async def _background_ops(bench: Bench, report: Report, base: str, thread: str) -> list[list[Any]]:
    runner = QueueRunner(bench.host)
    await runner.run_until_idle(limit_seconds=120)
    rows = []
    for label, url, body, target in (
        ("`/api/runs`", "/api/runs", {"checkpoint_id": base, "messages": "bg"}, "≤ 5 blob"),
        ("a thread turn", f"/api/threads/{thread}/runs", {"messages": "bg"}, "≤ 8 blob"),
    ):
        accepts, executions = [], []
        for _ in range(3):
            bench.counter.reset()
            await bench.post(body, url=url, headers=ASYNC)
            accepts.append(_split(bench.counter.log))
            bench.counter.reset()
            await runner.run_until_idle(limit_seconds=120)
            executions.append(_split(bench.counter.log))
        for phase, counts, goal in (("202 accept", accepts, ""), ("execution", executions, target)):
            blob, queue = (statistics.median(c[i] for c in counts) for i in (0, 1))
            rows.append([f"background {phase}, {label}", f"{blob:.0f} blob + {queue:.0f} queue", "", goal])
            report.facts[f"bg {phase} {label}"] = blob
    return rows
