"""Managing threads: their history and their metadata (deleting one: ``thread_delete``).

* ``history``: the lineage from the head backwards, a page at a time. A page of N costs
  N + 1 reads (the pointer, or nothing after a cursor, and one metadata read per entry),
  however long the thread is: the cursor names the next checkpoint to read.
* ``ThreadMetadata``: a small JSON object per thread (``thread-meta/<id>.json``) with its
  own ETag, so a metadata write never races a turn's pointer swap.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from dataclasses import dataclass

from azure.storage.blob.aio import ContainerClient

from ..base.errors import CheckpointNotFound, InvalidRequest, PreconditionFailed, ThreadNotFound
from ..base.ids import validate_id
from ..checkpoints.blob_store import BlobCheckpointStorage
from ..checkpoints.info import CheckpointInfo
from ..storage import layout
from ..storage.blob_records import BlobRecords, Record, RecordConflict, RecordUnreadable
from .pointers import ThreadPointers

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


async def history(
    pointers: ThreadPointers, store: BlobCheckpointStorage, thread_id: str, *, limit: int, before: str | None
) -> tuple[list[CheckpointInfo], str | None]:
    """One page of the lineage, newest first, and the cursor of the next page (None: the end).

    Every entry must carry this thread's ``thread_id`` (thread turns tag their checkpoints).
    A cursor naming another thread's checkpoint is 400, so a forged cursor cannot read
    another lineage; the check is the metadata read the page makes anyway, and holds with
    or without ``CHECKPOINT_MAC_KEYS``.
    """
    if before is None:
        head = await pointers.read(thread_id)
        if head.checkpoint_id is None:
            raise ThreadNotFound(f"Thread '{thread_id}' has no turns yet.")
        cursor: str | None = head.checkpoint_id
    else:
        cursor = _uncursor(thread_id, before)
    page: list[CheckpointInfo] = []
    while cursor is not None and len(page) < limit:
        try:
            info = await store.get_info(cursor)
        except CheckpointNotFound:
            break  # pruned history (retention): the lineage ends here
        if info.thread_id != thread_id:
            if before is not None and not page:
                raise InvalidRequest("'before' is not a cursor this thread's history returned.")
            return page, None  # a lineage never leaves its thread; stop rather than read on
        page.append(info)
        cursor = info.previous_checkpoint_id
    return page, None if cursor is None else _cursor(thread_id, cursor)


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


class ThreadMetadata:
    def __init__(self, container: ContainerClient) -> None:
        self._records = BlobRecords(container, METADATA_PREFIX)

    async def get(self, thread_id: str) -> Metadata:
        try:
            record = await self._records.get(thread_id)
        except RecordUnreadable:
            logger.error("Thread metadata %s%s.json is unreadable", METADATA_PREFIX, thread_id)
            return Metadata({}, None)
        return Metadata({}, None) if record is None else Metadata(dict(record.data.get("values", {})), record.etag)

    async def put(self, thread_id: str, values: dict[str, str], *, if_match: str | None) -> Metadata:
        """Replace the metadata; with ``if_match``, only if it still has that ETag (412 otherwise)."""
        data = {"thread_id": thread_id, "values": validate_metadata(values), "updated_at": time.time()}
        try:
            if if_match is None:
                current = await self._records.get(thread_id)
                written: Record = (
                    await self._records.create(thread_id, data)
                    if current is None
                    else await self._records.replace(thread_id, data, current.etag)
                )
            elif if_match == "*":
                current = await self._records.get(thread_id)
                if current is None:
                    raise PreconditionFailed("The thread has no metadata to match 'If-Match: *'.")
                written = await self._records.replace(thread_id, data, current.etag)
            else:
                written = await self._records.replace(thread_id, data, if_match)
        except RecordConflict:
            raise PreconditionFailed("The thread's metadata changed since that ETag; read it again.") from None
        return Metadata(data["values"], written.etag)

    async def delete(self, thread_id: str) -> None:
        await self._records.delete(thread_id)
