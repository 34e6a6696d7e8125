"""SendMessage and SendStreamingMessage: a message becomes one turn of its context's thread.

A blocking or streamed message is the synchronous turn itself (``turn_call.send_turn``),
keyed by its messageId as ``POST /api/threads/{id}/runs`` with an Idempotency-Key is, so it
costs what that route's keyed turn costs. Its task ID is chosen here (``task_ids``) and its
checkpoint is saved as the task's first turn; nothing else is written for the task. A
message with ``taskId`` answers that task's pending requests as its next turn. A
``returnImmediately`` message is a background run (its task ID is the run ID).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from functions_adapter.a2a import jsonrpc, task_ids, task_turns, tasks, turn_call
from functions_adapter.a2a.jsonrpc import RpcError
from functions_adapter.a2a.push_format import Push
from functions_adapter.a2a.sent import Sent, new_context_id
from functions_adapter.turn_call import Ran, Replayed
from functions_adapter.wiring import load_settings
from resumable.base import strict_json
from resumable.core.event_pump import IdleTick
from resumable.core.idempotency import StoredResponse

# One streamed item: an A2A stream response object, or None for a keep-alive.
Event = dict[str, Any] | None


def _context_of(sent: Sent, headers: Mapping[str, str], task_thread: str | None = None) -> str:
    """The thread the message goes to: its task's, its context, or a new one."""
    if task_thread is not None:
        if sent.context_id is not None and sent.context_id != task_thread:
            raise RpcError(jsonrpc.INVALID_PARAMS, "'taskId' belongs to another context.")
        return task_thread
    return sent.context_id or new_context_id(headers)


def _turn(sent: Sent, workflow: str, thread_id: str) -> turn_call.TurnInput:
    """The message's turn as the seam takes it."""
    return turn_call.TurnInput(thread_id, workflow, sent.text, sent.responses, sent.message_id, sent.new_context)


# -- returnImmediately: a background run ------------------------------------------------


async def start_background(
    sent: Sent, headers: Mapping[str, str], workflow: str, *, push: Push | None = None
) -> dict[str, Any]:
    """Queue the message's turn as a background run (``taskId``: continue that task's thread;
    the answer is then a task of its own); ``push``: its push config, the run's callback."""
    task_thread = None
    if sent.task_id is not None:
        task_thread = await _task_thread(sent.task_id, headers)
    thread_id = _context_of(sent, headers, task_thread)
    return await turn_call.start_turn(headers, _turn(sent, workflow, thread_id), push=push)


async def _task_thread(task_id: str, headers: Mapping[str, str]) -> str:
    """The thread of a task the caller may use (another origin's: ``Forbidden``)."""
    if task_ids.is_run_id(task_id):
        return str((await turn_call.run_status(headers, task_id))["thread_id"])
    if task_ids.is_sync_task_id(task_id):
        first = task_ids.turn_checkpoint_id(task_id, 1)
        return (await task_turns.latest_turn(load_settings(), headers, task_id, first)).thread_id
    raise task_turns.not_found(task_id)


# -- blocking and streamed: the synchronous turn ---------------------------------------


@dataclass(frozen=True, slots=True)
class Planned:
    """Where a synchronous turn goes: its thread, its task, the checkpoint it saves as, and
    the task it answers (a message with ``taskId``); or the stored answer of the earlier
    identical message (``replay``), when the answer it repeats has moved its task on."""

    thread_id: str
    task_id: str
    checkpoint_id: str
    answers: str | None = None
    replay: StoredResponse | None = None


async def _plan(sent: Sent, headers: Mapping[str, str], workflow: str) -> Planned:
    """A new task (its ID chosen here: nothing read), or the next turn of the task the message
    answers, whose latest turn must be the thread's head and wait on requests."""
    if sent.task_id is None:
        task_id = task_ids.new_sync_task_id()
        return Planned(_context_of(sent, headers), task_id, task_ids.turn_checkpoint_id(task_id, 1))
    latest = await _latest_of(sent.task_id, headers)
    thread_id = _context_of(sent, headers, latest.thread_id)
    refusal = None
    if not latest.is_head:
        refusal = "was continued since on its context and takes no more answers"
    elif not await task_turns.pending_request_ids(load_settings(), latest):
        refusal = "is completed: send a message without 'taskId' on its context to start a new task"
    if refusal is not None:  # unless it repeats an answer that ran: then that answer again
        earlier = await turn_call.replayed(headers, _turn(sent, workflow, thread_id), answers=sent.task_id)
        if earlier is None:
            raise RpcError(jsonrpc.UNSUPPORTED_OPERATION, f"Task '{sent.task_id}' {refusal}.")
        return Planned(thread_id, sent.task_id, latest.checkpoint_id, replay=earlier)
    checkpoint_id = task_ids.turn_checkpoint_id(sent.task_id, latest.turn + 1)
    return Planned(thread_id, sent.task_id, checkpoint_id, answers=sent.task_id)


