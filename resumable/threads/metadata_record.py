"""A thread's metadata (``thread-meta/<id>.json``) and who wrote it first.

A small JSON object per thread with its own ETag, so a metadata write never races a turn's
pointer swap; a typed record on ``RecordStore``, so a lost answer is never a 412.

The record keeps the origin of the caller that created it (``MetadataRecord.origin``),
and no later write changes it. Metadata can exist without a pointer (before a thread's
first turn, a conversation made by ``POST /api/conversations``, after retention removed
an idle thread's pointer), so this origin is what says whose it is when there is no
pointer to ask (``ownership.owned_head``). A record from before origins were kept has
none, and stays anyone's while its thread has no pointer. A record this app cannot read
names nobody: it is read as ``Metadata.unreadable``, never as "no record", and an unclaimed
thread with one refuses every caller (``ownership``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..base.errors import InvalidRequest, PreconditionFailed, ThreadNotFound
from ..storage import layout
from ..storage.record_store import RecordStore, RecordUnreadable, Stored
from .pointer_record import valid_origin

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from azure.storage.blob.aio import ContainerClient

logger = logging.getLogger(__name__)
METADATA_PREFIX = layout.THREAD_METADATA
MAX_METADATA_BYTES = 4096
MAX_METADATA_KEYS = 32


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
    # Who created the record (None: no record, or one from before origins were kept).
    origin: str | None = None
    # A record is there but this app cannot read it (logged): ``values`` and ``origin`` are
    # then unknown, never "none", so whose the thread is cannot be told (``ownership``).
    unreadable: bool = False

    @property
    def exists(self) -> bool:
        """Whether there is a record, readable or not."""
        return self.etag is not None or self.unreadable


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """``thread-meta/<id>.json``: version 1 (records from before ``RecordStore`` read as it;
    ``origin`` is optional, so a record from before it reads as one without)."""

    VERSION: ClassVar[int] = 1
    thread_id: str
    values: Mapping[str, str]
    updated_at: float
    origin: str | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"thread_id": self.thread_id, "values": dict(self.values), "updated_at": self.updated_at}
        return body if self.origin is None else body | {"origin": self.origin}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MetadataRecord:
        values = data.get("values", {})
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise TypeError("values")
        updated_at = data.get("updated_at", 0.0)
        if type(updated_at) not in (int, float):
            raise TypeError("updated_at")
        origin = data.get("origin")
        if origin is not None and not valid_origin(origin):
            raise TypeError("origin")
        return cls(str(data.get("thread_id", "")), dict(values), float(updated_at), origin)

    def kept_from(self, current: MetadataRecord | None) -> MetadataRecord:
        """This write on top of ``current``: the origin stays the one the record was created with."""
        if current is None or current.origin is None:
            return self
        return dataclasses.replace(self, origin=current.origin)


def _stale() -> PreconditionFailed:
    return PreconditionFailed("The thread's metadata changed since that ETag; read it again.")


def _as_read(stored: Stored[MetadataRecord]) -> Metadata:
    return Metadata(dict(stored.value.values), stored.etag, stored.value.origin)


class ThreadMetadata:
    """Each write goes through ``RecordStore.update``: a write whose answer was lost counts
    as written, and a write without ``If-Match`` applies on top of whatever won a race.
    ``origin`` is the writer's: recorded only if the write creates the record."""

    def __init__(self, container: ContainerClient) -> None:
        self._records: RecordStore[MetadataRecord] = RecordStore(container, METADATA_PREFIX, MetadataRecord)

    async def get(self, thread_id: str) -> Metadata:
        try:
            record = await self._records.get(thread_id)
        except RecordUnreadable:
            logger.error("Thread metadata %s%s.json is unreadable", METADATA_PREFIX, thread_id)
            return Metadata({}, None, unreadable=True)
        return Metadata({}, None) if record is None else _as_read(record)

    async def put(
        self, thread_id: str, values: dict[str, str], *, if_match: str | None, origin: str | None
    ) -> Metadata:
        """Replace the metadata: without ``if_match`` always (on top of any concurrent write);
        with ``*`` if there is some; with an ETag only if it still has it (412 otherwise)."""
        new = MetadataRecord(thread_id, validate_metadata(values), time.time(), origin)

        def change(current: Stored[MetadataRecord] | None) -> MetadataRecord:
            if if_match == "*" and current is None:
                raise PreconditionFailed("The thread has no metadata to match 'If-Match: *'.")
            if if_match not in (None, "*") and (current is None or current.etag != if_match):
                raise _stale()
            return new.kept_from(None if current is None else current.value)

        # Read first, even with an ETag: the record's origin is kept, and only a read knows it.
        written = await self._records.update(thread_id, change, stored=True)
        if written is None:  # change never leaves the record as it is
            raise _stale()
        return _as_read(written)

    async def replace_as_read(
        self,
        thread_id: str,
        values: dict[str, str],
        *,
        read: Metadata,
        origin: str | None,
        if_match: str | None = None,
    ) -> Metadata:
        """Replace the metadata the caller read (``read``), on top of any concurrent write,
        but never bring back a record deleted since: the write is conditioned on the read
        ETag (create-only if there was none), and a record that was read and is gone when
        that condition fails is ``ThreadNotFound``, not a new record.

        ``if_match`` (an ETag, or ``*``): the write applies only to that version (412
        ``PreconditionFailed`` otherwise), never on top of a concurrent write."""
        if if_match == "*" and read.etag is None:
            raise PreconditionFailed("The thread has no metadata to match 'If-Match: *'.")
        if if_match not in (None, "*") and if_match != read.etag:
            raise _stale()
        new = MetadataRecord(thread_id, validate_metadata(values), time.time(), origin)
        calls = 0

        def change(current: MetadataRecord | None) -> MetadataRecord:
            nonlocal calls
            calls += 1
            if current is None and read.etag is not None:
                raise ThreadNotFound(f"Thread '{thread_id}' was deleted.")
            if if_match is not None and calls > 1:
                raise _stale()  # another write landed since the read the ETag was checked on
            return new.kept_from(current)

        start = None if read.etag is None else Stored(_read_record(thread_id, read), read.etag)
        written = await self._records.update(thread_id, change, current=start)
        if written is None:  # change never leaves the record as it is
            raise ThreadNotFound(f"Thread '{thread_id}' was deleted.")
        return _as_read(written)

    async def delete(self, thread_id: str, *, etag: str | None = None) -> bool:
        """Delete the record (only if it still has ``etag``, when given)."""
        return await self._records.delete(thread_id, etag=etag)


def _read_record(thread_id: str, read: Metadata) -> MetadataRecord:
    """The record as the caller read it (what a conditional write starts from)."""
    return MetadataRecord(thread_id, read.values, 0.0, read.origin)
