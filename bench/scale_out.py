"""Scale-out drill: several app processes on one storage account, many threads, then a verdict
from storage alone.

    python -m bench.scale_out                       # 4 instances, 1,000 threads x 5 turns, concurrency 48
    python -m bench.scale_out --threads 100 --concurrency 24 --no-baseline

One Azurite (in memory) is the account. ``--instances`` ``devtools.serve --no-azurite``
processes share its container and run queue (``bench.scale_out_cluster``); the first injects
storage faults at its SDK boundary (``--fault-rate`` of its requests). The driver
(``bench.scale_out_driver``) sends every thread's turns, each request to a random instance:
``--keyed`` of them with an Idempotency-Key and resent on purpose, ``--background`` of them as
background turns, ``--deletes`` threads deleted mid-way. Once the queue is empty the processes
stop (each writes its storage-operation count) and ``bench.scale_out_verify`` judges the
container. Then the same drill runs on one instance (the baseline; its fault rate is the
cluster's divided by the instance count, so both see the same share of faulted requests).
Exit status 1 if any run broke a promise; every violation is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.queue.aio import QueueClient

from bench.scale_out_cluster import cluster
from bench.scale_out_driver import Outcome, drive
from bench.scale_out_plan import ThreadPlan, plan
from bench.scale_out_verify import Verdict, verify
from devtools.azurite import start_azurite
from resumable.storage import clients as storage_client


@dataclass(frozen=True)
class Drill:
    instances: int = 4
    threads: int = 1000
    turns: int = 5
    concurrency: int = 48
    keyed: float = 0.5
    background: float = 0.3
    deletes: int = 10
    fault_rate: float = 0.02
    seed: int = 7


@dataclass
class Result:
    drill: Drill
    outcome: Outcome
    verdict: Verdict
    operations: dict[str, int]  # "METHOD service prefix" → attempts, every instance summed
    faults: dict[str, int]

    @property
    def violations(self) -> list[str]:
        return self.outcome.problems + self.verdict.violations

    @property
    def app_operations(self) -> int:
        return sum(self.operations.values())


QUIET_SECONDS = 180


async def _queue_empty(connection: str, queue: str = "runs") -> bool:
    """Wait until the run queue holds no message (visible or not): every delivery is done."""
    deadline = time.monotonic() + QUIET_SECONDS
    async with QueueClient.from_connection_string(connection, queue) as client:
        while time.monotonic() < deadline:
            try:
                if (await client.get_queue_properties()).approximate_message_count == 0:
                    return True
            except ResourceNotFoundError:  # no queue yet: nothing was ever queued
                return True
            await asyncio.sleep(1)
    return False


@contextmanager
def _reading(connection: str, container: str) -> Iterator[None]:
    """The app's storage settings, pointed at the drill's container while the verdict reads it."""
    saved = {name: os.environ.get(name) for name in ("CHECKPOINT_STORAGE", "CHECKPOINT_CONTAINER")}
    os.environ.update(CHECKPOINT_STORAGE=connection, CHECKPOINT_CONTAINER=container)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


async def _judge(plans: list[ThreadPlan], outcome: Outcome) -> Verdict:
    deleted = set(outcome.deleted) | {p.thread for p in plans if p.delete_after is not None}
    expected = {p.thread: p.expected for p in plans if p.thread not in deleted}
    try:
        return await verify(expected, sorted(deleted))
    finally:
        await storage_client.close_all()


def run_drill(connection: str, container: str, work: Path, drill: Drill) -> Result:
    """One drill on ``connection``'s ``container`` (created by the app); the verdict included."""
    plans = plan(
        drill.threads,
        drill.turns,
        keyed=drill.keyed,
        background=drill.background,
        deletes=drill.deletes,
        seed=drill.seed,
        tag=container[-6:],
    )
    clock = time.monotonic()

    def phase(what: str) -> None:
        nonlocal clock
        print(f"  {what} in {time.monotonic() - clock:.0f} s", flush=True)
        clock = time.monotonic()

    with cluster(
        connection, container, work, instances=drill.instances, fault_rate=drill.fault_rate, seed=drill.seed
    ) as running:
        phase(f"{drill.instances} instance(s) started")
        outcome = asyncio.run(drive(running.bases, plans, concurrency=drill.concurrency, seed=drill.seed))
        phase("driven")
        if not asyncio.run(_queue_empty(connection)):
            outcome.problems.append(f"the run queue did not empty within {QUIET_SECONDS} s of the last turn")
        phase("queue empty")
    counts, faults = running.operations()
    with _reading(connection, container):
        verdict = asyncio.run(_judge(plans, outcome))
    phase(f"verified ({verdict.threads} threads, {verdict.blobs} blobs read)")
    return Result(drill, outcome, verdict, dict(counts), dict(faults))


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def _row(result: Result) -> str:
    d, o = result.drill, result.outcome
    turns = max(o.applied, 1)
    faults = sum(result.faults.values())
    return (
        f"| {d.instances} | {d.threads} × {d.turns} | {d.concurrency} | {o.seconds:.0f} | {o.applied} "
        f"| **{o.applied / o.seconds:.1f}** | {_pct(o.sync_ms, 50):.0f} / {_pct(o.sync_ms, 99):.0f} "
        f"| {_pct(o.background_ms, 50):.0f} / {_pct(o.background_ms, 99):.0f} "
        f"| {result.app_operations / turns:.1f} | {faults} | {o.replays} | {len(o.deleted)} "
        f"| **{len(result.violations)}** |"
    )


