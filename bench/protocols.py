"""Section 8: one thread turn through each protocol, side by side.

The same turn (one user message on an existing thread) through ``POST
/api/threads/{id}/runs``, the MCP ``run_turn`` tool, ``POST /api/ag-ui``, ``POST
/api/responses`` with ``conversation``, and A2A's ``SendMessage`` beside the thread route
with an Idempotency-Key (A2A's ``messageId`` is mandatory and is the turn's key, so the keyed
thread turn is its floor): storage operations per turn and median latency, cold (this
instance has forgotten the thread's head and checkpoint) and warm. The protocols are
translators over one turn pipeline, so their operation counts must match; an AG-UI reload
(no new message) must cost reads only.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.cache import _forget
from bench.harness import KB, Bench, Report, ms, ops_text, summary
from functions_adapter.mcp.tools import call_tool

_ids = itertools.count()


def _drivers(bench: Bench) -> dict[str, Callable[[str, str], Awaitable[Any]]]:
    host = bench.host

    async def http(thread: str, text: str) -> None:
        await bench.post({"messages": text}, url=f"/api/threads/{thread}/runs")

    async def mcp(thread: str, text: str) -> None:
        result = (await call_tool("run_turn", {"thread_id": thread, "message": text}, {})).to_json()
        if result["isError"]:
            raise RuntimeError(result)

    async def ag_ui(thread: str, text: str) -> None:
        body = {
            "threadId": thread,
            "runId": f"run-{next(_ids)}",
            "messages": [{"id": f"m-{next(_ids)}", "role": "user", "content": text}],
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
        answered = await host.request("POST", "/api/ag-ui", json_body=body)
        stream = (await answered.body()).decode()
        if answered.status != 200 or "RUN_FINISHED" not in stream:
            raise RuntimeError(stream[-500:])

    async def responses(thread: str, text: str) -> None:
        await bench.post({"input": text, "conversation": thread}, url="/api/responses")

    async def http_keyed(thread: str, text: str) -> None:
        key = {"Idempotency-Key": f"key-{next(_ids)}"}
        await bench.post({"messages": text}, url=f"/api/threads/{thread}/runs", headers=key)

    async def a2a(thread: str, text: str) -> None:
        message = {"messageId": f"a2a-{next(_ids)}", "role": "ROLE_USER", "contextId": thread}
        message["parts"] = [{"text": text}]
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        answer = await bench.post(body, url=f"/api/a2a/{os.environ['WORKFLOW']}")  # the thread's workflow
        if answer.get("result", {}).get("task", {}).get("status", {}).get("state") != "TASK_STATE_COMPLETED":
            raise RuntimeError(answer)

    return {
        "`POST /api/threads/{id}/runs`": http,
        "MCP `run_turn`": mcp,
        "AG-UI `POST /api/ag-ui`": ag_ui,
        "Responses + `conversation`": responses,
        "`POST /api/threads/{id}/runs` + Idempotency-Key": http_keyed,
        "A2A `SendMessage` (`messageId`: the key)": a2a,
    }


async def protocols(bench: Bench, report: Report) -> None:
    """Ops and p50 per protocol, cold and warm, plus an AG-UI reload's ops."""
    bench.use(2, 20 * KB)
    turns = max(3, bench.plan.iterations // 4)
    rows: list[list[Any]] = []
    for n, (name, drive) in enumerate(_drivers(bench).items()):
        thread = f"proto-{n}"
        await bench.post({"messages": "start"}, url=f"/api/threads/{thread}/runs")
        cold_ops = warm_ops = ""
        samples: dict[str, list[float]] = {"cold": [], "warm": []}
        for i in range(turns):
            for kind in ("cold", "warm"):
                if kind == "cold":
                    _forget(bench, thread=thread)
                bench.counter.reset()
                started = time.perf_counter()
                await drive(thread, f"turn {i} {kind}")
                samples[kind].append((time.perf_counter() - started) * 1000)
                text = ops_text(dict(bench.counter.counts))
                if kind == "cold":
                    cold_ops = cold_ops or text
                else:
                    warm_ops = warm_ops or text
        rows.append([name, cold_ops, ms(summary(samples["cold"])[0]), warm_ops, ms(summary(samples["warm"])[0])])

    bench.counter.reset()
    reload = {"threadId": "proto-2", "runId": "reload", "messages": [], "state": {}, "tools": [], "context": []}
    answered = await bench.host.request("POST", "/api/ag-ui", json_body=reload)
    stream = (await answered.body()).decode()
    assert "MESSAGES_SNAPSHOT" in stream, stream[-300:]
    reload_ops = dict(bench.counter.counts)
    rows.append(["AG-UI reload (no new message: snapshot)", "", "", ops_text(reload_ops), ""])
    report.table(
        "8. One thread turn through each protocol (20 KB checkpoint, 2 supersteps)",
        ["route", "ops cold", "p50 ms cold", "ops warm", "p50 ms warm"],
        rows,
        "Cold: this instance forgot the thread's head and checkpoint before the turn; warm: it just "
        f"ran the previous one. {turns} turns of each kind per route, interleaved. The reload runs "
        f"nothing: {json.dumps(reload_ops)} (reads only).",
    )
