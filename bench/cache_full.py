"""The event loop once the checkpoint cache is full (issue 41's carry-over).

Five bursts of 50 concurrent 1 MB resumes, measured only after warm-up bursts have filled
the default 128 MiB cache, so every measured insert pushes an entry out. Each variant runs
in a fresh process (one Azurite for all), variants interleaved round by round:

* ``full``: the default cache, full; ``roomy``: a 1 GiB cache that the same bursts never
  fill (on, but nothing evicted); ``off``: ``CHECKPOINT_CACHE_BYTES=0``.
* With ``--before REF``, ``full`` also runs on that commit's tree (``git archive`` into a
  temporary folder, with this script copied in), side by side with the working tree's.

Per burst: the worst lateness of the 5 ms ticker (``lag_probe.Ticker``), the loop thread's
CPU, the time the loop spent inside ``CheckpointCache.put`` (the insert, its evictions and,
before the release moved off the loop, their freeing), and the entries evicted.

    python -m bench.cache_full --before 7887227 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
INSERT_MIB = [1, 4, 24]  # 24: under a quarter of the default cache, the largest it keeps
VARIANTS = {"full": None, "roomy": str(1024 * 1024 * 1024), "off": "0"}


async def _child(state_bytes: int, concurrency: int, warmup: int, bursts: int) -> dict[str, Any]:
    import workflows
    from bench import synthetic
    from bench.lag_probe import StallSampler, summarize
    from bench.sustained import _burst
    from devtools.function_host import FunctionHost
    from resumable.checkpoints import cache as checkpoint_cache
    from resumable.storage import clients as storage_client

    workflows.REGISTRY["bench-chain"] = "bench.synthetic:SPEC"
    synthetic.configure(5, state_bytes, "text")
    import function_app

    loop_thread = threading.get_ident()
    in_put = {"ms": 0.0, "puts": 0}
    put = checkpoint_cache.CheckpointCache.put

    def timed_put(self: Any, *args: Any) -> None:
        started = time.perf_counter()
        put(self, *args)
        if threading.get_ident() == loop_thread:
            in_put["ms"] += (time.perf_counter() - started) * 1000
            in_put["puts"] += 1

    checkpoint_cache.CheckpointCache.put = timed_put  # type: ignore[method-assign]
    host = FunctionHost(function_app.app)

    async def post(body: dict[str, Any]) -> dict[str, Any]:
        response = await host.request("POST", "/api/runs", json_body=body)
        data = await response.json()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {data}")
        return data

    def entries() -> int:
        return len(checkpoint_cache._checkpoints._blobs._items)

    rows: list[dict[str, Any]] = []
    stalled: list[dict[str, Any]] = []
    try:
        base = (await post({"messages": "start"}))["checkpoint_id"]
        fire = lambda: post({"checkpoint_id": base, "messages": "burst"})  # noqa: E731
        for _ in range(warmup):
            await _burst(fire, concurrency, None)
        for _ in range(bursts):
            in_put.update(ms=0.0, puts=0)
            held, cpu = entries(), time.thread_time()
            sampler = StallSampler()
            row = await _burst(fire, concurrency, sampler)
            stalled.extend(sampler.stalls)
            row["loop_cpu_ms"] = round((time.thread_time() - cpu) * 1000, 1)
            row["put_ms"] = round(in_put["ms"], 2)
            kept = checkpoint_cache._checkpoints._blobs.capacity > 0
            row["evicted"] = in_put["puts"] - (entries() - held) if kept else 0
            row["cache_mib"] = round(checkpoint_cache._checkpoints.size / 2**20)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        await storage_client.close_all()
    return {"bursts": rows, "stalls_over_50_ms": summarize(stalled, over_ms=50, top=6)}


async def _inserts(sizes_mib: list[int], measured: int) -> dict[str, Any]:
    """The loop's time in one insert into the full default cache, by entry size: the bytes
    are built on another thread, as an encode or a download builds them."""
    from concurrent.futures import ThreadPoolExecutor

    from resumable.checkpoints.cache import DEFAULT_CACHE_BYTES, CachedBlob, CheckpointCache

    loop = asyncio.get_running_loop()
    out: dict[str, Any] = {}
    with ThreadPoolExecutor(1) as builder:
        for size in sizes_mib:
            cache = CheckpointCache(DEFAULT_CACHE_BYTES)
            fill = DEFAULT_CACHE_BYTES // (size * 2**20) + 1
            times = []
            for i in range(fill + measured):
                data = await loop.run_in_executor(builder, os.urandom, size * 2**20)
                blob = CachedBlob(data, {"status": "idle"}, None, time.time(), time.monotonic())
                del data
                started = time.perf_counter()
                cache.put("bench", f"{size}-{i}", blob)
                if i >= fill:
                    times.append((time.perf_counter() - started) * 1000)
                del blob
                await asyncio.sleep(0.002)  # the codec thread's turn, as between requests
            out[f"{size} MiB"] = {"median_ms": round(statistics.median(times), 3), "max_ms": round(max(times), 3)}
            cache.resize(0)
            await asyncio.sleep(0.05)
    return out


def _tree_at(ref: str, into: Path) -> Path:
    """The repository's files at ``ref``, with this script copied in."""
    git = shutil.which("git") or "git"
    archive = subprocess.run([git, "archive", ref], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tree:
        tree.extractall(into, filter="data")
    shutil.copy(Path(__file__), into / "bench" / "cache_full.py")
    return into


def _run(tree: Path, variant: str, args: argparse.Namespace, container: str) -> dict[str, Any]:
    env = {**os.environ, "CHECKPOINT_CONTAINER": container, "WORKFLOW": "bench-chain"}
    env.pop("CHECKPOINT_CACHE_BYTES", None)
    if VARIANTS[variant] is not None:
        env["CHECKPOINT_CACHE_BYTES"] = VARIANTS[variant]
    load = os.getloadavg()[0]
    done = subprocess.run(
        [
            *(sys.executable, "-m", "bench.cache_full", "--child", f"--bytes={args.bytes}"),
            *(f"--concurrency={args.concurrency}", f"--warmup={args.warmup}", f"--bursts={args.bursts}"),
            *(["--inserts"] if variant == "full" else []),
        ],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{variant} in {tree} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["load"] = (round(load, 2), round(os.getloadavg()[0], 2))
    return result


def _table(results: dict[str, list[dict[str, Any]]]) -> str:
    lines = [
        "| run | load (1 min) | worst lag per burst, ms | over 50 ms | loop CPU ms per burst (median) "
        "| loop ms in cache.put per burst (median / max) | evicted per burst "
        "| stalls over 50 ms: wall / loop CPU / other threads' CPU, ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, runs in results.items():
        for run in runs:
            bursts = run["bursts"]
            lags = [b["worst_lag_ms"] for b in bursts]
            puts = [b["put_ms"] for b in bursts]
            stalls = run["stalls_over_50_ms"]
            lines.append(
                f"| {name} | {run['load'][0]}–{run['load'][1]} | {', '.join(f'{lag:.0f}' for lag in lags)} "
                f"| {sum(lag > 50 for lag in lags)} | {statistics.median(b['loop_cpu_ms'] for b in bursts):.0f} "
                f"| {statistics.median(puts):.2f} / {max(puts):.2f} "
                f"| {', '.join(str(b['evicted']) for b in bursts)} "
                f"| {stalls['wall_ms']:.0f} / {stalls['loop_cpu_ms']:.0f} / {stalls['other_cpu_ms']:.0f} |"
            )
    lines += [
        "",
        "| run | " + " | ".join(f"one insert, {size} MiB entries: loop ms median / max" for size in INSERT_MIB) + " |",
        "|---|" + "---|" * len(INSERT_MIB),
    ]
    for name, runs in results.items():
        for run in runs:
            if "inserts" in run:
                cells = [
                    f"{run['inserts'][f'{size} MiB']['median_ms']:.3f} / {run['inserts'][f'{size} MiB']['max_ms']:.3f}"
                    for size in INSERT_MIB
                ]
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bytes", type=int, default=1024 * 1024)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured bursts that fill the cache")
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--before", help="a commit whose tree runs the 'full' variant too")
    parser.add_argument("--variants", default="full,roomy,off")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--inserts", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("MAX_CHECKPOINT_BYTES", str(64 * 1024 * 1024))
    if args.child:
        result = asyncio.run(_child(args.bytes, args.concurrency, args.warmup, args.bursts))
        if args.inserts:
            result["inserts"] = asyncio.run(_inserts(INSERT_MIB, 20))
        print(json.dumps(result))
        return
    from devtools.azurite import start_azurite

    azurite = start_azurite()
    os.environ["CHECKPOINT_STORAGE"] = azurite.connection_string
    scratch = Path(tempfile.mkdtemp(prefix="cache-full-"))
    try:
        runs = [(f"{v}, this tree", ROOT, v) for v in args.variants.split(",")]
        if args.before:
            runs.insert(0, (f"full, {args.before}", _tree_at(args.before, scratch), "full"))
        results: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in runs}
        for round_ in range(args.rounds):
            for i, (name, tree, variant) in enumerate(runs):
                print(f"round {round_ + 1}: {name}", file=sys.stderr, flush=True)
                results[name].append(_run(tree, variant, args, f"bench-cache-full-{round_}-{i}"))
        print(json.dumps(results))
        print(_table(results))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        azurite.stop()


if __name__ == "__main__":
    main()
