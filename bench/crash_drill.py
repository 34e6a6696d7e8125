"""The crash drill (issue 41): a 20-superstep background turn with ``superstep`` durability,
its process killed by SIGKILL mid-run, then delivered again to another process.

Each round accepts a thread turn (``loop 20``) through the app, then runs the delivery in a
worker process (``python -m bench.crash_drill worker <run_id>``: what a Functions instance
does with the run's queue message). The worker is killed, either by itself inside a chosen
step (``LOOP_KILL_AT``) or from outside after a random delay (which can land anywhere: inside
a step, during a progress write, during the final commit). Then the dead worker's lease is
made to lapse (what 60 s would do) and a second worker process takes the run over. Judged
from storage: the turn committed once (one checkpoint in the thread), its result equals an
uninterrupted run's, and the steps that ran twice (counted in a file both workers append to)
are at most one; a joiner of its event stream sees each step's output once, in order.

``python -m bench.crash_drill [--rounds N]`` runs the long drill against a fresh Azurite;
``tests/e2e/test_crash_drill.py`` runs a short one.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STEPS = 20
WORKFLOW_ENTRY = "bench.loop_workflow:SPEC"


def _register() -> None:
    import workflows

    workflows.REGISTRY["loop"] = WORKFLOW_ENTRY


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _arm_kill(point: str) -> None:
    """Kill this process at a point of the protocol, not of the workflow (``DRILL_KILL``):
    ``progress:N`` once the Nth progress write landed, before its answer is used;
    ``checkpoint`` once the turn's checkpoint is saved, before the thread's pointer moves;
    ``outcome`` once the pointer moved, before the run's outcome is written; ``removal`` once
    the outcome is written, before the run's progress is removed."""
    from resumable.background.lease import RunLease
    from resumable.background.progress import RunProgress
    from resumable.checkpoints.blob_store import BlobCheckpointStorage

    name, _, count = point.partition(":")
    if name == "progress":
        write, landed = RunProgress._write, [0]

        async def write_then_die(self: Any, *args: Any) -> None:
            await write(self, *args)
            landed[0] += 1
            if landed[0] == int(count):
                _kill()

        RunProgress._write = write_then_die  # type: ignore[method-assign]
    elif name == "checkpoint":
        save = BlobCheckpointStorage.save

        async def save_then_die(self: Any, *args: Any, **kwargs: Any) -> str:
            await save(self, *args, **kwargs)
            _kill()
            raise AssertionError("unreachable")

        BlobCheckpointStorage.save = save_then_die  # type: ignore[method-assign]
    elif name == "outcome":

        async def die(self: Any, body: bytes) -> None:
            _kill()

        RunLease.succeeded = die  # type: ignore[method-assign]
    elif name == "removal":

        async def die_instead(self: Any, record: Any) -> None:
            _kill()

        RunProgress.remove = die_instead  # type: ignore[method-assign]


def worker(run_id: str) -> None:
    """One delivery of ``run_id``'s message, in this process."""
    if os.environ.get("DRILL_KILL"):
        _arm_kill(os.environ["DRILL_KILL"])
    _register()
    from functions_adapter.queue_triggers import background_runs
    from functions_adapter.wiring import load_settings

    async def handle() -> None:
        await background_runs(load_settings()).handle(run_id)

    asyncio.run(handle())


@dataclass
class Round:
    """One round's outcome, judged from storage and the step counts."""

    kill_at: int | None  # the step the worker killed itself in (None: elsewhere)
    killed: bool  # the first worker died of SIGKILL (not finished before the kill)
    status: str
    commits: int  # checkpoints in the thread's lineage
    same_result: bool
    redone: int  # step executions beyond one per step
    one_stream: bool  # a joiner saw each output once, in order, across both workers
    steps_before_kill: int
    progress_left: int
    seconds: float

    def ok(self) -> bool:
        return (
            self.status == "succeeded"
            and self.commits == 1
            and self.same_result
            and self.redone <= 1
            and self.one_stream
        )


