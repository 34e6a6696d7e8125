"""Managing threads: their history and their metadata (deleting one: ``thread_delete``).

* ``history``: the lineage from the head (or from a checkpoint: a replaced branch)
  backwards, a page at a time. A page of N costs N + 1 reads (the pointer, whose origin must
  be the caller's, and one read per entry: its metadata, or the whole checkpoint when the
  caller wants each turn), however long the thread is: the cursor names the next checkpoint
  to read.
* ``ThreadMetadata``: a small JSON object per thread (``thread-meta/<id>.json``) with its
  own ETag, so a metadata write never races a turn's pointer swap; a typed record on
  ``RecordStore``, so a lost answer is never a 412.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..base.errors import CheckpointNotFound, InvalidRequest, PreconditionFailed, ThreadNotFound
from ..base.ids import validate_id
from ..checkpoints.info import CheckpointInfo
from ..checkpoints.store import CheckpointStore
from ..storage import layout
from ..storage.record_store import UNREAD, RecordStore, RecordUnreadable, Stored
from .ownership import Caller, owned_head
from .pointers import ThreadPointers

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from agent_framework import WorkflowCheckpoint
    from azure.storage.blob.aio import ContainerClient

logger = logging.getLogger(__name__)
METADATA_PREFIX = layout.THREAD_METADATA
MAX_METADATA_BYTES = 4096
MAX_METADATA_KEYS = 32
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


# -- metadata -------------------------------------------------------------------------------


def validate_metadata(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise InvalidRequest("Thread metadata must be a JSON object of string values.")
    if len(value) > MAX_METADATA_KEYS:
        raise InvalidRequest(f"Thread metadata holds at most {MAX_METADATA_KEYS} keys.")
    for key, item in value.items():
        if not isinstance(item, str) or not 1 <= len(key) <= 64:
            raise InvalidRequest("Thread metadata keys are 1-64 characters and every value is a string.")
    if len(json.dumps(value).encode()) > MAX_METADATA_BYTES:
        raise InvalidRequest(f"Thread metadata is at most {MAX_METADATA_BYTES} bytes of JSON.")
    return dict(value)


@dataclass(frozen=True, slots=True)
class Metadata:
    values: dict[str, str]
    etag: str | None


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """``thread-meta/<id>.json``: version 1 (records from before ``RecordStore`` read as it)."""

    VERSION: ClassVar[int] = 1
    thread_id: str
    values: Mapping[str, str]
    updated_at: float

    def to_json(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "values": dict(self.values), "updated_at": self.updated_at}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MetadataRecord:
        values = data.get("values", {})
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise TypeError("values")
        updated_at = data.get("updated_at", 0.0)
        if type(updated_at) not in (int, float):
            raise TypeError("updated_at")
        return cls(str(data.get("thread_id", "")), dict(values), float(updated_at))


def _stale() -> PreconditionFailed:
    return PreconditionFailed("The thread's metadata changed since that ETag; read it again.")


class ThreadMetadata:
    """Each write goes through ``RecordStore.update``: a write whose answer was lost counts
    as written, and a write without ``If-Match`` applies on top of whatever won a race."""

    def __init__(self, container: ContainerClient) -> None:
        self._records: RecordStore[MetadataRecord] = RecordStore(container, METADATA_PREFIX, MetadataRecord)

    async def get(self, thread_id: str) -> Metadata:
        try:
            record = await self._records.get(thread_id)
        except RecordUnreadable:
            logger.error("Thread metadata %s%s.json is unreadable", METADATA_PREFIX, thread_id)
            return Metadata({}, None)
        return Metadata({}, None) if record is None else Metadata(dict(record.value.values), record.etag)

    async def put(self, thread_id: str, values: dict[str, str], *, if_match: str | None) -> Metadata:
        """Replace the metadata: without ``if_match`` always (on top of any concurrent write);
        with ``*`` if there is some; with an ETag only if it still has it (412 otherwise)."""
        new = MetadataRecord(thread_id, validate_metadata(values), time.time())
        calls = 0

        def change(current: MetadataRecord | None) -> MetadataRecord:
            nonlocal calls
            calls += 1
            if if_match == "*" and current is None:
                raise PreconditionFailed("The thread has no metadata to match 'If-Match: *'.")
            if if_match not in (None, "*") and calls > 1:
                raise _stale()  # called again only after a write that did not land: the ETag is stale
            return new

        # With an ETag, the write is conditioned on it without reading first.
        start = UNREAD if if_match in (None, "*") else Stored(new, str(if_match))
        written = await self._records.update(thread_id, change, current=start)
        if written is None:  # change never leaves the record as it is
            raise _stale()
        return Metadata(dict(written.value.values), written.etag)

    async def replace_as_read(self, thread_id: str, values: dict[str, str], *, read: Metadata) -> Metadata:
        """Replace the metadata the caller read (``read``), on top of any concurrent write,
        but never bring back a record deleted since: the write is conditioned on the read
        ETag (create-only if there was none), and a record that was read and is gone when
        that condition fails is ``ThreadNotFound``, not a new record."""
        new = MetadataRecord(thread_id, validate_metadata(values), time.time())

        def change(current: MetadataRecord | None) -> MetadataRecord:
            if current is None and read.etag is not None:
                raise ThreadNotFound(f"Thread '{thread_id}' was deleted.")
            return new

        start = None if read.etag is None else Stored(new, read.etag)
        written = await self._records.update(thread_id, change, current=start)
        if written is None:  # change never leaves the record as it is
            raise ThreadNotFound(f"Thread '{thread_id}' was deleted.")
        return Metadata(dict(written.value.values), written.etag)

    async def delete(self, thread_id: str, *, etag: str | None = None) -> bool:
        """Delete the record (only if it still has ``etag``, when given)."""
        return await self._records.delete(thread_id, etag=etag)