async def _latest_of(task_id: str, headers: Mapping[str, str]) -> task_turns.TaskTurn:
    """The latest turn of a task a message answers: a sync task's, or a background task's
    (its run must have ended; its answers are ``{run}.2``, ``{run}.3``...)."""
    settings = load_settings()
    if task_ids.is_sync_task_id(task_id):
        return await task_turns.latest_turn(settings, headers, task_id, task_ids.turn_checkpoint_id(task_id, 1))
    if not task_ids.is_run_id(task_id):
        raise task_turns.not_found(task_id)
    run = await turn_call.run_status(headers, task_id)
    if run["status"] != "succeeded":
        state = tasks.state_of(run)
        raise RpcError(jsonrpc.UNSUPPORTED_OPERATION, f"Task '{task_id}' is {state}: it takes no answer.")
    return await task_turns.latest_turn(settings, headers, task_id, run["result"]["checkpoint_id"])


def answered_task(body: bytes, status: int, thread_id: str) -> dict[str, Any]:
    """The task a turn's answer (or its stored replay) stands for; a stored refusal as the
    JSON-RPC error the same refusal is."""
    answer = strict_json.loads(body)
    if status >= 400:
        error = answer.get("error") if isinstance(answer, dict) else None
        text = error.get("message") if isinstance(error, dict) else "The message was refused."
        code = jsonrpc.INVALID_PARAMS if status < 500 else jsonrpc.INTERNAL_ERROR
        raise RpcError(code, str(text), {**answer, "status": status})
    found = task_ids.task_turn_of(str(answer.get("checkpoint_id")))
    if found is None:  # not a task's turn: the key answered another kind of request
        raise RpcError(jsonrpc.INVALID_PARAMS, "This messageId was used for another request.")
    task_id, turn = found
    return tasks.turn_task(task_id, thread_id, turn, tasks.answered_json(answer))


async def replayed_task(
    sent: Sent, stored: StoredResponse, thread_id: str, headers: Mapping[str, str]
) -> dict[str, Any]:
    """The task an earlier identical message's stored answer stands for. A message that
    started its context drew a thread of its own on each try and found the first try's
    answer by its key: its context is the thread that answer's turn is on (read with the
    owner check and the gate a task read has), never the thread this try drew."""
    if sent.new_context and stored.status < 400:
        answer = strict_json.loads(stored.body)
        found = task_ids.task_turn_of(str(answer.get("checkpoint_id"))) if isinstance(answer, dict) else None
        if found is not None:
            first = await task_turns.latest_turn(load_settings(), headers, found[0], str(answer["checkpoint_id"]))
            thread_id = first.thread_id
    return answered_task(stored.body, stored.status, thread_id)


async def send(sent: Sent, headers: Mapping[str, str], workflow: str) -> dict[str, Any]:
    """A blocking SendMessage: the turn runs now; its task as it ended."""
    planned = await _plan(sent, headers, workflow)
    if planned.replay is not None:
        return answered_task(planned.replay.body, planned.replay.status, planned.thread_id)
    outcome = await _run(sent, planned, workflow, headers, stream=False)
    if isinstance(outcome, Ran):
        return answered_task(outcome.result or b"{}", 200, planned.thread_id)
    return await replayed_task(sent, outcome.stored, planned.thread_id, headers)


async def _run(
    sent: Sent, planned: Planned, workflow: str, headers: Mapping[str, str], *, stream: bool
) -> Ran | Replayed:
    return await turn_call.send_turn(
        headers,
        _turn(sent, workflow, planned.thread_id),
        checkpoint_id=planned.checkpoint_id,
        answers=planned.answers,
        stream=stream,
    )


async def open_stream(sent: Sent, headers: Mapping[str, str], workflow: str) -> AsyncIterator[Event]:
    """A SendStreamingMessage: refusals raise here, before the stream starts; then the task
    working, the reply artifact and the final status as the turn ends (a replay: the task)."""
    planned = await _plan(sent, headers, workflow)
    stored = planned.replay
    if stored is None:
        outcome = await _run(sent, planned, workflow, headers, stream=True)
        if isinstance(outcome, Ran):
            if outcome.events is None:  # asked to stream: a run always does
                raise TypeError("A streamed A2A turn did not stream.")
            return _streamed(planned, outcome.events)
        stored = outcome.stored
    return one({"task": await replayed_task(sent, stored, planned.thread_id, headers)})


async def one(event: Event) -> AsyncIterator[Event]:
    """A stream of one event: a task that has ended, as it is."""
    yield event


async def _streamed(planned: Planned, events: AsyncIterator[Any]) -> AsyncIterator[Event]:
    """The task working, then, as the turn ends, its reply artifact and final status (the
    turn's ``done`` body is its answer's JSON); a failure after the stream opened: failed."""
    ids = {"taskId": planned.task_id, "contextId": planned.thread_id}
    working = {"id": planned.task_id, "contextId": planned.thread_id, "status": {"state": tasks.WORKING}}
    yield {"task": working}
    turn = (task_ids.task_turn_of(planned.checkpoint_id) or (planned.task_id, 1))[1]
    async for item in events:
        if isinstance(item, IdleTick):
            yield None
            continue
        name, data = item
        if name == "done":
            task = tasks.turn_task(planned.task_id, planned.thread_id, turn, tasks.answered_json(data))
            for artifact in task.get("artifacts", []):
                yield {"artifactUpdate": {**ids, "artifact": artifact, "lastChunk": True}}
            yield {"statusUpdate": {**ids, "status": task["status"]}}
        elif name == "error":
            error = data.get("error") or {}
            status = tasks.failed_status(planned.task_id, planned.thread_id, error, planned.checkpoint_id)
            yield {"statusUpdate": {**ids, "status": status}}
