"""Loop lag and peak memory under N concurrent resumes of one large checkpoint.

Run in a fresh process per measurement (``measure`` spawns it), so the peak RSS is this
measurement's own and not the benchmark's history:

    python -m bench.loop_lag --bytes 1048576 --concurrency 50

A ticker task (``lag_probe.Ticker``, shared with ``sustained.py``) sleeps 5 ms at a time
and records how late each wake-up is: the worst gap is how long ``/api/health`` (or any
other request on the worker) would have waited.
Uses ``CHECKPOINT_STORAGE`` (the benchmark's Azurite) when set, else starts an Azurite.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness import post_run
from bench.lag_probe import TICK_S, GcPauses, Ticker, status_mib

ROOT = Path(__file__).resolve().parent.parent


async def _child(state_bytes: int, concurrency: int, supersteps: int) -> dict[str, Any]:
    import workflows
    from bench import synthetic
    from devtools.function_host import FunctionHost
    from resumable.storage import clients as storage_client

    workflows.REGISTRY["bench-chain"] = "bench.synthetic:SPEC"
    synthetic.configure(supersteps, state_bytes)
    import function_app

    host = FunctionHost(function_app.app)

    post = functools.partial(post_run, host)

    try:
        base = (await post({"messages": "start"}))["checkpoint_id"]
        await post({"checkpoint_id": base, "messages": "warm"})
        before = status_mib("VmRSS")

        async def one() -> float:
            started = time.perf_counter()
            await post({"checkpoint_id": base, "messages": "concurrent"})
            return (time.perf_counter() - started) * 1000

        pauses = GcPauses()
        ticker = Ticker()
        ticker.start()
        await asyncio.sleep(TICK_S * 2)
        started = time.perf_counter()
        latencies = sorted(await asyncio.gather(*(one() for _ in range(concurrency))))
        wall = time.perf_counter() - started
        await ticker.stop()
        pauses.detach()
    finally:
        await storage_client.close_all()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, max(0, round(0.99 * len(latencies)) - 1))]
    return {
        "bytes": state_bytes,
        "concurrency": concurrency,
        "p50_ms": p50,
        "p99_ms": p99,
        "throughput": concurrency / wall,
        "worst_lag_ms": ticker.worst_ms,
        "longest_gc_ms": pauses.longest_ms,
        "ticks": ticker.ticks,
        "rss_before_mib": before,
        "peak_rss_mib": status_mib("VmHWM"),
    }


def measure(
    state_bytes: int, concurrency: int, supersteps: int = 5, *, cache_bytes: int | None = None
) -> dict[str, Any]:
    """One measurement in a fresh interpreter (the current environment's Azurite and settings);
    ``cache_bytes`` sets ``CHECKPOINT_CACHE_BYTES`` (None: the default)."""
    env = {**os.environ, "CHECKPOINT_CONTAINER": "bench-lag", "WORKFLOW": "bench-chain"}
    if cache_bytes is not None:
        env["CHECKPOINT_CACHE_BYTES"] = str(cache_bytes)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.loop_lag",
            f"--bytes={state_bytes}",
            f"--concurrency={concurrency}",
            f"--supersteps={supersteps}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"loop-lag run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bytes", type=int, default=1024 * 1024)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--supersteps", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("WORKFLOW", "bench-chain")
    os.environ.setdefault("MAX_CHECKPOINT_BYTES", str(64 * 1024 * 1024))
    os.environ.setdefault("CHECKPOINT_CONTAINER", "bench-lag")
    azurite = None
    if "CHECKPOINT_STORAGE" not in os.environ:  # run on its own: start an emulator for this run
        from devtools.azurite import start_azurite

        azurite = start_azurite()
        os.environ["CHECKPOINT_STORAGE"] = azurite.connection_string
    try:
        print(json.dumps(asyncio.run(_child(args.bytes, args.concurrency, args.supersteps))))
    finally:
        if azurite is not None:
            azurite.stop()


if __name__ == "__main__":
    main()
