"""The closest peer on the same workload: azure-functions-langgraph's Blob checkpoint saver.

Runs in bench/peers/.venv (``bench/peers/setup.sh``), never in the project's venv:

    CHECKPOINT_STORAGE=<Azurite connection string> bench/peers/.venv/bin/python \\
        bench/peers/langgraph_chain.py --out bench/peers/results.json

A LangGraph chain of 5 nodes (one superstep each, like ``bench/synthetic.py``'s chain)
whose state carries a 20 KB payload; each turn sends one message on one thread. Storage
operations are counted with the storage SDK's request hook on the saver's sync and async
clients, as the main benchmark counts the app's. ``durability`` is LangGraph's choice of
when to write: "async"/"sync" after every step, "exit" once per turn.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import statistics
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from typing import Any, TypedDict

from azure.storage.blob import ContainerClient
from azure.storage.blob.aio import ContainerClient as AsyncContainerClient
from azure_functions_langgraph.checkpointers import AzureBlobCheckpointSaver
from langgraph.graph import END, START, StateGraph

STEPS = 5
PAYLOAD_BYTES = 20_000


class State(TypedDict):
    payload: str
    turns: int
    last: str


def head(state: State) -> dict[str, Any]:
    return {"payload": state.get("payload") or "x" * PAYLOAD_BYTES, "turns": state.get("turns", 0) + 1}


def step(state: State) -> dict[str, Any]:
    return {"last": f"turn {state['turns']}: {state['last']}"}


def build(checkpointer: AzureBlobCheckpointSaver) -> Any:
    graph = StateGraph(State)
    graph.add_node("step-0", head)
    for i in range(1, STEPS):
        graph.add_node(f"step-{i}", step)
    graph.add_edge(START, "step-0")
    for i in range(1, STEPS):
        graph.add_edge(f"step-{i - 1}", f"step-{i}")
    graph.add_edge(f"step-{STEPS - 1}", END)
    return graph.compile(checkpointer=checkpointer)


async def measure(connection: str, durability: str, turns: int) -> dict[str, Any]:
    counts: Counter[str] = Counter()

    def hook(request: Any) -> None:
        counts[request.http_request.method] += 1

    name = f"peer{uuid.uuid4().hex[:12]}"
    sync = ContainerClient.from_connection_string(connection, name, raw_request_hook=hook)
    sync.create_container()
    async with AsyncContainerClient.from_connection_string(connection, name, raw_request_hook=hook) as aio:
        graph = build(AzureBlobCheckpointSaver(container_client=sync, aio_container_client=aio))
        config = {"configurable": {"thread_id": "chain"}}
        latencies, ops, per_method = [], [], Counter()
        for turn in range(turns + 1):
            counts.clear()
            started = time.perf_counter()
            await graph.ainvoke({"last": f"message {turn}"}, config, durability=durability)
            if turn:  # turn 0 creates the thread (and writes the payload for the first time)
                latencies.append((time.perf_counter() - started) * 1000)
                ops.append(sum(counts.values()))
                per_method.update(counts)
    sync.close()
    ordered = sorted(latencies)
    return {
        "durability": durability,
        "turns": turns,
        "p50_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, max(0, round(0.99 * len(ordered)) - 1))],
        "ops_median": statistics.median(ops),
        "ops_min": min(ops),
        "ops_max": max(ops),
        "ops_by_method_per_turn": {k: round(v / turns, 1) for k, v in sorted(per_method.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    connection = os.environ["CHECKPOINT_STORAGE"]
    results = [asyncio.run(measure(connection, mode, args.turns)) for mode in ("async", "exit")]
    packages = ("azure-functions-langgraph", "langgraph", "azure-storage-blob")
    versions = {package: importlib.metadata.version(package) for package in packages}
    document = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "versions": versions,
        "workload": f"{STEPS}-node chain, {PAYLOAD_BYTES // 1000} KB state, one message per turn, one thread",
        "results": results,
    }
    text = json.dumps(document, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
