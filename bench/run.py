"""Benchmark the atomic resume: side-by-side ratios measured in one run.

    python bench/run.py            # full run (a few minutes), writes bench/results.md
    python bench/run.py --quick    # smoke run for CI (well under 30 s)
    python bench/run.py --compare-python .venv-3.11/bin/python   # cold start on two Pythons

Starts its own Azurite. Times with ``time.perf_counter`` over many iterations after a
warm-up and reports medians and p99. Storage operations are counted with the storage
SDK's request hook, not inferred.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent_framework import InMemoryCheckpointStorage, Message  # noqa: E402

import workflows  # noqa: E402
from bench import synthetic  # noqa: E402
from bench.background import background_runs  # noqa: E402
from devtools.azurite import start_azurite  # noqa: E402
from devtools.function_host import FunctionHost  # noqa: E402
from devtools.op_counter import OperationCounter  # noqa: E402
from functions_adapter import responses as http_responses  # noqa: E402
from functions_adapter import wiring as composition  # noqa: E402
from functions_adapter.request_body import parse_run_request  # noqa: E402
from functions_adapter.settings import Settings  # noqa: E402
from resumable import af_internals, run_queue, storage_client  # noqa: E402
from resumable.results import ResultCollector  # noqa: E402
from resumable.resume import prepare_run  # noqa: E402

KB = 1024


@dataclass
class Plan:
    iterations: int
    warmup: int
    supersteps: int
    sizes: list[int]
    turns: int
    concurrency: int
    cold_repeats: int


FULL = Plan(
    iterations=60,
    warmup=10,
    supersteps=5,
    sizes=[2 * KB, 20 * KB, 200 * KB, 2048 * KB],
    turns=50,
    concurrency=50,
    cold_repeats=9,
)
QUICK = Plan(
    iterations=8, warmup=2, supersteps=5, sizes=[2 * KB, 20 * KB, 200 * KB], turns=10, concurrency=10, cold_repeats=1
)


@dataclass
class Report:
    sections: list[str] = field(default_factory=list)
    # Series for the optional plot: name -> [(x, p50 ms)].
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def table(self, title: str, header: list[str], rows: list[list[Any]], note: str = "") -> None:
        lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
        if note:
            lines += ["", note]
        self.sections.append("\n".join(lines))
        print("\n" + self.sections[-1], flush=True)


def summary(samples: list[float]) -> tuple[float, float]:
    """Median and p99 (nearest rank) in milliseconds."""
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, max(0, round(0.99 * len(ordered)) - 1))]
    return statistics.median(ordered), p99


def ms(value: float) -> str:
    return f"{value:.2f}"


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await fn()
    return (time.perf_counter() - started) * 1000


async def interleaved(plan: Plan, **fns: Callable[[], Awaitable[Any]]) -> dict[str, list[float]]:
    """Run the variants alternately (A, B, A, B, ...) so drift hits them equally."""
    for _ in range(plan.warmup):
        for fn in fns.values():
            await fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(plan.iterations):
        for name, fn in fns.items():
            samples[name].append(await timed(fn))
    return samples


def user(text: str) -> list[Message]:
    return [Message(role="user", contents=[text])]


class Bench:
    def __init__(self, plan: Plan, counter: OperationCounter) -> None:
        self.plan = plan
        self.counter = counter
        import function_app

        self.host = FunctionHost(function_app.app)

    def use(self, supersteps: int, state_bytes: int) -> None:
        synthetic.configure(supersteps, state_bytes)

    async def post(self, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.host.request("POST", "/api/runs", json_body=body)
        data = await response.json()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {data}")
        return data

    async def base_checkpoint(self) -> str:
        return (await self.post({"messages": "start"}))["checkpoint_id"]

    def store(self) -> Any:
        return composition.build_service(Settings.from_env()).store

    async def ops_of(self, fn: Callable[[], Awaitable[Any]]) -> dict[str, int]:
        self.counter.reset()
        await fn()
        return dict(self.counter.counts)

    # 1 -------------------------------------------------------------------------------
    async def atomic_vs_two_step(self, report: Report) -> None:
        rows = []
        for supersteps in sorted({1, self.plan.supersteps, 10}):
            self.use(supersteps, 20 * KB)
            base = await self.base_checkpoint()
            store = self.store()

            async def atomic(base: str = base) -> None:
                await self.post({"checkpoint_id": base, "messages": "next"})

            async def two_step(base: str = base, store: Any = store) -> None:
                workflow = synthetic.build_workflow()
                await workflow.run(checkpoint_id=base, checkpoint_storage=store)
                await workflow.run(user("next"), checkpoint_storage=store)

            samples = await interleaved(self.plan, atomic=atomic, two_step=two_step)
            (a_med, a_p99), (t_med, t_p99) = summary(samples["atomic"]), summary(samples["two_step"])
            a_ops, t_ops = await self.ops_of(atomic), await self.ops_of(two_step)
            rows.append(
                [
                    supersteps,
                    ms(a_med),
                    ms(a_p99),
                    ms(t_med),
                    ms(t_p99),
                    f"**{a_med / t_med:.2f}×**",
                    _ops(a_ops),
                    _ops(t_ops),
                ]
            )
            report.series.setdefault("atomic, by supersteps", []).append((supersteps, a_med))
            report.series.setdefault("two-step, by supersteps", []).append((supersteps, t_med))
        report.table(
            "1. Atomic resume vs the upstream two-step pattern (20 KB checkpoint)",
            [
                "supersteps",
                "atomic p50 ms",
                "atomic p99",
                "two-step p50 ms",
                "two-step p99",
                "atomic / two-step",
                "atomic storage ops",
                "two-step storage ops",
            ],
            rows,
            "Atomic: one in-process `POST /api/runs` (HTTP parse, load, validate, hydrate, one run, save, "
            "respond). Two-step: `workflow.run(checkpoint_id=...)` then `workflow.run(message)` with the same "
            "Blob store as the framework's runtime checkpoint storage (the framework writes after every "
            "superstep). Iterations alternate between the two.",
        )

    # 2 -------------------------------------------------------------------------------
    async def overhead(self, report: Report) -> None:
        self.use(2, 20 * KB)
        base = await self.base_checkpoint()
        store = self.store()
        checkpoint = await store.load(base)
        body = json.dumps({"checkpoint_id": base, "messages": "next"}).encode()

        async def full() -> None:
            await self.post({"checkpoint_id": base, "messages": "next"})

        async def bare() -> None:
            workflow = synthetic.build_workflow()
            await af_internals.hydrate(workflow, checkpoint)
            await workflow.run(user("next"), checkpoint_storage=InMemoryCheckpointStorage())

        samples = await interleaved(self.plan, full=full, bare=bare)
        (f_med, f_p99), (b_med, b_p99) = summary(samples["full"]), summary(samples["bare"])

        phases: dict[str, list[float]] = {
            p: [] for p in ("parse", "load", "decode", "restore", "run", "encode", "save", "respond")
        }
        for i in range(self.plan.warmup + self.plan.iterations):
            marks = await self._phased(store, body, base, i)
            if i >= self.plan.warmup:
                for name, value in marks.items():
                    phases[name].append(value)
        medians = {name: statistics.median(values) for name, values in phases.items()}
        cpu = sum(v for k, v in medians.items() if k not in ("load", "save"))
        rows = [
            ["full `POST /api/runs`", ms(f_med), ms(f_p99), f"**{f_med / b_med:.2f}×**"],
            ["bare `workflow.run` (hydrated in memory)", ms(b_med), ms(b_p99), "1.00×"],
            ["sum of the non-storage phases below", ms(cpu), "", f"{cpu / b_med:.2f}×"],
        ]
        report.table(
            "2. Overhead over the bare workflow (2 supersteps, 20 KB checkpoint)",
            ["variant", "p50 ms", "p99 ms", "ratio to bare"],
            rows,
            "Breakdown (medians, ms, the same steps the function runs, timed one by one): "
            + ", ".join(f"{name} {value:.2f}" for name, value in medians.items())
            + ". `load` and `save` are the two blob round trips to Azurite.",
        )

    async def _phased(self, store: Any, body: bytes, base: str, i: int) -> dict[str, float]:
        marks: dict[str, float] = {}
        clock = time.perf_counter()

        def mark(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            marks[name] = (now - clock) * 1000
            clock = now

        request = parse_run_request(body)
        mark("parse")
        downloader = await store.container.download_blob(f"checkpoints/{base}.json")
        data = await downloader.readall()
        mark("load")
        checkpoint = store.codec.decode(data, expected_id=base)
        mark("decode")
        run = await prepare_run(synthetic.build_workflow(), checkpoint, request.turn)
        mark("restore")
        collector = ResultCollector()
        async for event in run.events():
            collector.add(event)
        final = await run.final_checkpoint()
        mark("run")
        encoded = store.codec.encode(final)
        mark("encode")
        await store.container.upload_blob(f"bench/{base}-{i}-{time.time_ns()}.json", encoded)
        mark("save")
        http_responses.render_json(collector.body(final))
        mark("respond")
        return marks

    # 3 -------------------------------------------------------------------------------
    async def size_scaling(self, report: Report) -> None:
        rows = []
        codec = self.store().codec.__class__(max_bytes=64 * 1024 * 1024)
        for size in self.plan.sizes:
            self.use(2, size)
            checkpoint = await _fresh_checkpoint()
            data = codec.encode(checkpoint)
            repeats = max(3, self.plan.iterations // 3)
            encode = [await timed(_sync(codec.encode, checkpoint)) for _ in range(repeats)]
            decode = [await timed(_sync(codec.decode, data)) for _ in range(repeats)]
            base = await self.base_checkpoint()

            async def resume(base: str = base) -> None:
                await self.post({"checkpoint_id": base, "messages": "n"})

            call = [await timed(resume) for _ in range(repeats)]
            e_med, d_med, c_med = statistics.median(encode), statistics.median(decode), statistics.median(call)
            rows.append(
                [
                    f"{len(data) / KB:.0f} KB",
                    ms(e_med),
                    ms(d_med),
                    f"{1000 * e_med / (len(data) / KB):.1f}",
                    f"{1000 * d_med / (len(data) / KB):.1f}",
                    ms(c_med),
                ]
            )
            report.series.setdefault("full call, by checkpoint KB", []).append((len(data) / KB, c_med))
        report.table(
            "3a. Encode and decode time against checkpoint size",
            ["checkpoint", "encode p50 ms", "decode p50 ms", "encode µs/KB", "decode µs/KB", "full call p50 ms"],
            rows,
            "Linear means a flat µs/KB column. JSON-native state: no pickles to build or check. The full call "
            "(`POST /api/runs`, 2 supersteps) includes moving the checkpoint to and from Azurite twice.",
        )

    async def turn_growth(self, report: Report) -> None:
        rows = []
        for label, build, text in (
            ("default (offline)", workflows.load_spec("default").build, "a forty-character message for each turn"),
        ):
            sizes = await _conversation_sizes(build, self.plan.turns, text, self.store().codec)
            per_turn = (sizes[-1] - sizes[0]) / (len(sizes) - 1)
            rows.append([label, len(sizes), f"{sizes[0]:,}", f"{sizes[-1]:,}", f"{per_turn:,.0f}"])
        agent_sizes = await _chat_agent_sizes(min(self.plan.turns, 10), self.store().codec)
        if agent_sizes:
            per_turn = (agent_sizes[-1] - agent_sizes[0]) / (len(agent_sizes) - 1)
            rows.append(
                [
                    "chat-agents (fake model)",
                    len(agent_sizes),
                    f"{agent_sizes[0]:,}",
                    f"{agent_sizes[-1]:,}",
                    f"{per_turn:,.0f}",
                ]
            )
        report.table(
            "3b. Checkpoint size against turns in a conversation",
            ["workflow", "turns", "bytes after turn 1", "bytes after last turn", "bytes per turn"],
            rows,
            "Both keep the whole history in the checkpoint, so it grows without bound, linearly in the "
            "conversation's length. Cap it in the workflow (keep the last N turns, or summarize), and "
            "let the lifecycle rule expire old checkpoints.",
        )

    # 4 -------------------------------------------------------------------------------
    async def concurrency(self, report: Report) -> None:
        self.use(self.plan.supersteps, 20 * KB)
        base = await self.base_checkpoint()
        n = self.plan.concurrency

        async def one() -> float:
            return await timed(lambda: self.post({"checkpoint_id": base, "messages": "concurrent"}))

        await asyncio.gather(*(one() for _ in range(min(n, 5))))  # warm-up
        started = time.perf_counter()
        latencies = await asyncio.gather(*(one() for _ in range(n)))
        wall = time.perf_counter() - started
        p50, p99 = summary(list(latencies))

        slow = _SlowCallbacks()
        pauses = _GcPauses()
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
            f"4. {n} concurrent resumes on one worker (one event loop)",
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

    # 5 -------------------------------------------------------------------------------
    def cold_start(self, report: Report, base: str, pythons: list[str]) -> None:  # one or two interpreters
        """Fresh processes per interpreter, interleaved per round so load hits them equally."""
        floor_code = (
            "import azure.functions, azure.storage.blob.aio; from agent_framework import WorkflowBuilder, Executor"
        )
        # name -> (row label, code timed in a fresh process)
        measures = {
            "python": ("`python -c pass` (interpreter only)", "pass"),
            "floor": ("floor: import azure.functions + azure.storage.blob.aio + workflow classes", floor_code),
            "with_fastapi": (
                "floor + `fastapi` (imported by the HTTP streaming extension)",
                floor_code + "; import fastapi",
            ),
            "app": ("`import function_app`", "import function_app"),
            "first": (
                "process start → first completed resume (in-process call on Azurite)",
                _FIRST_RESUME.format(base=base),
            ),
        }
        codes = {name: code for name, (_, code) in measures.items()}
        medians = _spawn_medians(codes, self.plan.cold_repeats, pythons)
        versions = [_version_of(python) for python in pythons]
        columns = ["measure"]
        for version in versions:
            columns += [f"ms, Python {version}", f"vs floor, {version}"]
        if len(pythons) > 1:
            columns.append(f"{versions[0]} / {versions[1]}")
        rows = []
        for name, (label, _) in measures.items():
            row = [label]
            for python in pythons:
                value, floor = medians[python, name], medians[python, "floor"]
                row += [f"{value:.0f}", f"{value / floor:.2f}×" if name not in ("python", "first") else ""]
            if len(pythons) > 1:
                row.append(f"**{medians[pythons[0], name] / medians[pythons[1], name]:.2f}×**")
            rows.append(row)
        report.table(
            "5. Cold start (fresh processes, medians)",
            columns,
            rows,
            "Where the time goes on the first interpreter, `python -X importtime -c 'import function_app'` "
            "(top cumulative):\n\n" + "\n".join(f"- `{name}`: {cum / 1000:.0f} ms" for name, cum in _import_profile()),
        )


_FIRST_RESUME = """
import asyncio, function_app
from devtools.function_host import FunctionHost
from resumable import storage_client
async def main():
    resp = await FunctionHost(function_app.app).request(
        "POST", "/api/runs", json_body={{"checkpoint_id": "{base}", "messages": "cold"}})
    assert resp.status == 200, await resp.body()
    await storage_client.close_all()
