"""A finished run is freed by reference counting: nothing of its checkpoint state waits
for the cycle collector (issue 30: under steady load, megabytes a burst piled up between
collections).

Every test runs with the cycle collector off. A resume of a ~1 MB checkpoint (the default
workflow, whose memory executor holds the conversation) must leave its workflow, its
executors and its checkpoints unreachable once the call has returned and the work it handed
off has ended (``settled``: its tasks, the codec thread's last job; nothing there collects a
cycle), so weak references are dead and no checkpoint object is left; and N such calls must
not grow the traced heap by anything near a checkpoint. A failure names what holds the
first survivor, level by level (``Watched.holders``).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sys
import tracemalloc
import types
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from agent_framework import Message, Workflow, WorkflowCheckpoint
from azure.core.exceptions import ServiceResponseError
from azure.core.pipeline.transport import AioHttpTransport
from azure.storage.blob.aio import LinearRetry

from functions_adapter import wiring
from functions_adapter.settings import Settings
from resumable.base.errors import InvalidRequest, WorkflowFailed
from resumable.checkpoints.blob_store import BlobCheckpointStorage
from resumable.checkpoints.cache import CheckpointCache, HeadCache
from resumable.checkpoints.transfers import OFF_LOOP_BYTES, cpu
from resumable.core.resume import TurnInput
from resumable.core.run_owner import RunOwner
from resumable.core.runs import RunRequest, RunService
from resumable.core.thread_turns import ThreadRunner
from resumable.storage import clients as storage_client
from resumable.threads.pointers import ThreadLocks, ThreadPointers

MB = 1024 * 1024
RUNS = 5


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    """Only reference counting frees memory while the test runs."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


@pytest.fixture
def unlogged_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    """The failure logs keep their exception (and its frames) in pytest's log capture,
    which a real log handler would format and drop: silence them for the memory check."""
    for name in ("resumable.core.resume", "resumable.core.runs", "resumable.core.event_pump"):
        monkeypatch.setattr(logging.getLogger(name), "disabled", True)


class Watched:
    """Weak references to every workflow, executor and checkpoint a service touched."""

    def __init__(self) -> None:
        self.refs: list[tuple[str, weakref.ref[Any]]] = []

    def add(self, label: str, obj: Any) -> None:
        self.refs.append((label, weakref.ref(obj)))

    def alive(self) -> list[str]:
        return [label for label, ref in self.refs if ref() is not None]

    def holders(self, levels: int = 6) -> list[str]:
        """What holds the first object still alive, level by level (its referrers, theirs, ...):
        the failure message's lead to the leak."""
        first = next((obj for obj in (ref() for _, ref in self.refs) if obj is not None), None)
        if first is None:
            return []
        ours = {id(self.refs)}
        seen, layer, held = {id(first)}, [first], []
        for _ in range(levels):
            ours.add(id(layer))
            up = [r for obj in layer for r in gc.get_referrers(obj) if id(r) not in seen and id(r) not in ours]
            up = [r for r in up if not (isinstance(r, types.FrameType) and r.f_code.co_filename == __file__)]
            seen.update(id(r) for r in up)
            held.append(", ".join(sorted({_kind(r) for r in up})) or "nothing")
            layer = up
        return held


def _kind(referrer: Any) -> str:
    if isinstance(referrer, types.FrameType):
        return f"frame {referrer.f_code.co_qualname} ({referrer.f_code.co_filename.rsplit('/', 1)[-1]})"
    return type(referrer).__qualname__


async def settled() -> None:
    """Let the work a finished call handed off end before judging what it left alive.

    A call returns as soon as its answer is ready; on a loaded machine the codec thread may
    not yet have dropped its last job, and a task or callback the call scheduled may not
    yet have run. None of that collects a cycle (the collector stays off), so whatever is
    still alive afterwards is held, not merely not yet let go.
    """
    while pending := [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]:
        await asyncio.wait(pending)
    await cpu(OFF_LOOP_BYTES, int)  # the codec thread is one thread: its earlier jobs are over
    await asyncio.sleep(0)  # callbacks the codec thread handed the loop have run


