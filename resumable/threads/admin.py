"""Managing threads: their history and their metadata (deleting one: ``delete``).

* ``history``: the lineage from the head (or from a checkpoint: a replaced branch)
  backwards, a page at a time. A page of N costs N + 1 reads (the pointer, whose origin must
  be the caller's, and one read per entry: its metadata, or the whole checkpoint when the
  caller wants each turn), however long the thread is: the cursor names the next checkpoint
  to read.
* ``ThreadMetadata``: a small JSON object per thread (``metadata_record``), re-exported here.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..base.errors import CheckpointNotFound, InvalidRequest, ThreadNotFound
from ..base.ids import validate_id
from ..checkpoints.info import CheckpointInfo
from ..checkpoints.store import CheckpointStore
from .metadata_record import (
    MAX_METADATA_BYTES,
    MAX_METADATA_KEYS,
    METADATA_PREFIX,
    Metadata,
    MetadataRecord,
    ThreadMetadata,
    validate_metadata,
)
from .ownership import Caller, owned_head
from .pointers import ThreadPointers

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from agent_framework import WorkflowCheckpoint

logger = logging.getLogger(__name__)
MAX_PAGE = 100


# -- history --------------------------------------------------------------------------------


# A cursor is base64url JSON of two IDs (at most 128 characters each): a few hundred characters.
MAX_CURSOR_LENGTH = 1024


def _cursor(thread_id: str, checkpoint_id: str) -> str:
    raw = json.dumps({"t": thread_id, "c": checkpoint_id}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _uncursor(thread_id: str, cursor: str) -> str:
    """The checkpoint a cursor names. Its format is readable, so this proves nothing about
    ownership: ``history`` checks the checkpoint's own ``thread_id`` before walking."""
    refused = InvalidRequest("'before' is not a cursor this thread's history returned.")
    if len(cursor) > MAX_CURSOR_LENGTH:
        raise refused  # bounded before decoding: no deep nesting, no long work
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if data["t"] != thread_id:
            raise ValueError("another thread's cursor")
        return validate_id(data["c"])
    except (ValueError, KeyError, TypeError, RecursionError, binascii.Error, InvalidRequest):
        raise refused from None


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One checkpoint of a history page: its metadata, and the checkpoint itself when the
    caller asked for each turn (``with_checkpoints``)."""

    info: CheckpointInfo
    checkpoint: WorkflowCheckpoint | None = None


async def history(
    pointers: ThreadPointers,
    store: CheckpointStore,
    thread_id: str,
    *,
    caller: Caller,
    limit: int,
    before: str | None,
    start: str | None = None,
    with_checkpoints: bool = False,
) -> tuple[list[HistoryEntry], str | None]:
    """One page of the lineage, newest first, and the cursor of the next page (None: the end).

    The walk starts at the head, at ``before`` (a cursor this function returned), or at
    ``start`` (a checkpoint ID: a branch a fork replaced). Every entry must carry this
    thread's ``thread_id`` (thread turns tag their checkpoints). A cursor or ``start`` naming
    another thread's checkpoint is 400, so neither can read another lineage; the check is the
    metadata read the page makes anyway, and holds with or without ``CHECKPOINT_MAC_KEYS``.
    ``with_checkpoints`` reads each checkpoint whole (one GET instead of a properties read,
    decoded by the same restricted codec), so a page costs the same number of operations.
    Every page reads the pointer first: ``Forbidden`` unless ``caller`` made the thread.
    """
    if before is not None and start is not None:
        raise InvalidRequest("'from' and 'before' cannot be combined.", details={"param": "from"})
    head = await owned_head(pointers, thread_id, caller)
    if start is not None:
        cursor: str | None = validate_id(start, kind="from")
    elif before is None:
        if head.checkpoint_id is None:
            raise ThreadNotFound(f"Thread '{thread_id}' has no turns yet.")
        cursor = head.checkpoint_id
    else:
        cursor = _uncursor(thread_id, before)
    page: list[HistoryEntry] = []
    while cursor is not None and len(page) < limit:
        try:
            entry = await _read(store, cursor, with_checkpoints)
        except CheckpointNotFound:
            if start is not None and not page:
                raise  # the branch asked for is gone (retention): 404, not an empty page
            break  # pruned history (retention): the lineage ends here
        if entry.info.thread_id != thread_id:
            if start is not None and not page:
                raise InvalidRequest("'from' is not a checkpoint of this thread.", details={"param": "from"})
            if before is not None and not page:
                raise InvalidRequest("'before' is not a cursor this thread's history returned.")
            return page, None  # a lineage never leaves its thread; stop rather than read on
        page.append(entry)
        cursor = entry.info.previous_checkpoint_id
    return page, None if cursor is None else _cursor(thread_id, cursor)


async def _read(store: CheckpointStore, checkpoint_id: str, whole: bool) -> HistoryEntry:
    if not whole:
        return HistoryEntry(await store.get_info(checkpoint_id))
    checkpoint, info = await store.load_described(checkpoint_id)
    return HistoryEntry(info, checkpoint)


__all__ = [
    "MAX_METADATA_BYTES",
    "MAX_METADATA_KEYS",
    "MAX_PAGE",
    "METADATA_PREFIX",
    "HistoryEntry",
    "Metadata",
    "MetadataRecord",
    "ThreadMetadata",
    "history",
    "validate_metadata",
]
