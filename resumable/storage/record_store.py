"""Typed records in blobs, changed only through one compare-and-swap helper.

Every small record the app keeps (background runs, idempotency keys, a thread's pending
turns, callbacks) is a frozen dataclass with a schema ``VERSION``. It is read, changed
and written through ``RecordStore.update(name, change)``, never by a loop of its own:

* ``change`` gets the current value (None: no record) and returns the new value, None
  to leave the record as it is, or ``DELETE``. It may raise to refuse the change (a
  cancelled run, a claim taken over); nothing is written then. On a conflict it is
  called again with the value that won, so it must be a pure function of its argument.
* **A write whose answer was lost is not a conflict.** Each write carries a fresh token,
  and the record keeps the last few (``writes``). When a write fails with a conflict
  (the SDK retried a write that had landed, and met it) or with an outage (the answer
  timed out), the record is read again: if the token is there, the write landed and the
  update succeeded. Otherwise a conflict is retried on the new value, and an outage whose
  write did not land is retried too, since nothing of it took effect. If that re-read
  fails as well, the outcome is unknown and ``StorageUnavailable`` propagates: a caller
  must never report such a write as lost.
* A record of a newer ``VERSION``, or of the wrong shape, is ``RecordUnreadable``, never
  "no record": each store decides what that means to its callers, once, by giving the
  store ``RecordErrors`` (what to raise instead), not by wrapping every call.
* A change that refuses raises ``Refused``; the update fills in the record it refused
  (``Refused.stored``), so the caller knows what won without reading it again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, Protocol, Self, TypeVar

from ..base.errors import RecordContended, StorageUnavailable
from .blob_records import BlobRecords, RecordConflict, RecordUnreadable

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from azure.storage.blob.aio import ContainerClient

# Tokens of this many most recent writes stay in a record: a lost answer is recognised
# even after this many later writes landed on top of it.
KEPT_WRITES = 8
DEFAULT_ATTEMPTS = 10
# Last-Modified and Date have whole seconds: an age read from them is this far off at most.
CLOCK_RESOLUTION = 1.0


class Refused(Exception):
    """Raised by a change to refuse; nothing is written. ``stored`` is then the record the
    change was given (None: no record), filled in by ``RecordStore.update``."""

    stored: Stored[Any] | None = None


@dataclass(frozen=True, slots=True)
class RecordErrors:
    """The one error mapping of a store: what its callers get instead of the record layer's
    errors (None: that error as it is). Each gets the record's name and the error."""

    unreadable: Callable[[str, RecordUnreadable], Exception] | None = None
    contended: Callable[[str, RecordContended], Exception] | None = None


class Schema(Protocol):
    """What a record type provides: a version, and a JSON form without the envelope."""

    VERSION: ClassVar[int]

    def to_json(self) -> dict[str, Any]: ...

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self: ...


T = TypeVar("T", bound=Schema)


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


class _Unread:
    def __repr__(self) -> str:
        return "UNREAD"


DELETE: Final = _Delete()
UNREAD: Final = _Unread()
# current value (None: no record) -> new value, None (leave it), or DELETE
Change = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Stored(Generic[T]):
    """A record as read or written: its value, the ETag its next write must match, the
    tokens of its last writes, and the storage service's clock: when the record last
    changed (``modified``) and when this answer was sent (``seen``), epoch seconds."""

    value: T
    etag: str
    writes: tuple[str, ...] = ()
    modified: float | None = None
    seen: float | None = None

    @property
    def age(self) -> float | None:
        """Seconds since the record last changed, by the service's clock (None: unknown)."""
        if self.modified is None or self.seen is None:
            return None
        return max(0.0, self.seen - self.modified)