def _spawn(run_id: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.crash_drill", "worker", run_id],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def crash_round(
    host: Any,
    env: dict[str, str],
    workdir: Path,
    *,
    kill_at: int | None = None,
    kill_after: float | None = None,  # seconds after its first step began
    kill_in: str | None = None,  # a point of the protocol (``_arm_kill``)
    then_kill_at: int | None = None,  # the worker that takes over is killed too, inside this step
    expected: dict[str, Any] | None = None,
) -> Round:
    """Accept one turn, kill its first worker (at step ``kill_at``, or ``kill_after`` seconds
    in), hand it to a second worker, and judge it."""
    from functions_adapter import wiring
    from resumable.background.records import RunRecords

    thread = f"drill-{uuid.uuid4().hex[:8]}"
    calls = workdir / f"{thread}.calls"
    started = time.monotonic()
    response = await host.request(
        "POST",
        f"/api/threads/{thread}/runs",
        json_body={"messages": f"loop {STEPS}", "durability": "superstep"},
        headers={"Prefer": "respond-async"},
    )
    run_id = (await response.json())["run_id"]
    first_env = {**env, "LOOP_CALLS_FILE": str(calls)}
    if kill_at is not None:
        first_env["LOOP_KILL_AT"] = str(kill_at)
    if kill_in is not None:
        first_env["DRILL_KILL"] = kill_in
    first = _spawn(run_id, first_env)
    if kill_after is not None:  # counted from its first step: a process takes seconds to start
        await _first_step(calls, first)
        await asyncio.sleep(kill_after)
        first.send_signal(signal.SIGKILL)
    await asyncio.to_thread(first.wait, 60)
    killed = first.returncode == -signal.SIGKILL
    before = _steps(calls)
    records = RunRecords(wiring.container_for(wiring.load_settings()))
    await _lapse(records, run_id)
    if then_kill_at is not None:  # the worker that takes over dies too, inside that step
        # Its step lasts long enough for its log to get what it carried (one flush period).
        middle_env = {"LOOP_CALLS_FILE": str(calls), "LOOP_KILL_AT": str(then_kill_at), "LOOP_STEP_SECONDS": "0.6"}
        middle = _spawn(run_id, {**env, **middle_env})
        await asyncio.to_thread(middle.wait, 60)
        killed = killed and middle.returncode == -signal.SIGKILL
        await _lapse(records, run_id)
    second = _spawn(run_id, {**env, "LOOP_CALLS_FILE": str(calls)})
    await asyncio.to_thread(second.wait, 120)
    if second.returncode != 0:
        raise RuntimeError((second.stderr.read() if second.stderr else b"").decode()[-2000:])
    status = await (await host.request("GET", f"/api/runs/{run_id}")).json()
    history = await (await host.request("GET", f"/api/threads/{thread}/history")).json()
    container = wiring.container_for(wiring.load_settings())
    left = [b.name async for b in container.list_blobs(name_starts_with=f"runs/{run_id}/progress-")]
    counts = Counter(_steps(calls))
    result = status.get("result") or {}
    same = _comparable(result) == _comparable(expected or expected_result())
    return Round(
        kill_at=kill_at,
        killed=killed,
        status=status["status"],
        commits=len(history.get("checkpoints", [])),
        same_result=same and counts.keys() == set(range(1, STEPS + 1)),
        redone=sum(counts.values()) - len(counts),
        one_stream=stream_is_one(await read_stream(host, run_id)),
        steps_before_kill=len(before),
        progress_left=len(left),
        seconds=time.monotonic() - started,
    )


async def _lapse(records: Any, run_id: str) -> None:
    """What time does to a dead holder: its lease lapses (60 s), so another delivery may take it."""
    from resumable.background.records import Lease

    stored = await records.get(run_id)
    if stored is not None and not stored.value.terminal and stored.value.lease is not None:
        await records.update(run_id, lambda r: dataclasses.replace(r, lease=Lease(r.lease.token, 0)))


