"""Faults at the one compare-and-swap write (``RecordStore._write``), for tests.

Every record write in the app goes through that method, so these cover them all:

* ``lose_answers``: the write lands, then the caller sees a conflict (the SDK's own retry
  met the write) or an outage (the answer timed out).
* ``race_writes``: just before the write, another writer changes the record (its value
  through ``rival``), so the write meets a real conflict.

Both take a prefix and an optional name, and a count of writes to hit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from resumable.base import StorageUnavailable
from resumable.storage.blob_records import RecordConflict
from resumable.storage.record_store import DELETE, RecordStore, Stored


@dataclass
class Hits:
    """What a fault hit: (prefix, name) per write it changed."""

    writes: list[tuple[str, str]] = field(default_factory=list)


def _matches(store: RecordStore[Any], name: str, prefix: str, only: str | None) -> bool:
    return store.prefix == prefix and (only is None or name == only)


@contextmanager
def lose_answers(
    monkeypatch: pytest.MonkeyPatch, prefix: str, *, name: str | None = None, times: int = 1, error: str = "conflict"
) -> Iterator[Hits]:
    """The next ``times`` matching writes land, and their callers get ``error`` instead."""
    original = RecordStore._write
    hits = Hits()

    async def landed_then_lost(self: RecordStore[Any], blob: str, seen: Any, new: Any, token: str) -> Any:
        result = await original(self, blob, seen, new, token)
        if len(hits.writes) < times and _matches(self, blob, prefix, name):
            hits.writes.append((self.prefix, blob))
            if error == "conflict":
                raise RecordConflict(blob)
            raise StorageUnavailable("Checkpoint storage could not be reached during replace record.")
        return result

    with monkeypatch.context() as patch:
        patch.setattr(RecordStore, "_write", landed_then_lost)
        yield hits


@contextmanager
def race_writes(
    monkeypatch: pytest.MonkeyPatch,
    prefix: str,
    rival: Callable[[Any], Any],
    *,
    name: str | None = None,
    times: int = 1,
) -> Iterator[Hits]:
    """Before each of the next ``times`` matching writes, another writer applies ``rival``
    to the record (the value it returns is written; ``DELETE`` deletes it)."""
    original = RecordStore._write
    hits = Hits()

    async def rival_first(self: RecordStore[Any], blob: str, seen: Any, new: Any, token: str) -> Any:
        if len(hits.writes) < times and _matches(self, blob, prefix, name):
            hits.writes.append((self.prefix, blob))
            current: Stored[Any] | None = await self.get(blob)
            replaced = rival(None if current is None else current.value)
            await original(self, blob, current, DELETE if replaced is DELETE else replaced, "rival")
        return await original(self, blob, seen, new, token)

    with monkeypatch.context() as patch:
        patch.setattr(RecordStore, "_write", rival_first)
        yield hits
