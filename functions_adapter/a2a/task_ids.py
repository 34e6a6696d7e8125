"""Which kind of task an ID names, told from the ID alone (no storage read), and the
checkpoint IDs of a task's turns.

A background task's ID is its run's ID (32 lowercase hex digits). A synchronous task's ID is
chosen at the edge when its first turn starts, ``t-`` and 32 hex digits, so it never looks
like a run's; it is stored nowhere: a task's k-th turn saves its checkpoint as ``{task}.{k}``,
so the checkpoints themselves are the task (a sync task's first turn is ``{task}.1``; a
background task's first turn is its run's checkpoint, its answers ``{run}.2``, ``{run}.3``...).
"""

from __future__ import annotations

import re
import uuid

_RUN = re.compile(r"[0-9a-f]{32}")
_SYNC = re.compile(r"t-[0-9a-f]{32}")
_TURN = re.compile(r"[1-9][0-9]{0,5}")


def new_sync_task_id() -> str:
    return f"t-{uuid.uuid4().hex}"


def is_run_id(task_id: str) -> bool:
    return _RUN.fullmatch(task_id) is not None


def is_sync_task_id(task_id: str) -> bool:
    return _SYNC.fullmatch(task_id) is not None


def turn_checkpoint_id(task_id: str, turn: int) -> str:
    """The checkpoint the task's ``turn``-th turn saves under."""
    return f"{task_id}.{turn}"


def task_turn_of(checkpoint_id: str) -> tuple[str, int] | None:
    """``(task, turn)`` for a checkpoint a task's turn saved, else None."""
    task_id, _, turn = checkpoint_id.rpartition(".")
    if _TURN.fullmatch(turn) is None or not (is_sync_task_id(task_id) or is_run_id(task_id)):
        return None
    return task_id, int(turn)
