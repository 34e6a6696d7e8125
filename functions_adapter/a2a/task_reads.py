"""GetTask, CancelTask and SubscribeToTask: a task read back by its ID, whichever kind.

A synchronous task (``task_ids``) is read from its latest turn's checkpoint, its owner
checked from the data (``task_turns``); a background task from its run's document, and
from the turns that answered it since (``{run}.2``...) once the run ended waiting on
requests. An ID of neither shape names no task, answered without a storage read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from functions_adapter.a2a import jsonrpc, task_ids, task_turns, tasks, turn_call
from functions_adapter.a2a.jsonrpc import RpcError
from functions_adapter.a2a.messages import Event, one
from functions_adapter.wiring import load_settings

WAIT_SECONDS = 20  # one long poll of a background run


async def get_task(task_id: str, headers: Mapping[str, str]) -> dict[str, Any]:
    if task_ids.is_sync_task_id(task_id):
        return await _latest_task(task_id, headers, task_ids.turn_checkpoint_id(task_id, 1), None)
    if task_ids.is_run_id(task_id):
        return await run_task(await turn_call.run_status(headers, task_id), headers)
    raise task_turns.not_found(task_id)


async def _latest_task(
    task_id: str, headers: Mapping[str, str], first_checkpoint_id: str, run: dict[str, Any] | None
) -> dict[str, Any]:
    """The task as its latest turn left it (a background task whose run is still its latest
    turn: the run's document)."""
    settings = load_settings()
    latest = await task_turns.latest_turn(settings, headers, task_id, first_checkpoint_id)
    if run is not None and latest.turn == 1:
        return tasks.task_of(run)
    return tasks.turn_task(task_id, latest.thread_id, latest.turn, await task_turns.read_turn(settings, latest))


async def run_task(run: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    """A background task: its run, or the turns that answered it on the same task since."""
    if tasks.state_of(run) != tasks.INPUT_REQUIRED:
        return tasks.task_of(run)
    return await _latest_task(run["run_id"], headers, run["result"]["checkpoint_id"], run)


async def cancel_task(task_id: str, headers: Mapping[str, str]) -> dict[str, Any]:
    """A background run is stopped as ``POST /api/runs/{id}/cancel`` does; a synchronous
    task has ended by the time anyone knows its ID (the turn ran in the request that named it)."""
    if task_ids.is_run_id(task_id):
        return tasks.task_of(await turn_call.cancel_run(headers, task_id))
    await get_task(task_id, headers)  # the caller's task, and there: else its own refusal
    raise RpcError(jsonrpc.TASK_NOT_CANCELABLE, f"Task '{task_id}' has ended; it cannot be canceled.")


async def subscribe(task_id: str, headers: Mapping[str, str]) -> AsyncIterator[Event]:
    """The task now and, for a background run still working, its changes to the end."""
    if not task_ids.is_run_id(task_id):
        return one({"task": await get_task(task_id, headers)})
    run = await turn_call.run_status(headers, task_id)
    if tasks.state_of(run) in tasks.FINAL:
        return one({"task": await run_task(run, headers)})
    return _follow(headers, run)


async def _follow(headers: Mapping[str, str], run: dict[str, Any]) -> AsyncIterator[Event]:
    """The task now, then a status update at each change, the reply artifact, the final status."""
    yield {"task": tasks.task_of(run)}
    state = tasks.state_of(run)
    while state not in tasks.FINAL:
        run = await turn_call.run_status(headers, run["run_id"], wait_seconds=WAIT_SECONDS)
        if tasks.state_of(run) == state:
            yield None
            continue
        state = tasks.state_of(run)
        ids = {"taskId": run["run_id"], "contextId": run["thread_id"]}
        if state in tasks.FINAL:
            for artifact in tasks.artifacts_of(run):
                yield {"artifactUpdate": {**ids, "artifact": artifact, "lastChunk": True}}
        yield {"statusUpdate": {**ids, "status": tasks.status_of(run)}}