asyncio.run(main())
"""


def _spawn_medians(codes: dict[str, str], repeats: int, pythons: list[str]) -> dict[tuple[str, str], float]:
    """Median wall time of ``python -c code`` per (interpreter, entry), all interleaved per round."""
    times: dict[tuple[str, str], list[float]] = {(p, name): [] for p in pythons for name in codes}
    for _ in range(repeats):
        for name, code in codes.items():
            for python in pythons:
                started = time.perf_counter()
                subprocess.run([python, "-c", code], cwd=ROOT, check=True, env=os.environ.copy())
                times[python, name].append((time.perf_counter() - started) * 1000)
    return {key: statistics.median(values) for key, values in times.items()}


def _version_of(python: str) -> str:
    code = "import platform; print(platform.python_version())"
    return subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def _import_profile(top: int = 8) -> list[tuple[str, int]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import function_app"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            name = parts[2].strip()
            if name.count(".") <= 2:
                rows.append((name, int(parts[1])))
    return sorted(rows, key=lambda r: -r[1])[:top]


def _sync(fn: Callable[..., Any], *args: Any) -> Callable[[], Awaitable[Any]]:
    async def call() -> Any:
        return fn(*args)

    return call


async def _fresh_checkpoint() -> Any:
    storage = InMemoryCheckpointStorage()
    workflow = synthetic.build_workflow()
    await workflow.run(user("size"), checkpoint_storage=storage)
    return await storage.load(workflow.get_last_checkpoint_id())


async def _conversation_sizes(build: Callable[[], Any], turns: int, text: str, codec: Any) -> list[int]:
    from resumable.resume import TurnInput

    checkpoint, sizes = None, []
    for _ in range(turns):
        run = await prepare_run(build(), checkpoint, TurnInput(messages=user(text)))
        [e async for e in run.events()]
        checkpoint = codec.decode(codec.encode(await run.final_checkpoint()))
        sizes.append(len(codec.encode(checkpoint)))
    return sizes


async def _chat_agent_sizes(turns: int, codec: Any) -> list[int]:
    from devtools.fake_openai import start_fake_openai
    from workflows import chat_agents

    server = await start_fake_openai()
    saved = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL")}
    os.environ.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="bench", OPENAI_MODEL="fake")
    try:
        return await _conversation_sizes(
            chat_agents.build_workflow, turns, "a forty-character message for each turn", codec
        )
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        chat_agents._clients.clear()
        await server.close()


def _ops(counts: dict[str, int]) -> str:
    return f"{sum(counts.values())} ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))})"


class _GcPauses:
    """The longest garbage-collector pause while attached (gc.callbacks)."""

    def __init__(self) -> None:
        self.longest_ms = 0.0
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.longest_ms = max(self.longest_ms, (time.perf_counter() - self._started) * 1000)

    def detach(self) -> None:
        gc.callbacks.remove(self._callback)


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


def machine() -> str:
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


async def run(plan: Plan, quick: bool, compare_python: str | None) -> Report:
    report = Report()
    counter = OperationCounter()
    storage_client.request_hook = counter
    workflows.REGISTRY["bench-chain"] = "bench.synthetic:SPEC"
    os.environ.update(WORKFLOW="bench-chain", CHECKPOINT_CONTAINER="bench", MAX_CHECKPOINT_BYTES=str(64 * KB * KB))
    bench = Bench(plan, counter)
    try:
        await bench.atomic_vs_two_step(report)
        await bench.overhead(report)
        await bench.size_scaling(report)
        await bench.turn_growth(report)
        await bench.concurrency(report)
        await background_runs(bench, report, summary, ms, interleaved)
        bench.use(2, 20 * KB)
        os.environ["WORKFLOW"] = "default"
        base = (await bench.post({"messages": "cold start base"}))["checkpoint_id"]
    finally:
        await storage_client.close_all()
        await run_queue.close_all()
    bench.cold_start(report, base, [sys.executable, *([compare_python] if compare_python else [])])
    return report


KEPT = "<!-- Measured outside bench/run.py: kept as is by every run. -->"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few iterations, for a CI smoke run")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results.md")
    parser.add_argument("--plot", type=Path, help="also write a PNG plot here (needs requirements-bench.txt)")
    parser.add_argument(
        "--compare-python",
        metavar="PYTHON",
        help="also time the cold start with this interpreter (a venv with this project's lock, "
        "e.g. .venv-3.11/bin/python), side by side with the one running the benchmark",
    )
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    azurite = start_azurite()
    os.environ["CHECKPOINT_STORAGE"] = azurite.connection_string
    os.environ.update(AzureWebJobsStorage=azurite.connection_string, RUNS_QUEUE="bench-runs")
    started = time.perf_counter()
    try:
        report = asyncio.run(run(plan, args.quick, args.compare_python))
    finally:
        azurite.stop()
    elapsed = time.perf_counter() - started
    header = (
        f"# Benchmark results{' (--quick)' if args.quick else ''}\n\n"
        f"Machine: {machine()}. Storage: Azurite (in memory) on loopback. "
        f"{plan.iterations} timed iterations after {plan.warmup} warm-up, medians and p99. "
        f"Run on {time.strftime('%Y-%m-%d')}; took {elapsed:.0f} s. "
        f"Reproduce: `python bench/run.py{' --quick' if args.quick else ''}`."
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
