"""What every benchmark section shares: the plan, timing, the report, and the in-process app.

Timings are ``time.perf_counter`` over many iterations after a warm-up, variants run
alternately (A, B, A, B, ...) so drift hits them equally; storage operations are counted
where they leave the SDK (``devtools.op_counter``), never inferred.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agent_framework import Message

from bench import synthetic
from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter

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
    lag_repeats: int
    sustained_bursts: int = 25
    sustained_bytes: int = 1024 * KB


FULL = Plan(
    iterations=60,
    warmup=10,
    supersteps=5,
    sizes=[2 * KB, 20 * KB, 200 * KB, 2048 * KB],
    turns=50,
    concurrency=50,
    cold_repeats=21,  # medians over at least 20 fresh processes per entry
    lag_repeats=5,
)
QUICK = Plan(
    iterations=8,
    warmup=2,
    supersteps=5,
    sizes=[2 * KB, 20 * KB, 200 * KB],
    turns=10,
    concurrency=10,
    cold_repeats=1,
    lag_repeats=1,
    sustained_bursts=3,
    sustained_bytes=256 * KB,
)


@dataclass
class Report:
    sections: list[str] = field(default_factory=list)
    # Series for the optional plot: name -> [(x, p50 ms)].
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    # Measured values the targets table reads (``bench/targets.py``).
    facts: dict[str, Any] = field(default_factory=dict)

    def table(self, title: str, header: list[str], rows: list[list[Any]], note: str = "") -> None:
        lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
        if note:
            lines += ["", note]
        self.sections.append("\n".join(lines))
        print("\n" + self.sections[-1], flush=True)

    def text(self, title: str, body: str) -> None:
        self.sections.append(f"### {title}\n\n{body}")
        print("\n" + self.sections[-1], flush=True)


def summary(samples: list[float]) -> tuple[float, float]:
    """Median and p99 (nearest rank) in milliseconds."""
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, max(0, round(0.99 * len(ordered)) - 1))]
    return statistics.median(ordered), p99


def ms(value: float) -> str:
    return f"{value:.2f}"


def ops_text(counts: dict[str, int]) -> str:
    return f"{sum(counts.values())} ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))})"


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


async def post_run(host: FunctionHost, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /api/runs`` through the in-process app; its JSON answer (anything but 200 raises)."""
    response = await host.request("POST", "/api/runs", json_body=body)
    data = await response.json()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {data}")
    return data


def machine() -> str:
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


class Bench:
    """The function app in-process (``FunctionHost``) and the storage operation counter."""

    def __init__(self, plan: Plan, counter: OperationCounter) -> None:
        self.plan = plan
        self.counter = counter
        import function_app

        self.host = FunctionHost(function_app.app)

    def use(self, supersteps: int, state_bytes: int) -> None:
        synthetic.configure(supersteps, state_bytes)

    async def post(
        self, body: dict[str, Any], url: str = "/api/runs", headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        response = await self.host.request("POST", url, json_body=body, headers=headers or {})
        data = await response.json()
        if response.status not in (200, 202):
            raise RuntimeError(f"HTTP {response.status}: {data}")
        return data

    async def base_checkpoint(self) -> str:
        return (await self.post({"messages": "start"}))["checkpoint_id"]

    def service(self) -> Any:
        from functions_adapter import wiring
        from functions_adapter.settings import Settings

        return wiring.build_service(Settings.from_env())

    def store(self) -> Any:
        return self.service().store

    async def ops_of(self, fn: Callable[[], Awaitable[Any]]) -> dict[str, int]:
        self.counter.reset()
        await fn()
        return dict(self.counter.counts)