async def assert_freed(watched: Watched) -> None:
    await settled()
    assert watched.alive() == [], "held by: " + " <- ".join(watched.holders())


class WatchedSpec:
    def __init__(self, spec: Any, watched: Watched) -> None:
        self._spec, self._watched = spec, watched

    def build(self) -> Workflow:
        workflow = self._spec.build()
        self._watched.add("workflow", workflow)
        for executor in workflow.executors.values():
            self._watched.add(f"executor {executor.id}", executor)
        return workflow


async def live_checkpoints() -> int:
    """Checkpoint objects alive now (they take no weak references: slots).

    The codec thread drops its last job's arguments and result just after handing the
    result back: a no-op through it first, so the count does not race that ``del``.
    """
    await cpu(OFF_LOOP_BYTES, int)
    return sum(isinstance(obj, WorkflowCheckpoint) for obj in gc.get_objects())


def service(watched: Watched, cache_bytes: int) -> RunService:
    """The app's service, with a cache of its own (``cache_bytes``; 0: off) and watched."""
    base = wiring.build_service(Settings.from_env())
    store = BlobCheckpointStorage(base.store.container, base.store.codec, base.store.mac, CheckpointCache(cache_bytes))
    return RunService(store, WatchedSpec(base.spec, watched), ThreadPointers(base.store.container, HeadCache()))


def turn(text: str) -> TurnInput:
    return TurnInput(messages=[Message(role="user", contents=[text])])


BIG = "m" * MB  # the conversation's first message: a ~1 MB checkpoint


async def call(svc: RunService, mode: str, base: str) -> None:
    """One call as the app makes it: through ``RunOwner``, collected or streamed."""
    if mode == "thread":
        runner: Any = ThreadRunner(svc, "memory", ThreadLocks())
        request = RunRequest(None, turn("again"), False, origin="api")
    else:
        runner, request = svc, RunRequest(base, turn("again"), mode == "stream")
    owner = RunOwner(runner, request)
    if request.stream:
        async for _ in await owner.stream(keepalive_seconds=30):
            pass
    else:
        await owner.result()


async def start(svc: RunService, mode: str) -> str:
    if mode == "thread":
        request = RunRequest(None, turn(BIG), False, origin="api")
        return json.loads(await ThreadRunner(svc, "memory", ThreadLocks()).run_to_json(request))["checkpoint_id"]
    return json.loads(await svc.run_to_json(RunRequest(None, turn(BIG), False)))["checkpoint_id"]


@pytest.mark.parametrize("mode", ["json", "stream", "thread"])
async def test_a_finished_resume_leaves_no_workflow_executor_or_checkpoint_alive(
    storage_env: str, no_cycle_collector: None, mode: str
) -> None:
    """With the default cache (the checkpoint comes from memory, the new one goes there as bytes)."""
    watched = Watched()
    svc = service(watched, 128 * MB)
    base = await start(svc, mode)
    watched.refs.clear()
    checkpoints = await live_checkpoints()
    for _ in range(3):
        await call(svc, mode, base)
    assert {"workflow", "executor memory", "executor responder"} <= {label for label, _ in watched.refs}
    await assert_freed(watched)
    assert await live_checkpoints() == checkpoints


@pytest.mark.parametrize("mode", ["json", "stream", "thread"])
async def test_resumes_of_a_1_mb_checkpoint_do_not_grow_the_heap(
    storage_env: str, no_cycle_collector: None, mode: str
) -> None:
    """Cache off, so every resume downloads and decodes its own copy of the 1 MB state."""
    svc = service(Watched(), 0)
    base = await start(svc, mode)
    await call(svc, mode, base)  # first-call allocations (clients, pools) are not growth
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(RUNS):
            await call(svc, mode, base)
        await cpu(OFF_LOOP_BYTES, int)  # the codec thread lets go of its last job (``live_checkpoints``)
        growth = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # A run left for the collector keeps its state (over 1 MB): RUNS of them would be > 5 MB.
    assert growth < MB // 2, f"{growth / MB:.2f} MiB stayed after {RUNS} finished runs"


