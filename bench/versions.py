"""Choosing the workflow version costs no storage operation (issue 31's acceptance).

The same thread turn of the sample workflow, measured four ways on one in-process app:
one unversioned workflow (as before versions), v1 with v2 registered under ``pinned``
(the turn stays on v1), under ``upgrade`` (the turn migrates v1 → v2 first), and a thread
already on v2. Each turn is measured warm (the thread's head cached on this instance) and
cold (its pointer and head dropped from the caches first), storage operations counted where
they leave the SDK, latency as the median of alternating iterations.

``python -m bench.versions`` prints the table; the figures are recorded by hand in
bench/results.md (the section "Workflow versions").
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import workflows
from bench.harness import machine, ops_text
from devtools.azurite import start_azurite
from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from resumable.storage import clients as storage_client

V1 = "workflows.default_conversation:SPEC"
V2 = "tests.versioned_workflow:SPEC_V2"
ITERATIONS = 30


def deploy(policy: str | None, **specs: str) -> None:
    """What the app hosts as ``default`` from the next request on (None: unversioned)."""
    from functions_adapter import wiring

    workflows.REGISTRY["default"] = V1 if policy is None else workflows.Versions(specs, policy=policy)
    wiring.workflow_spec.cache_clear()


class Turns:
    def __init__(self, host: FunctionHost, counter: OperationCounter) -> None:
        self.host, self.counter, self.made = host, counter, 0

    async def turn(self, thread: str) -> None:
        response = await self.host.request("POST", f"/api/threads/{thread}/runs", json_body={"messages": "next"})
        if response.status != 200:
            raise RuntimeError(await response.body())

    async def fresh_thread(self) -> str:
        """A new thread with one turn on v1 (written unversioned or as v1: the same record)."""
        self.made += 1
        thread = f"bench-{self.made}"
        deploy(None)
        await self.turn(thread)
        return thread

    def forget(self, thread: str) -> None:
        from functions_adapter import wiring

        service = wiring.build_service(wiring.load_settings())
        scope = service.store.container.url
        head = service.pointers.cached(thread)
        service.pointers._heads.forget(scope, thread)
        if head is not None and head.checkpoint_id is not None:
            service.store.cache.forget(scope, head.checkpoint_id)

    async def measure(self, setup: Callable[[], Awaitable[str]], cold: bool) -> tuple[dict[str, int], float]:
        """Ops of one turn, and the median ms of ``ITERATIONS`` such turns, each on its own thread."""
        samples, ops = [], {}
        for _ in range(ITERATIONS):
            thread = await setup()
            if cold:
                self.forget(thread)
            self.counter.reset()
            began = time.perf_counter()
            await self.turn(thread)
            samples.append((time.perf_counter() - began) * 1000)
            ops = dict(self.counter.counts)
        return ops, statistics.median(samples)


async def run() -> list[list[Any]]:
    counter = OperationCounter()
    storage_client.request_hook = counter
    import function_app

    turns = Turns(FunctionHost(function_app.app), counter)

    def on(policy: str | None, **specs: str) -> Callable[[], Awaitable[str]]:
        async def setup() -> str:
            thread = await turns.fresh_thread()
            deploy(policy, **specs)
            return thread

        return setup

    async def on_v2() -> str:
        thread = await turns.fresh_thread()
        deploy("upgrade", v1=V1, v2=V2)
        await turns.turn(thread)  # migrated: its head is now v2's
        return thread

    cases = {
        "unversioned (as before versions)": on(None),
        "v1 + v2 pinned: stays on v1": on("pinned", v1=V1, v2=V2),
        "v1 + v2 upgrade: migrates v1 → v2": on("upgrade", v1=V1, v2=V2),
        "a thread already on v2": on_v2,
    }
    rows = []
    try:
        for label, setup in cases.items():
            warm_ops, warm_ms = await turns.measure(setup, cold=False)
            cold_ops, cold_ms = await turns.measure(setup, cold=True)
            rows.append([label, ops_text(warm_ops), ops_text(cold_ops), f"{warm_ms:.2f}", f"{cold_ms:.2f}"])
    finally:
        await storage_client.close_all()
    return rows


def main() -> None:
    azurite = start_azurite(queue=False)
    os.environ.update(CHECKPOINT_STORAGE=azurite.connection_string, CHECKPOINT_CONTAINER="bench-versions")
    os.environ.update(WORKFLOW="default")
    try:
        rows = asyncio.run(run())
    finally:
        azurite.stop()
    print(f"Machine: {machine()}. {ITERATIONS} turns per cell, medians.\n")
    print("| thread turn | warm storage ops | cold storage ops | warm p50 ms | cold p50 ms |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")


if __name__ == "__main__":
    main()