class RecordStore(Generic[T]):
    """Records of one type under one prefix of a container."""

    def __init__(
        self, container: ContainerClient, prefix: str, schema: type[T], errors: RecordErrors | None = None
    ) -> None:
        self._raw = BlobRecords(container, prefix)
        self._schema = schema
        self._errors = errors or RecordErrors()
        self.prefix = prefix

    @contextmanager
    def _mapped(self, name: str) -> Iterator[None]:
        """The store's error mapping, applied once at every public call."""
        try:
            yield
        except RecordUnreadable as exc:
            if self._errors.unreadable is None:
                raise
            raise self._errors.unreadable(name, exc) from exc
        except RecordContended as exc:
            if self._errors.contended is None:
                raise
            raise self._errors.contended(name, exc) from exc

    def _decode(self, data: dict[str, Any], etag: str, modified: float | None, seen: float | None) -> Stored[T]:
        version = data.get("version", 1)
        writes = data.get("writes", [])
        if type(version) is not int or version > self._schema.VERSION:
            raise RecordUnreadable(f"schema version {version!r} is not one this app reads")
        if not isinstance(writes, list) or not all(isinstance(token, str) for token in writes):
            raise RecordUnreadable("'writes' is not a list of tokens")
        body = {key: value for key, value in data.items() if key not in ("version", "writes")}
        try:
            value = self._schema.from_json(body)
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordUnreadable(f"not a {self._schema.__name__}: {type(exc).__name__}") from exc
        return Stored(value, etag, tuple(writes), modified, seen)

    def _encode(self, value: T, writes: tuple[str, ...]) -> dict[str, Any]:
        return {"version": self._schema.VERSION, "writes": list(writes), **value.to_json()}

    async def get(self, name: str) -> Stored[T] | None:
        """The record, None if there is none; ``RecordUnreadable`` (mapped) if it is not ours."""
        with self._mapped(name):
            return await self._get(name)

    async def _get(self, name: str) -> Stored[T] | None:
        record = await self._raw.get(name)
        return None if record is None else self._decode(record.data, record.etag, record.modified, record.seen)

    async def create(self, name: str, value: T) -> Stored[T]:
        """Create-only; ``RecordConflict`` if the record exists (and is not this write's own)."""

        def only_if_absent(current: T | None) -> T:
            if current is not None:
                raise RecordConflict(name)
            return value

        written = await self.update(name, only_if_absent, current=None)
        if written is None:  # only_if_absent never asks for no record
            raise RecordConflict(name)
        return written

    async def update(
        self,
        name: str,
        change: Change,
        *,
        current: Stored[T] | _Unread | None = UNREAD,
        attempts: int = DEFAULT_ATTEMPTS,
        stored: bool = False,
    ) -> Stored[T] | None:
        """Apply ``change`` by compare-and-swap; the record as it is afterwards.

        ``current``: the record as this caller last read or wrote it (saves a read; a stale
        one costs a conflict and a re-read). ``UNREAD`` (the default) reads first.
        ``stored``: ``change`` gets the record as read (``Stored``: its age on the service's
        clock, for a decision that depends on how long ago the record last changed).
        Returns None when the record is absent afterwards (deleted, or never created).
        """
        with self._mapped(name):
            return await self._update(name, change, current, attempts, stored)

    async def _update(
        self, name: str, change: Change, current: Stored[T] | _Unread | None, attempts: int, stored: bool
    ) -> Stored[T] | None:
        seen = await self._get(name) if isinstance(current, _Unread) else current
        for _ in range(attempts):
            try:
                new = change(seen if stored or seen is None else seen.value)
            except Refused as refused:
                refused.stored = seen
                raise
            if new is None:
                return seen
            token = uuid.uuid4().hex
            try:
                return await self._write(name, seen, new, token)
            except (RecordConflict, StorageUnavailable) as exc:
                after = await self._get(name)  # raises if storage is still out: outcome unknown
                if after is not None and token in after.writes:
                    return after  # the write landed; only its answer was lost
                if isinstance(new, _Delete) and after is None:
                    return None
                if isinstance(exc, StorageUnavailable) and _same(after, seen):
                    raise  # nothing changed and storage failed: let the caller decide
                seen = after
        raise RecordContended(f"{self.prefix}{name} kept changing; nothing was written.")

    async def _write(self, name: str, seen: Stored[T] | None, new: T | _Delete, token: str) -> Stored[T] | None:
        """The one raw write of every update (tests inject lost answers and conflicts here)."""
        if isinstance(new, _Delete):
            if seen is None:
                return None
            if not await self._raw.delete(name, etag=seen.etag):
                raise RecordConflict(name)
            return None
        writes = (token, *(seen.writes if seen else ()))[:KEPT_WRITES]
        data = self._encode(new, writes)
        if seen is None:
            record = await self._raw.create(name, data)
        else:
            record = await self._raw.replace(name, data, seen.etag)
        return Stored(new, record.etag, writes, record.modified, record.seen)

    async def delete(self, name: str, *, etag: str | None = None) -> bool:
        """Delete the record (only if unchanged, when ``etag`` is given)."""
        return await self._raw.delete(name, etag=etag)

    async def names(self) -> list[str]:
        return await self._raw.names()


def _same(a: Stored[Any] | None, b: Stored[Any] | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and a.etag == b.etag)


__all__ = [
    "CLOCK_RESOLUTION",
    "DELETE",
    "UNREAD",
    "RecordContended",
    "RecordErrors",
    "RecordStore",
    "RecordUnreadable",
    "Refused",
    "Schema",
    "Stored",
]