HEADER = (
    "| instances | threads × turns | concurrency | wall s | turns applied | turns/s | sync turn p50 / p99 ms "
    "| background turn p50 / p99 ms | storage ops / turn | faults injected | keyed replays | deleted | violations |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def _by_prefix(result: Result) -> str:
    """Storage operations per applied turn, by what they touched."""
    turns = max(result.outcome.applied, 1)
    merged: dict[str, int] = {}
    for key, count in result.operations.items():
        method, where = key.split(" ", 1)
        merged[f"{where} {method}"] = merged.get(f"{where} {method}", 0) + count
    return ", ".join(f"{k} {v / turns:.2f}" for k, v in sorted(merged.items(), key=lambda kv: -kv[1]))


def report(results: list[Result]) -> str:
    lines = [HEADER, *(_row(r) for r in results), ""]
    for r in results:
        lines.append(f"- {r.drill.instances} instance(s), ops per turn by blob prefix: {_by_prefix(r)}")
        lines.append(f"  answers: {dict(r.outcome.statuses.most_common())}; faults: {r.faults}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Drill()
    for name, value in asdict(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--no-baseline", action="store_true", help="skip the one-instance run")
    parser.add_argument("--work", type=Path, default=None, help="where logs and counts go (default: a temp dir)")
    args = parser.parse_args(argv)
    drill = Drill(**{k: getattr(args, k) for k in asdict(defaults)})
    work = args.work or Path(tempfile.mkdtemp(prefix="scale-out-"))
    results: list[Result] = []
    runs = [drill]
    if not args.no_baseline and drill.instances > 1:
        runs.append(Drill(**{**asdict(drill), "instances": 1, "fault_rate": drill.fault_rate / drill.instances}))
    for n, each in enumerate(runs):
        stamp = datetime.now(UTC).strftime("%H%M%S")
        print(f"{stamp} drill {n + 1}/{len(runs)}: {each}", flush=True)
        # A fresh account per drill: Azurite's in-memory store runs a blob garbage collection
        # every 10 minutes that, over ~10,000 blobs, stops it answering for minutes.
        azurite = start_azurite()
        try:
            result = run_drill(azurite.connection_string, f"scale{n}{stamp}", work / f"run{n}", each)
        finally:
            azurite.stop()
        results.append(result)
        print(report([result]), flush=True)
        for line in result.violations[:200]:
            print(f"VIOLATION {line}", flush=True)
    print(f"\nMachine: {os.cpu_count()} cores; logs and counts in {work}\n")
    print(report(results))
    (work / "results.json").write_text(
        json.dumps([{"drill": asdict(r.drill), "violations": r.violations, "ops": r.operations} for r in results])
    )
    return 1 if any(r.violations for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
