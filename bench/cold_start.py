"""Section 5: cold start, in fresh processes, interleaved per round so load hits each equally.

The fair floor is ``bench/hello_app``: a hello-world function app on the same HTTP streaming
extension (the worker streams only if the app imported it, and it brings fastapi, starlette
and uvicorn). Each entry's wall time is reported with its CPU time (``time.process_time``),
both taken inside the fresh process: on a shared machine the wall time is mostly waiting for
a core, the CPU time is what the import itself costs.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench.harness import FULL, Bench, Report

ROOT = Path(__file__).resolve().parent.parent
FLOOR = "import azure.functions, azure.storage.blob.aio; from agent_framework import WorkflowBuilder, Executor"
# The hello-world app's ``function_app``, ahead of the real one on the path.
HELLO = "import sys; sys.path.insert(0, 'bench/hello_app'); import function_app"
# What the start-up check of WORKFLOW imports beyond it: the default workflow's module (Agent
# Framework). ``import function_app`` must run that check, so this is its floor.
HELLO_CHECK = f"{HELLO}; sys.path.pop(0); import workflows.default_conversation"
_FIRST_RESUME = """
import asyncio, function_app
from devtools.function_host import FunctionHost
from resumable.storage import clients as storage_client
async def main():
    resp = await FunctionHost(function_app.app).request(
        "POST", "/api/runs", json_body={{"checkpoint_id": "{base}", "messages": "cold"}})
    assert resp.status == 200, await resp.body()
    await storage_client.close_all()
asyncio.run(main())
"""
# A2A's first calls on a fresh process: the agent card, then a task to completion (a
# non-blocking SendMessage, its queued turn run in-process as the queue trigger runs it, GetTask).
_FIRST_A2A_CARD = """
import asyncio, function_app
from devtools.function_host import FunctionHost
from resumable.storage import clients as storage_client
async def main():
    resp = await FunctionHost(function_app.app).request("GET", "/api/a2a/default/.well-known/agent-card.json")
    assert resp.status == 200, await resp.body()
    await storage_client.close_all()
asyncio.run(main())
"""
_FIRST_A2A_TASK = """
import asyncio, uuid, function_app
from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from resumable.storage import clients as storage_client, run_queue
async def rpc(host, method, params):
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return (await (await host.request("POST", "/api/a2a/default", json_body=body)).json())["result"]
async def main():
    host = FunctionHost(function_app.app)
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "cold"}]}
    task = (await rpc(host, "SendMessage", {"message": message, "configuration": {"returnImmediately": True}}))["task"]
    await QueueRunner(host).run_until_idle()
    done = await rpc(host, "GetTask", {"id": task["id"]})
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    await storage_client.close_all()
    await run_queue.close_all()
