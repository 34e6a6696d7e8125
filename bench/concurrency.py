"""Section 4: concurrent resumes on one event loop, and the loop lag they cause.

4a runs in the benchmark's own process (throughput, p99/p50, slow callbacks in a debug
pass). 4b runs each measurement in a fresh process (``bench/loop_lag.py``) so that its
peak RSS is its own: a 5 ms ticker's worst lateness is how long ``/api/health``, or any
other request on that worker, would have waited.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time

from bench import lag_probe, loop_lag
from bench.harness import KB, Bench, Report, ms, summary, timed


async def concurrency(bench: Bench, report: Report) -> None:
    bench.use(bench.plan.supersteps, 20 * KB)
    base = await bench.base_checkpoint()
    n = bench.plan.concurrency

    async def one() -> float:
        return await timed(lambda: bench.post({"checkpoint_id": base, "messages": "concurrent"}))

    await asyncio.gather(*(one() for _ in range(min(n, 5))))  # warm-up
    started = time.perf_counter()
    latencies = await asyncio.gather(*(one() for _ in range(n)))
    wall = time.perf_counter() - started
    p50, p99 = summary(list(latencies))

    slow = _SlowCallbacks()
    pauses = lag_probe.GcPauses()
    loop = asyncio.get_running_loop()
    loop.set_debug(True)
    loop.slow_callback_duration = 0.05
    try:
        await asyncio.gather(*(one() for _ in range(n)))
    finally:
        loop.set_debug(False)
        slow.detach()
        pauses.detach()
    report.table(
        f"4a. {n} concurrent resumes on one worker (one event loop, 20 KB, warm)",
        [
            "throughput (resumes/s)",
            "p50 ms",
            "p99 ms",
            "p99 / p50",
            "callbacks > 50 ms (debug pass)",
            "longest GC pause ms (debug pass)",
        ],
        [[f"{n / wall:.0f}", ms(p50), ms(p99), f"**{p99 / p50:.2f}**", slow.count, f"{pauses.longest_ms:.1f}"]],
        "All requests start together and branch from one checkpoint. The slow-callback count comes "
        "from a second pass with asyncio debug mode on (`slow_callback_duration` = 50 ms)"
        + (
            f"; the slowest took {slow.worst_ms:.0f} ms: " + "; ".join(f"`{e}`" for e in slow.examples)
            if slow.count
            else "."
        ),
    )


def loop_lag_table(bench: Bench, report: Report) -> None:
    """Fresh processes, ``lag_repeats`` each, cache on (warm) and off (cold), 20 KB and 1 MB."""
    n = bench.plan.concurrency
    report.facts["lag_concurrency"] = n
    rows = []
    for size in (20 * KB, 1024 * KB):
        for cache in ("on", "off"):
            runs = [
                loop_lag.measure(size, n, cache_bytes=None if cache == "on" else 0)
                for _ in range(bench.plan.lag_repeats)
            ]
            lag = [r["worst_lag_ms"] for r in runs]
            rss = [r["peak_rss_mib"] for r in runs]
            ratio = [r["p99_ms"] / r["p50_ms"] for r in runs]
            rows.append(
                [
                    f"{size // KB} KB",
                    cache,
                    _span(ratio, "{:.2f}"),
                    f"**{statistics.median(lag):.0f}** ({_span(lag, '{:.0f}')})",
                    f"{statistics.median(rss):.0f} ({_span(rss, '{:.0f}')})",
                    f"{statistics.median(r['rss_before_mib'] for r in runs):.0f}",
                    f"{max(r['longest_gc_ms'] for r in runs):.0f}",
                    f"{statistics.median(r['throughput'] for r in runs):.0f}",
                ]
            )
            if size == 1024 * KB:
                report.facts[f"lag_1mb_{cache}"] = (statistics.median(lag), min(lag), max(lag))
                report.facts[f"rss_1mb_{cache}"] = (statistics.median(rss), min(rss), max(rss))
    report.table(
        f"4b. Loop lag and memory: {n} concurrent resumes of one checkpoint, a fresh process each "
        f"({bench.plan.lag_repeats} runs per row)",
        [
            "checkpoint",
            "cache",
            "p99 / p50",
            "worst loop lag ms, median (range)",
            "peak RSS MiB, median (range)",
            "RSS before MiB",
            "longest GC pause ms",
            "resumes/s",
        ],
        rows,
        "A 5 ms ticker task records how late each wake-up is during the burst. Checkpoint transfers take "
        "turns for a worker's slots (`resumable/checkpoints/transfers.py`: 6 at once, codec work above 64 KiB on "
        "one thread), and the run's own per-superstep checkpoints are no longer deep-copied. With the cache "
        "on, the 50 new checkpoints are kept too (about 1 MB each in the 1 MB rows). The machine is shared "
        "(2 cores, other jobs running), so single runs vary: the range is the spread across runs.",
    )


def _span(values: list[float], fmt: str) -> str:
    return f"{fmt.format(min(values))}–{fmt.format(max(values))}"


class _SlowCallbacks(logging.Handler):
    """Counts asyncio's debug-mode 'Executing <...> took N seconds' warnings."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.worst_ms = 0.0
        self.examples: list[str] = []
        self._logger = logging.getLogger("asyncio")
        self._logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Executing") and " took " in message:
            self.count += 1
            self.worst_ms = max(self.worst_ms, float(message.rsplit(" took ", 1)[1].split()[0]) * 1000)
            if len(self.examples) < 2:
                self.examples.append(message[:200].replace("|", "/"))

    def detach(self) -> None:
        self._logger.removeHandler(self)