async def test_a_refused_call_leaves_nothing_behind(storage_env: str, no_cycle_collector: None) -> None:
    """A call refused after hydration (an answer to no pending request): its error's
    traceback must not keep the hydrated workflow and checkpoint alive."""
    watched = Watched()
    svc = service(watched, 0)
    base = await start(svc, "json")
    watched.refs.clear()
    checkpoints = await live_checkpoints()
    for _ in range(3):
        with pytest.raises(InvalidRequest):
            await RunOwner(svc, RunRequest(base, TurnInput(responses={"nope": "yes"}), False)).result()
    assert "workflow" in {label for label, _ in watched.refs}
    await assert_freed(watched)
    assert await live_checkpoints() == checkpoints


class _AnswerLostOnce(AioHttpTransport):
    """The real transport, but the answer to the next ``method`` request is lost (a read
    timeout): the request landed, and the SDK's retry policy sends it again."""

    def __init__(self, lose: list[str]) -> None:
        super().__init__()
        self._lose = lose

    async def send(self, request: Any, **kwargs: Any) -> Any:
        response = await super().send(request, **kwargs)
        if request.method in self._lose:
            self._lose.remove(request.method)
            raise ServiceResponseError("the answer was lost")
        return response


@pytest.mark.parametrize("method", ["GET", "PUT"])
async def test_a_turn_whose_storage_request_was_retried_leaves_nothing_behind(
    storage_env: str, no_cycle_collector: None, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """The SDK keeps each retried attempt's error, whose traceback holds the retry loop
    (and so the run's frames): a busy machine or network retries now and then, and each
    such turn's workflow must still go with the call."""
    lose: list[str] = []
    monkeypatch.setattr(storage_client, "transport_hook", lambda service: _AnswerLostOnce(lose))
    monkeypatch.setattr(LinearRetry, "get_backoff_time", lambda self, settings: 0.0)  # a wait, not a behaviour
    await storage_client.close_all()
    watched = Watched()
    svc = service(watched, 0)  # cache off: each turn reads its checkpoint (GET) and saves one (PUT)
    base = await start(svc, "thread")
    watched.refs.clear()
    for _ in range(3):
        lose.append(method)
        await call(svc, "thread", base)
        assert lose == [], "no request of that kind was sent"
    assert "workflow" in {label for label, _ in watched.refs}
    await assert_freed(watched)


# On Python 3.11 a workflow failing mid-run in a collected (JSON) call still leaves its
# workflow to the cycle collector: the fresh-clone CI's 3.11 pass showed it, and the frames
# that hold it there are not yet found (issue 30 stays open on it). 3.12+ frees it.
_FAILED_JSON_ON_311 = pytest.mark.xfail(
    sys.version_info < (3, 12),
    reason="a failed JSON run's workflow waits for the cycle collector on 3.11",
    strict=False,
)


@pytest.mark.parametrize("mode", [pytest.param("json", marks=_FAILED_JSON_ON_311), "stream", "disconnect"])
async def test_a_failed_or_abandoned_run_leaves_nothing_behind(
    recording: Any, no_cycle_collector: None, unlogged_failures: None, mode: str
) -> None:
    """A workflow that raises mid-run (collected or streamed), and a stream whose reader
    leaves after the first event (a client that disconnects): the errors and their frames
    must not hold the run's workflow and checkpoints."""
    watched = Watched()
    svc = service(watched, 128 * MB)
    base = json.loads(await svc.run_to_json(RunRequest(None, turn("start"), False)))["checkpoint_id"]
    watched.refs.clear()
    checkpoints = await live_checkpoints()
    for _ in range(3):
        if mode == "json":
            with pytest.raises(WorkflowFailed):
                await RunOwner(svc, RunRequest(base, turn("fail"), False)).result()
            continue
        events = await RunOwner(svc, RunRequest(base, turn("fail" if mode == "stream" else "go"), True)).stream(
            keepalive_seconds=30
        )
        if mode == "stream":
            assert [name async for name, _ in events][-1] == "error"
        else:
            await anext(events)
            await events.aclose()  # what a server's disconnect does to the body iterator
    assert "workflow" in {label for label, _ in watched.refs}
    await assert_freed(watched)
    assert await live_checkpoints() == checkpoints