async def _first_step(calls: Path, process: subprocess.Popen[bytes]) -> None:
    """Wait until the worker began its first step (or died)."""
    for _ in range(6000):  # a minute at most
        if os.path.exists(calls) or process.poll() is not None:  # noqa: ASYNC240 - one stat, no wait
            return
        await asyncio.sleep(0.01)


async def read_stream(host: Any, run_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The run's whole event stream as a joiner gets it: (id, event, data) for each event."""
    response = await host.request("GET", f"/api/runs/{run_id}/stream")
    events: list[tuple[str, str, dict[str, Any]]] = []
    current: dict[str, str] = {}
    for line in (await response.body()).decode().splitlines():
        if line.startswith(("id: ", "event: ")):
            key, _, value = line.partition(": ")
            current[key] = value
        elif line.startswith("data: "):
            events.append((current.get("id", ""), current.get("event", ""), json.loads(line[6:])))
            current = {}
    return events


def stream_is_one(events: list[tuple[str, str, dict[str, Any]]]) -> bool:
    """Each step's output once and in order, no event ID twice, and the run's ``done`` last."""
    outputs = [data["output"] for _, name, data in events if name == "output"]
    ids = [event_id for event_id, _, _ in events]
    expected = expected_result()["outputs"]
    return outputs == expected and len(ids) == len(set(ids)) and bool(events) and events[-1][1] == "done"


def _steps(calls: Path) -> list[int]:
    return [int(line) for line in calls.read_text().split()] if calls.exists() else []


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    return {k: result.get(k) for k in ("status", "messages", "outputs", "pending_requests")}


def expected_result() -> dict[str, Any]:
    """What an uninterrupted ``loop 20`` answers (its outputs are deterministic)."""
    outputs = [f"step {n} of {STEPS} (done {n})" for n in range(1, STEPS + 1)]
    return {"status": "idle", "messages": [], "outputs": outputs, "pending_requests": []}


async def _long_drill(rounds: int, seed: int) -> list[Round]:
    from devtools.azurite import start_azurite
    from devtools.function_host import FunctionHost

    azurite = start_azurite()
    try:
        env = {
            **os.environ,
            "CHECKPOINT_STORAGE": azurite.connection_string,
            "CHECKPOINT_CONTAINER": f"drill{uuid.uuid4().hex[:12]}",
            "AzureWebJobsStorage": azurite.connection_string,
            "RUNS_QUEUE": f"drill-{uuid.uuid4().hex[:8]}",
            "WORKFLOW": "loop",
            "LOOP_STEP_SECONDS": "0.05",
        }
        os.environ.update(env)
        _register()
        import function_app

        host = FunctionHost(function_app.app)
        chosen = random.Random(seed)
        results = []
        with tempfile.TemporaryDirectory() as tmp:
            for index in range(rounds):
                if index % 2 == 0:  # a chosen step, inside it
                    outcome = await crash_round(host, env, Path(tmp), kill_at=chosen.randint(1, STEPS))
                else:  # from outside, at any moment of the run after its first step
                    delay = chosen.uniform(0.0, STEPS * 0.06)
                    outcome = await crash_round(host, env, Path(tmp), kill_after=delay)
                results.append(outcome)
                print(json.dumps(dataclasses.asdict(outcome)), flush=True)
        return results
    finally:
        azurite.stop()


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "worker":
        worker(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=41)
    args = parser.parse_args()
    results = asyncio.run(_long_drill(args.rounds, args.seed))
    killed = [r for r in results if r.killed]
    print(
        f"{len(results)} rounds, {len(killed)} killed mid-run: "
        f"{sum(r.ok() for r in results)} committed once with the uninterrupted result; "
        f"steps redone per round: max {max(r.redone for r in results)}, "
        f"distribution {dict(Counter(r.redone for r in results))}; "
        f"progress blobs left: {sum(r.progress_left for r in results)}"
    )


if __name__ == "__main__":
    main()
