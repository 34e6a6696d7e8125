"""Section 5: cold start, in fresh processes, interleaved per round so load hits each equally."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import Bench, Report

ROOT = Path(__file__).resolve().parent.parent
FLOOR = "import azure.functions, azure.storage.blob.aio; from agent_framework import WorkflowBuilder, Executor"
# The HTTP streaming extension the app's triggers are typed with: the worker turns streaming
# on only if the app imported it, and it imports fastapi, starlette and uvicorn.
EXTENSION = "import azurefunctions.extensions.http.fastapi"
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


def cold_start(bench: Bench, report: Report, base: str, pythons: list[str]) -> None:
    """``base``: a checkpoint of the default workflow the first-resume row resumes."""
    measures = {  # name -> (row label, code timed in a fresh process)
        "python": ("`python -c pass` (interpreter only)", "pass"),
        "floor": ("floor: import azure.functions + azure.storage.blob.aio + workflow classes", FLOOR),
        "with_extension": (
            "floor + the HTTP streaming extension (fastapi, starlette, uvicorn)",
            f"{FLOOR}; {EXTENSION}",
        ),
        "app": ("`import function_app`", "import function_app"),
        "first": (
            "process start → first completed resume (in-process call on Azurite)",
            _FIRST_RESUME.format(base=base),
        ),
    }
    medians = _spawn_medians({name: code for name, (_, code) in measures.items()}, bench.plan.cold_repeats, pythons)
    versions = [_version_of(python) for python in pythons]
    columns = ["measure"]
    for version in versions:
        columns += [f"ms, Python {version}", f"vs floor, {version}", f"vs floor + extension, {version}"]
    if len(pythons) > 1:
        columns.append(f"{versions[0]} / {versions[1]}")
    rows = []
    for name, (label, _) in measures.items():
        row = [label]
        for python in pythons:
            value, floor, extended = (medians[python, key] for key in (name, "floor", "with_extension"))
            relative = name not in ("python", "first")
            ratios = [f"{value / floor:.2f}×", f"{value / extended:.2f}×"] if relative else ["", ""]
            row += [f"{value:.0f}", *ratios]
        if len(pythons) > 1:
            row.append(f"**{medians[pythons[0], name] / medians[pythons[1], name]:.2f}×**")
        rows.append(row)
    first = pythons[0]
    report.facts["cold_start"] = (
        medians[first, "app"] / medians[first, "floor"],
        medians[first, "app"] / medians[first, "with_extension"],
        medians[first, "with_extension"] / medians[first, "floor"],
    )
    report.table(
        "5. Cold start (fresh processes, medians)",
        columns,
        rows,
        "Background runs, callbacks and housekeeping are imported by their first trigger or route "
        "(`tests/library/test_cold_start.py` pins that), and `resumable`'s package exports load on first use. "
        "Where the time goes on the first interpreter, `python -X importtime -c 'import function_app'` "
        "(top cumulative):\n\n" + "\n".join(f"- `{name}`: {cum / 1000:.0f} ms" for name, cum in _import_profile()),
    )


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
