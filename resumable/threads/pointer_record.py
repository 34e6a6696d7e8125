"""What a thread's pointer record holds (``threads/<thread_id>.json``), typed and versioned.

Version 2 adds ``origin`` and the envelope's ``writes`` (``RecordStore``). A pointer
without ``version`` (written before the pointer moved onto ``RecordStore``) reads as
version 1: the same fields, no origin. Every field is checked as strictly as a
checkpoint: a pointer of the wrong shape is unreadable, never an empty thread.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..base.errors import InvalidRequest
from ..base.ids import validate_id
from .delete_progress import BadProgress, DeleteProgress

LINEAGE_KEPT = 10
MAX_ORIGIN_CHARS = 512


def _is_id(value: object) -> bool:
    try:
        validate_id(value)
    except InvalidRequest:
        return False
    return True


def valid_origin(value: object) -> bool:
    """An origin as an adapter writes it: 1-512 printable characters."""
    return isinstance(value, str) and 0 < len(value) <= MAX_ORIGIN_CHARS and value.isprintable()


@dataclass(frozen=True, slots=True)
class Pointer:
    """A thread's head, its recent lineage, who made it, and a delete in progress."""

    VERSION: ClassVar[int] = 2
    thread_id: str
    checkpoint_id: str | None = None
    turns: int = 0
    recent: tuple[str, ...] = ()
    updated_at: float | None = None
    # A delete is in progress (``delete.delete_thread``): turns are refused until it ends,
    # and ``deletion`` says where a repeat call goes on.
    deleting: bool = False
    deletion: DeleteProgress | None = None
    # Who made the thread (the adapter's string: ``api``, ``principal:<id>``, ...): set when
    # the pointer gets its first turn, kept by every later write. None on a pointer from
    # before origins (legacy), which accepts every origin.
    origin: str | None = None

    def advanced(self, checkpoint_id: str, origin: str | None) -> Pointer:
        """The pointer moved to ``checkpoint_id``. ``origin`` is recorded only by a first turn
        on a pointer with none: a legacy pointer (it has turns) never gains one."""
        owner = self.origin if self.origin is not None or self.turns else origin
        recent = (checkpoint_id, *self.recent)[:LINEAGE_KEPT]
        return Pointer(self.thread_id, checkpoint_id, self.turns + 1, recent, time.time(), origin=owner)

    def marked_deleting(self, progress: DeleteProgress) -> Pointer:
        """The deletion mark: no head, turns refused; the origin stays."""
        return Pointer(self.thread_id, None, 0, (), time.time(), True, progress, self.origin)

    def with_progress(self, progress: DeleteProgress) -> Pointer:
        return dataclasses.replace(self, deletion=progress, updated_at=time.time())

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "thread_id": self.thread_id,
            "checkpoint_id": self.checkpoint_id,
            "turns": self.turns,
            "recent_checkpoint_ids": list(self.recent),
            "updated_at": self.updated_at if self.updated_at is not None else time.time(),
        }
        if self.origin is not None:
            data["origin"] = self.origin
        if self.deleting:
            data["deleting"] = True
            data["deletion"] = (self.deletion or DeleteProgress(found=True)).to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Pointer:
        """Strictly; ``ValueError`` naming the field (our words, never the blob's content)."""
        thread_id, checkpoint_id = data.get("thread_id"), data.get("checkpoint_id")
        turns, recent, updated_at = data.get("turns"), data.get("recent_checkpoint_ids"), data.get("updated_at")
        if not isinstance(thread_id, str):
            raise ValueError("thread_id is missing")
        if checkpoint_id is not None and not _is_id(checkpoint_id):
            raise ValueError("checkpoint_id is not a checkpoint ID")
        if type(turns) is not int or turns < 0 or (turns == 0) != (checkpoint_id is None):
            raise ValueError("turns is not a count that matches checkpoint_id")
        if not isinstance(recent, list) or not all(_is_id(item) for item in recent):
            raise ValueError("recent_checkpoint_ids is not a list of checkpoint IDs")
        if updated_at is not None and type(updated_at) not in (int, float):
            raise ValueError("updated_at is not a number")
        origin = data.get("origin")
        if origin is not None and not valid_origin(origin):
            raise ValueError("origin is not an origin string")
        deleting = data.get("deleting", False)
        if type(deleting) is not bool:
            raise ValueError("deleting is not true or false")
        deletion = None
        if "deletion" in data:
            if not deleting:
                raise ValueError("deletion progress on a pointer that is not deleting")
            try:
                deletion = DeleteProgress.parse(data["deletion"])
            except BadProgress as exc:
                raise ValueError(str(exc)) from None
        elif deleting:  # a mark from before progress was kept: the delete starts over
            deletion = DeleteProgress(found=True)
        return cls(thread_id, checkpoint_id, turns, tuple(recent), updated_at, deleting, deletion, origin)
