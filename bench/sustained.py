"""Section 4c: sustained load. Many bursts of concurrent large resumes in one process.

One burst says little about memory: a run's state freed only by the cycle collector piles
up between collections, and the cache fills over many bursts (issue 30 saw peak RSS climb
204 → 829 MiB over 25 bursts). So this runs ``bursts`` bursts of ``concurrency`` resumes
of one checkpoint in one fresh process, and records each burst's peak RSS and worst loop
lag (``lag_probe.Ticker``, the 5 ms ticker ``loop_lag.py`` uses too):

    python -m bench.sustained --bytes 1048576 --concurrency 50 --bursts 25

The peak is per burst: the kernel's high-water mark (``VmHWM``) is reset before each
burst through ``/proc/self/clear_refs``; where that is refused, the ticker samples
``VmRSS`` instead. Uses ``CHECKPOINT_STORAGE`` when set, else starts an Azurite. With
``--stalls``, a watchdog thread samples the loop's stack whenever the ticker is over 20 ms
late, and the output says where those stalls went (``lag_probe.StallSampler``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.harness import KB, Bench, Report, post_run
from bench.lag_probe import TICK_S, GcPauses, StallSampler, Ticker, status_mib, summarize
from resumable.checkpoints.cache import DEFAULT_CACHE_BYTES

ROOT = Path(__file__).resolve().parent.parent


def _reset_peak() -> bool:
    """Reset this process's ``VmHWM`` to its current RSS (Linux 4.0+)."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


class RssPeak:
    """The highest ``VmRSS`` seen at the ticker's wake-ups (when the peak cannot be reset)."""

    def __init__(self) -> None:
        self.mib = 0.0

    def sample(self) -> None:
        self.mib = max(self.mib, status_mib("VmRSS"))