asyncio.run(main())
"""
# What a handler built on a2a-sdk would load on top of the app (the app imports none of it:
# tests/adapter/test_a2a_edges.py holds that).
A2A_SDK = (
    "import function_app; import a2a.types; from a2a.server.request_handlers import DefaultRequestHandler; "
    "from a2a.server.tasks import InMemoryTaskStore"
)
# Entries timed against the hello-world app (the rest are context).
_RELATIVE = ("hello", "hello_check", "floor", "app", "a2a_sdk")


def cold_start(bench: Bench, report: Report, base: str, pythons: list[str]) -> None:
    """``base``: a checkpoint of the default workflow the first-resume row resumes."""
    measures = {  # name -> (row label, code timed in a fresh process)
        "hello": ("hello-world app on the HTTP streaming extension (`bench/hello_app`)", HELLO),
        "hello_check": ("the same + the default workflow's module (what the WORKFLOW check imports)", HELLO_CHECK),
        "floor": ("import azure.functions + azure.storage.blob.aio + workflow classes (issue 24's floor)", FLOOR),
        "app": ("`import function_app`", "import function_app"),
        "first": (
            "interpreter up → first completed resume (in-process call on Azurite)",
            _FIRST_RESUME.format(base=base),
        ),
        "a2a_card": ("interpreter up → first A2A agent card (in-process GET)", _FIRST_A2A_CARD),
        "a2a_task": (
            "interpreter up → first A2A task completed (non-blocking SendMessage, its queued turn run "
            "in-process, GetTask; on Azurite)",
            _FIRST_A2A_TASK,
        ),
        "a2a_sdk": (
            "`import function_app` + a2a-sdk's server types (`a2a.types`, `DefaultRequestHandler`, "
            "`InMemoryTaskStore`): what the app does not import",
            A2A_SDK,
        ),
    }
    medians = _spawn_medians({name: code for name, (_, code) in measures.items()}, bench.plan.cold_repeats, pythons)
    versions = [_version_of(python) for python in pythons]
    columns = ["measure"]
    for version in versions:
        columns += [f"wall ms, {version}", f"CPU ms, {version}", f"vs hello app, wall / CPU, {version}"]
    if len(pythons) > 1:
        columns.append(f"{versions[0]} / {versions[1]}, wall")
    rows = []
    for name, (label, _) in measures.items():
        row = [label]
        for python in pythons:
            (wall, cpu), (hello_wall, hello_cpu) = medians[python, name], medians[python, "hello"]
            ratio = f"{wall / hello_wall:.2f}× / {cpu / hello_cpu:.2f}×" if name in _RELATIVE else ""
            row += [f"{wall:.0f}", f"{cpu:.0f}", ratio]
        if len(pythons) > 1:
            row.append(f"**{medians[pythons[0], name][0] / medians[pythons[1], name][0]:.2f}×**")
        rows.append(row)
    first = pythons[0]
    app, hello, check = (medians[first, name] for name in ("app", "hello", "hello_check"))
    report.facts["cold_start"] = (app[0] / hello[0], app[1] / hello[1], check[0] / hello[0], check[1] / hello[1])
    report.table(
        "5. Cold start (fresh processes, medians)",
        columns,
        rows,
        f"{bench.plan.cold_repeats} rounds, each entry in a fresh process, interleaved. Background runs, callbacks "
        "and housekeeping are imported by their first trigger or route, the Azure SDK (`azure.core`, the Blob "
        "Storage client, aiohttp) by the first storage client (`tests/library/test_cold_start.py` pins both), "
        "and `resumable`'s package exports load on first use. What `import function_app` adds to the hello-world "
        "app is Agent Framework, which the start-up check of `WORKFLOW` (`tests/adapter/test_startup_checks.py`) "
        "imports, and the app's own modules. A2A imports its route on first use and never imports "
        "a2a-sdk (its JSON-RPC envelopes are hand-written; `tests/adapter/test_a2a_edges.py` pins it), so "
        f"the SDK's {_beyond(medians[first, 'a2a_sdk'], medians[first, 'app'])} "
        "(the last row against `import function_app`) is a cost the app does not pay. Beyond `import "
        f"function_app`, the first agent card costs {_beyond(medians[first, 'a2a_card'], medians[first, 'app'])}, "
        f"the first A2A task {_beyond(medians[first, 'a2a_task'], medians[first, 'app'])} and the first resume "
        f"{_beyond(medians[first, 'first'], medians[first, 'app'])}. "
        "Where the time goes on the first interpreter, `python -X importtime -c 'import function_app'` "
        "(top cumulative):\n\n" + "\n".join(f"- `{name}`: {cum / 1000:.0f} ms" for name, cum in _import_profile()),
    )


def _beyond(entry: tuple[float, float], app: tuple[float, float]) -> str:
    """What an entry's (wall, CPU) medians add to ``import function_app``'s."""
    return f"{entry[0] - app[0]:.0f} ms wall / {entry[1] - app[1]:.0f} ms CPU"


def _spawn_medians(
    codes: dict[str, str], repeats: int, pythons: list[str]
) -> dict[tuple[str, str], tuple[float, float]]:
    """Median (wall ms, CPU ms) of ``python -c code`` per (interpreter, entry), interleaved per round.

    One untimed round first writes every entry's bytecode, so each is timed from ``.pyc``
    files as a deployed app starts (with ``PYTHONDONTWRITEBYTECODE`` set, a checkout would
    compile its own modules in every process and the hello app almost none)."""
    times: dict[tuple[str, str], list[tuple[float, float]]] = {(p, name): [] for p in pythons for name in codes}
    for code in codes.values():
        for python in pythons:
            _spawn(python, code)
    for _ in range(repeats):
        for name, code in codes.items():
            for python in pythons:
                times[python, name].append(_spawn(python, code))
    return {
        key: (statistics.median(t[0] for t in values), statistics.median(t[1] for t in values))
        for key, values in times.items()
    }


def _spawn(python: str, code: str) -> tuple[float, float]:
    """Wall and CPU milliseconds of ``code`` in one fresh interpreter, timed inside it: from
    when the interpreter is up to when ``code`` is done, so neither the interpreter's start
    nor its exit counts (``function_app`` ends with ``gc.freeze()``, which makes its exit
    cheaper than the hello app's: timing the whole process would flatter it)."""
    timed = (
        "import time as _t\n_w, _c = _t.perf_counter(), _t.process_time()\n"
        f"{code}\n"
        "print('cold-start', (_t.perf_counter() - _w) * 1000, (_t.process_time() - _c) * 1000)\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([python, "-c", timed], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    _, wall, cpu = done.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


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


async def _base_checkpoint(bench: Bench) -> str:
    """A checkpoint of the default workflow for the first-resume row (as bench/run.py makes it)."""
    from resumable.storage import clients as storage_client

    try:
        return (await bench.post({"messages": "cold start base"}))["checkpoint_id"]
    finally:
        await storage_client.close_all()


def main() -> None:
    """Run section 5 alone on its own Azurite and print it (bench/results.md is left alone):
    ``python -m bench.cold_start [--repeats N]``. The timed processes are fresh; this one only
    makes the checkpoint the first-resume row resumes."""
    import argparse
    import asyncio

    from devtools.azurite import start_azurite
    from devtools.op_counter import OperationCounter

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--repeats", type=int, default=FULL.cold_repeats)
    args = parser.parse_args()
    azurite = start_azurite()
    os.environ.update(
        CHECKPOINT_STORAGE=azurite.connection_string,
        AzureWebJobsStorage=azurite.connection_string,
        RUNS_QUEUE="bench-runs",
        CHECKPOINT_CONTAINER="bench",
        WORKFLOW="default",
    )
    try:
        bench = Bench(dataclasses.replace(FULL, cold_repeats=args.repeats), OperationCounter())
        base = asyncio.run(_base_checkpoint(bench))
        cold_start(bench, Report(), base, [sys.executable])
    finally:
        azurite.stop()


if __name__ == "__main__":
    main()
