"""A task's latest turn, found from the data: its checkpoints are named after it
(``task_ids``), so no index of tasks is kept and no write is spent on one.

The owner check is the library's (``ownership.checkpoint_info`` on the task's first turn:
another origin's task is 403 ``forbidden``, a deleted thread's is not found), then the
thread authorizer's gate, as on a checkpoint read. The pointer that check read names the
thread's head and its recent lineage (``ThreadHead.recent``), which the turns after the
first are looked up in; a task whose turns are all older than that window is walked turn
by turn (one metadata read each), each turn checked to follow the one before, and the
last checked to have committed (``CommitLedger``: a lost race's leftover did not).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from functions_adapter import thread_access
from functions_adapter.a2a.jsonrpc import TASK_NOT_FOUND, RpcError
from functions_adapter.a2a.task_ids import task_turn_of, turn_checkpoint_id
from functions_adapter.callers import caller_origin
from functions_adapter.settings import Settings
from functions_adapter.wiring import build_service
from resumable.base import CheckpointNotFound
from resumable.core.results import turn_json
from resumable.threads import Caller, ThreadHead, checkpoint_info

MAX_TASK_TURNS = 1000  # a walk past the recent lineage stops here
_READ_ROUTE = "threads/{thread_id}"


def not_found(task_id: str) -> RpcError:
    return RpcError(TASK_NOT_FOUND, f"No task '{task_id}'.")


@dataclass(frozen=True, slots=True)
class TaskTurn:
    """A task's latest committed turn: the ``turn``-th, saved as ``checkpoint_id``."""

    task_id: str
    thread_id: str
    turn: int
    checkpoint_id: str
    # The thread's pointer as the owner check read it (None: this process keeps no heads).
    head: ThreadHead | None
    # The turn's pending request IDs, if already read (the first turn's come with the check).
    pending_request_ids: tuple[str, ...] | None = None

    @property
    def is_head(self) -> bool:
        return self.head is not None and self.head.checkpoint_id == self.checkpoint_id


def _checkpoint_of(task_id: str, first_checkpoint_id: str, turn: int) -> str:
    return first_checkpoint_id if turn == 1 else turn_checkpoint_id(task_id, turn)


async def latest_turn(
    settings: Settings, headers: Mapping[str, str], task_id: str, first_checkpoint_id: str
) -> TaskTurn:
    """``task_id``'s latest turn; its first turn saved as ``first_checkpoint_id`` (a sync
    task's ``{task}.1``, a background task's run checkpoint). ``Forbidden`` for another
    origin's task; ``RpcError(TASK_NOT_FOUND)`` if the first turn is gone (never committed,
    or its thread deleted)."""
    service = build_service(settings)
    caller = Caller(caller_origin(headers))
    try:
        first = await checkpoint_info(service.pointers, service.store, first_checkpoint_id, caller)
    except CheckpointNotFound:
        raise not_found(task_id) from None
    if first.thread_id is None:  # a task's turns are always a thread's
        raise not_found(task_id)
    thread_id = first.thread_id
    await thread_access.gate(headers, settings, _READ_ROUTE, thread_id)
    head = service.pointers.cached(thread_id)  # the pointer checkpoint_info just read
    recent = () if head is None else head.recent
    later = [found[1] for found in map(task_turn_of, recent) if found is not None and found[0] == task_id]
    if later:
        turn = max(later)
        return TaskTurn(task_id, thread_id, turn, _checkpoint_of(task_id, first_checkpoint_id, turn), head)
    if first_checkpoint_id in recent:  # the window reaches back to the first turn: none followed
        return TaskTurn(task_id, thread_id, 1, first_checkpoint_id, head, first.pending_request_ids)
    found = await _walk(service, task_id, first_checkpoint_id, thread_id, first.pending_request_ids)
    return dataclasses.replace(found, head=head)


async def _walk(service: Any, task_id: str, first_id: str, thread_id: str, pending: tuple[str, ...]) -> TaskTurn:
    turns = [(first_id, pending)]  # each turn's checkpoint and what it left pending
    while len(turns) < MAX_TASK_TURNS:
        try:
            after = await service.store.get_info(turn_checkpoint_id(task_id, len(turns) + 1))
        except CheckpointNotFound:
            break
        if after.thread_id != thread_id or after.previous_checkpoint_id != turns[-1][0]:
            break  # not a turn of this task's lineage: the task ends before it
        turns.append((after.checkpoint_id, after.pending_request_ids))
    # A turn that lost its race to another leaves its checkpoint until the sweep removes it,
    # if its own cleanup failed: only the last turn can be one (nothing answers a turn that
    # was never the head), so that one is checked; a background task's first turn is its
    # run's, whose commit the run's record already tells.
    last = turns[-1][0]
    if (len(turns) > 1 or task_turn_of(last) is not None) and not await service.ledger.committed(last, thread_id):
        turns.pop()
        if not turns:  # the task's first turn never committed: there is no task
            raise not_found(task_id)
    checkpoint_id, pending = turns[-1]
    return TaskTurn(task_id, thread_id, len(turns), checkpoint_id, None, pending)


async def pending_request_ids(settings: Settings, turn: TaskTurn) -> tuple[str, ...]:
    """What the turn left pending (one metadata read, unless the lookup already had it)."""
    if turn.pending_request_ids is not None:
        return turn.pending_request_ids
    try:
        return (await build_service(settings).store.get_info(turn.checkpoint_id)).pending_request_ids
    except CheckpointNotFound:
        raise not_found(turn.task_id) from None


async def read_turn(settings: Settings, turn: TaskTurn) -> dict[str, Any]:
    """The turn as ``results.turn_json`` reads it back (its transcript and pending requests),
    with its checkpoint ID; from the head cache when it is the head."""
    store = build_service(settings).store
    try:
        checkpoint = await store.load(turn.checkpoint_id, head_of=turn.thread_id if turn.is_head else None)
    except CheckpointNotFound:  # retention or a delete removed it since
        raise not_found(turn.task_id) from None
    return {**turn_json(checkpoint), "checkpoint_id": turn.checkpoint_id}