async def _burst(fire: Callable[[], Awaitable[Any]], concurrency: int, sampler: StallSampler | None) -> dict[str, Any]:
    """One burst of ``concurrency`` calls of ``fire``: its peak RSS, worst lag, CPU share."""
    resettable = _reset_peak()
    pauses = GcPauses()
    rss = RssPeak()

    def on_tick() -> None:
        # Reading /proc/self/status costs the loop up to milliseconds while codec threads
        # map and unmap megabytes: only where the kernel's peak cannot be reset.
        if not resettable:
            rss.sample()
        if sampler is not None:
            sampler.beat()

    ticker = Ticker(on_tick)
    ticker.start()
    if sampler is not None:
        sampler.start()
    await asyncio.sleep(TICK_S * 2)
    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(fire() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    await ticker.stop()
    pauses.detach()
    if sampler is not None:
        sampler.stop()
    peak = status_mib("VmHWM") if resettable else rss.mib
    return {
        "peak_rss_mib": round(peak, 1),
        "rss_after_mib": round(status_mib("VmRSS"), 1),
        "worst_lag_ms": round(ticker.worst_ms, 1),
        "longest_gc_ms": round(pauses.longest_ms, 1),
        "resumes_per_s": round(concurrency / wall, 1),
        # CPU time over wall time: far below 1 on a busy machine, where lag is
        # mostly time the process waited for a core.
        "cpu_share": round(cpu / wall, 2),
    }


async def _child(
    state_bytes: int, concurrency: int, bursts: int, supersteps: int, *, stalls: bool = False, shape: str = "text"
) -> dict[str, Any]:
    import workflows
    from bench import synthetic
    from devtools.function_host import FunctionHost
    from resumable.storage import clients as storage_client

    workflows.REGISTRY["bench-chain"] = "bench.synthetic:SPEC"
    synthetic.configure(supersteps, state_bytes, shape)
    import function_app

    host = FunctionHost(function_app.app)

    post = functools.partial(post_run, host)

    rows: list[dict[str, Any]] = []
    stalled: list[dict[str, Any]] = []
    try:
        base = (await post({"messages": "start"}))["checkpoint_id"]
        await post({"checkpoint_id": base, "messages": "warm"})
        baseline = status_mib("VmRSS")
        for _ in range(bursts):
            sampler = StallSampler() if stalls else None
            rows.append(await _burst(lambda: post({"checkpoint_id": base, "messages": "burst"}), concurrency, sampler))
            stalled.extend(sampler.stalls if sampler is not None else ())
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        await storage_client.close_all()
    result: dict[str, Any] = {"baseline_mib": round(baseline, 1), "bursts": rows}
    if stalls:
        result["stalls"] = {f"over_{ms}_ms": summarize(stalled, over_ms=ms) for ms in (20, 50)}
    return result


def measure(
    state_bytes: int, concurrency: int, bursts: int, *, cache_bytes: int | None = None, supersteps: int = 5
) -> dict[str, Any]:
    """One sustained run in a fresh interpreter; ``cache_bytes`` sets ``CHECKPOINT_CACHE_BYTES``."""
    env = {**os.environ, "CHECKPOINT_CONTAINER": "bench-sustained", "WORKFLOW": "bench-chain"}
    if cache_bytes is not None:
        env["CHECKPOINT_CACHE_BYTES"] = str(cache_bytes)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.sustained",
            f"--bytes={state_bytes}",
            f"--concurrency={concurrency}",
            f"--bursts={bursts}",
            f"--supersteps={supersteps}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"sustained-load run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


MIB = 1024 * 1024
HEADROOM_MIB = 150  # the allowance over baseline + cache
FLAT_MIB = 16  # "flat": the last ten bursts' peaks within this spread


def sustained_table(bench: Bench, report: Report) -> None:
    """Section 4c: bursts in one fresh process, with the default cache and with it off."""
    plan = bench.plan
    size, n, bursts = plan.sustained_bytes, plan.concurrency, plan.sustained_bursts
    if bursts == 0:
        return
    runs = {cache: measure(size, n, bursts, cache_bytes=None if cache == "on" else 0) for cache in ("on", "off")}
    rows = []
    for i in range(bursts):
        on, off = runs["on"]["bursts"][i], runs["off"]["bursts"][i]
        rows.append(
            [
                i + 1,
                f"{on['peak_rss_mib']:.0f}",
                f"{on['worst_lag_ms']:.0f}",
                f"{off['peak_rss_mib']:.0f}",
                f"{off['worst_lag_ms']:.0f}",
                " / ".join(f"{b['cpu_share']:.2f}" if "cpu_share" in b else "–" for b in (on, off)),
            ]
        )
    notes = []
    for cache, run in runs.items():
        peaks = [b["peak_rss_mib"] for b in run["bursts"]]
        lags = [b["worst_lag_ms"] for b in run["bursts"]]
        tail = peaks[-10:]
        bound = run["baseline_mib"] + (DEFAULT_CACHE_BYTES / MIB if cache == "on" else 0) + HEADROOM_MIB
        report.facts[f"sustained_{cache}"] = (run["baseline_mib"], max(peaks), bound, max(tail) - min(tail), max(lags))
        notes.append(
            f"cache {cache}: baseline {run['baseline_mib']:.0f} MiB, highest peak {max(peaks):.0f} MiB against "
            f"{bound:.0f} (baseline + cache + {HEADROOM_MIB}); last {len(tail)} bursts {min(tail):.0f}–{max(tail):.0f} "
            f"MiB; worst loop lag {max(lags):.0f} ms, {sum(lag > 50 for lag in lags)} bursts over 50 ms"
        )
    report.table(
        f"4c. Sustained load: {bursts} bursts of {n} concurrent {size // KB} KB resumes in one fresh process",
        [
            "burst",
            "peak RSS MiB, cache on",
            "worst lag ms, cache on",
            "peak RSS MiB, cache off",
            "lag ms, cache off",
            "CPU share on / off",
        ],
        rows,
        "Each burst's peak RSS (the kernel's high-water mark, reset before the burst) and worst 5 ms "
        "ticker lateness; the CPU share is the process's CPU time over the burst's wall time (far "
        "below 1: the machine is busy, and the lag is mostly time spent waiting for a core). Cache on "
        "is the default `CHECKPOINT_CACHE_BYTES` (128 MiB): it fills over the first bursts, then "
        "holds. A finished run is freed by reference counting (`tests/library/test_run_memory.py`), "
        "so nothing waits for the cycle collector. " + "; ".join(notes) + ".",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bytes", type=int, default=1024 * 1024)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--bursts", type=int, default=25)
    parser.add_argument("--supersteps", type=int, default=5)
    parser.add_argument("--stalls", action="store_true", help="sample the loop's stack when it stalls over 20 ms")
    parser.add_argument("--shape", choices=("text", "conversation"), default="text", help="the state's shape")
    args = parser.parse_args()
    os.environ.setdefault("WORKFLOW", "bench-chain")
    os.environ.setdefault("MAX_CHECKPOINT_BYTES", str(64 * 1024 * 1024))
    os.environ.setdefault("CHECKPOINT_CONTAINER", "bench-sustained")
    azurite = None
    if "CHECKPOINT_STORAGE" not in os.environ:
        from devtools.azurite import start_azurite

        azurite = start_azurite()
        os.environ["CHECKPOINT_STORAGE"] = azurite.connection_string
    try:
        print(
            json.dumps(
                asyncio.run(
                    _child(
                        args.bytes, args.concurrency, args.bursts, args.supersteps, stalls=args.stalls, shape=args.shape
                    )
                )
            )
        )
    finally:
        if azurite is not None:
            azurite.stop()


if __name__ == "__main__":
    main()
