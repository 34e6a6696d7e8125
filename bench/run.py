"""Benchmark the atomic resume: side-by-side ratios measured in one run.

    python bench/run.py            # full run (a few minutes), writes bench/results.md
    python bench/run.py --quick    # smoke run for CI (well under a minute); prints the op counts
    python bench/run.py --peers    # also run the LangGraph peer (bash bench/peers/setup.sh first)
    python bench/run.py --compare-python .venv-3.11/bin/python   # cold start on two Pythons

Starts its own Azurite. Sections live in modules of their own: ``atomic`` (1, 2), ``sizes``
(3), ``concurrency``, ``loop_lag`` and ``sustained`` (4), ``cold_start`` (5), ``cache`` (6), ``background``
(7), ``peer_section`` (8), and ``targets`` (the issue's targets, first in the report).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import workflows  # noqa: E402
from bench import atomic, cache, concurrency, peer_section, sizes, sustained  # noqa: E402
from bench.background import background_runs  # noqa: E402
from bench.cold_start import cold_start  # noqa: E402
from bench.harness import FULL, KB, QUICK, Bench, Plan, Report, interleaved, machine, ms, summary  # noqa: E402
from bench.protocols import protocols  # noqa: E402
from bench.targets import targets_table  # noqa: E402
from devtools.azurite import start_azurite  # noqa: E402
from devtools.op_counter import OperationCounter  # noqa: E402
from resumable.storage import clients as storage_client  # noqa: E402
from resumable.storage import run_queue  # noqa: E402


async def run(plan: Plan, peers_ran: bool, pythons: list[str], only: str | None = None) -> Report:
    report = Report()
    counter = OperationCounter()
    storage_client.request_hook = counter
    workflows.REGISTRY["bench-chain"] = "bench.synthetic:SPEC"
    os.environ.update(WORKFLOW="bench-chain", CHECKPOINT_CONTAINER="bench", MAX_CHECKPOINT_BYTES=str(64 * KB * KB))
    bench = Bench(plan, counter)
    if only == "protocols":  # one section, printed, results.md left alone
        try:
            await protocols(bench, report)
        finally:
            await storage_client.close_all()
            await run_queue.close_all()
        return report
    try:
        await atomic.atomic_vs_two_step(bench, report)
        await atomic.overhead(bench, report)
        await sizes.size_scaling(bench, report)
        await sizes.turn_growth(bench, report)
        await concurrency.concurrency(bench, report)
        concurrency.loop_lag_table(bench, report)
        sustained.sustained_table(bench, report)
        await cache.warm_vs_cold(bench, report)
        await cache.ops_per_call(bench, report)
        await background_runs(bench, report, summary, ms, interleaved)
        await protocols(bench, report)
        await peer_section.peer_section(bench, report, peers_ran)
        bench.use(2, 20 * KB)
        os.environ["WORKFLOW"] = "default"
        base = (await bench.post({"messages": "cold start base"}))["checkpoint_id"]
    finally:
        await storage_client.close_all()
        await run_queue.close_all()
    cold_start(bench, report, base, pythons)
    targets_table(report)
    report.sections.sort(key=_section_number)
    return report


def _section_number(section: str) -> tuple[int, str]:
    """``### 4b. ...`` -> (4, "b"); the targets (no number) come first."""
    match = re.match(r"### (\d+)([a-z]?)\.", section)
    return (int(match.group(1)), match.group(2)) if match else (0, "")


def plot(report: Report, path: Path) -> bool:
    """Latency against checkpoint size and against supersteps; needs the optional matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -r requirements-bench.txt); no plot written")
        return False
    figure, (by_size, by_steps) = plt.subplots(1, 2, figsize=(11, 4))
    xs, ys = zip(*report.series["full call, by checkpoint KB"], strict=True)
    by_size.plot(xs, ys, marker="o", label="atomic POST /api/runs")
    by_size.set(xscale="log", xlabel="checkpoint size (KB)", ylabel="p50 latency (ms)", title="By checkpoint size")
    for name, style in (("atomic, by supersteps", "o-"), ("two-step, by supersteps", "s--")):
        xs, ys = zip(*report.series[name], strict=True)
        by_steps.plot(xs, ys, style, label=name.split(",")[0])
    by_steps.set(xlabel="supersteps", ylabel="p50 latency (ms)", title="By supersteps (20 KB checkpoint)")
    for axes in (by_size, by_steps):
        axes.grid(alpha=0.3)
        axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return True


KEPT = "<!-- Measured outside bench/run.py: kept as is by every run. -->"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few iterations, for a CI smoke run")
    parser.add_argument("--peers", action="store_true", help="also run the LangGraph peer (bench/peers/.venv)")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results.md")
    parser.add_argument("--plot", type=Path, help="also write a PNG plot here (needs requirements-bench.txt)")
    parser.add_argument(
        "--compare-python",
        metavar="PYTHON",
        help="also time the cold start with this interpreter (a venv with this project's lock, "
        "e.g. .venv-3.11/bin/python), side by side with the one running the benchmark",
    )
    parser.add_argument("--only", choices=["protocols"], help="run one section and print it (results.md untouched)")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    azurite = start_azurite()
    os.environ["CHECKPOINT_STORAGE"] = azurite.connection_string
    os.environ.update(AzureWebJobsStorage=azurite.connection_string, RUNS_QUEUE="bench-runs")
    started = time.perf_counter()
    try:
        peers_ran = not args.only and args.peers and peer_section.run_peer(turns=5 if args.quick else 20)
        pythons = [sys.executable, *([args.compare_python] if args.compare_python else [])]
        report = asyncio.run(run(plan, peers_ran, pythons, args.only))
    finally:
        azurite.stop()
    elapsed = time.perf_counter() - started
    if args.only:
        print("\n\n".join(report.sections))
        return
    header = (
        f"# Benchmark results{' (--quick)' if args.quick else ''}\n\n"
        f"Machine: {machine()}. Storage: Azurite (in memory) on loopback. "
        f"{plan.iterations} timed iterations after {plan.warmup} warm-up, medians and p99. "
        f"Run on {time.strftime('%Y-%m-%d')}; took {elapsed:.0f} s. "
        f"Reproduce: `python bench/run.py{' --quick' if args.quick else ''}{' --peers' if args.peers else ''}`."
    )
    # Figures measured by hand live below KEPT in the same file; a new run keeps them.
    old = args.output.read_text() if args.output.exists() else ""
    kept = old[old.index(KEPT) :] if KEPT in old else ""
    args.output.write_text(header + "\n\n" + "\n\n".join(report.sections) + "\n" + ("\n" + kept if kept else ""))
    if args.plot and plot(report, args.plot):
        print(f"wrote {args.plot}")
    print(f"\nwrote {args.output} in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
