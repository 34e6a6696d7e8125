"""The one compare-and-swap helper, against real Azurite: conflicts re-apply the change on
the winner's value, lost answers count as written (never applied twice), unknown outcomes
propagate, and foreign or newer records are unreadable, never absent."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from azure.storage.blob.aio import ContainerClient

from devtools.record_faults import lose_answers, race_writes
from functions_adapter import wiring
from functions_adapter.settings import Settings
from resumable.base.errors import StorageUnavailable
from resumable.storage.blob_records import RecordConflict, RecordUnreadable
from resumable.storage.record_store import DELETE, RecordContended, RecordStore

PREFIX = "counters/"


@dataclass(frozen=True, slots=True)
class Counter:
    VERSION: ClassVar[int] = 2
    count: int
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "note": self.note}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Counter:
        if type(data["count"]) is not int or not isinstance(data.get("note", ""), str):
            raise TypeError("count")
        return cls(data["count"], data.get("note", ""))


def bump(value: Counter | None) -> Counter:
    return Counter(1) if value is None else dataclasses.replace(value, count=value.count + 1)


@pytest.fixture
async def container(storage_env: str) -> AsyncIterator[ContainerClient]:
    yield wiring.container_for(Settings.from_env())


@pytest.fixture
def store(container: ContainerClient) -> RecordStore[Counter]:
    return RecordStore(container, PREFIX, Counter)


async def raw(container: ContainerClient, name: str) -> dict[str, Any]:
    blob = container.get_blob_client(f"{PREFIX}{name}.json")
    return json.loads(await (await blob.download_blob()).readall())


async def test_update_creates_then_changes_and_the_blob_carries_version_and_tokens(store, container) -> None:
    first = await store.update("a", bump)
    second = await store.update("a", bump, current=first)
    assert (first.value.count, second.value.count) == (1, 2)
    data = await raw(container, "a")
    assert data["version"] == 2 and data["count"] == 2
    assert len(data["writes"]) == 2 and data["writes"][1] == first.writes[0]
    assert (await store.get("a")).etag == second.etag


async def test_a_stale_current_costs_a_conflict_and_the_change_is_applied_to_the_winner(store) -> None:
    stale = await store.update("a", bump)
    await store.update("a", lambda v: dataclasses.replace(v, note="rival"))
    calls: list[Counter | None] = []

    def change(value: Counter | None) -> Counter:
        calls.append(value)
        return bump(value)

    after = await store.update("a", change, current=stale)
    assert after.value == Counter(2, "rival")
    assert calls == [Counter(1), Counter(1, "rival")]


async def test_a_rival_write_between_read_and_write_is_seen_and_not_overwritten(store, monkeypatch) -> None:
    await store.update("a", bump)
    with race_writes(monkeypatch, PREFIX, lambda v: dataclasses.replace(v, note="rival"), name="a") as hits:
        after = await store.update("a", bump)
    assert hits.writes == [(PREFIX, "a")]
    assert after.value == Counter(2, "rival")


@pytest.mark.parametrize("error", ["conflict", "outage"])
async def test_a_write_whose_answer_was_lost_counts_once(store, monkeypatch, error: str) -> None:
    await store.update("a", bump)
    with lose_answers(monkeypatch, PREFIX, name="a", error=error) as hits:
        after = await store.update("a", bump)
    assert hits.writes == [(PREFIX, "a")]
    assert after.value.count == 2  # not 3: the landed write was recognised, not re-applied
    assert (await store.get("a")).value.count == 2


@pytest.mark.parametrize("error", ["conflict", "outage"])
async def test_a_create_whose_answer_was_lost_is_this_create(store, monkeypatch, error: str) -> None:
    with lose_answers(monkeypatch, PREFIX, name="a", error=error):
        created = await store.create("a", Counter(7))
    assert created.value == Counter(7)
    with pytest.raises(RecordConflict):
        await store.create("a", Counter(8))


async def test_a_lost_answer_recognised_after_later_writes_landed_on_top(store, monkeypatch) -> None:
    """The write landed, a rival wrote after it, then the answer was lost: still ours."""
    await store.update("a", bump)
    original = RecordStore._write

    async def landed_then_rival_then_lost(self, name, seen, new, token):
        written = await original(self, name, seen, new, token)
        await original(self, name, written, dataclasses.replace(new, note="after"), "rival")
        raise RecordConflict(name)

    with monkeypatch.context() as patch:
        patch.setattr(RecordStore, "_write", landed_then_rival_then_lost)
        after = await store.update("a", bump)
    assert after.value == Counter(2, "after")


async def test_an_outage_that_did_not_land_is_not_reported_as_written(store, monkeypatch) -> None:
    await store.update("a", bump)

    async def fails(self, name, seen, new, token):
        raise StorageUnavailable("down")

    monkeypatch.setattr(RecordStore, "_write", fails)
    with pytest.raises(StorageUnavailable):
        await store.update("a", bump)
    monkeypatch.undo()
    assert (await store.get("a")).value.count == 1


async def test_when_the_check_after_a_lost_answer_fails_too_the_outcome_is_unknown(store, monkeypatch) -> None:
    await store.update("a", bump)
    original_get = RecordStore._get
    lost: list[bool] = []

    async def get(self, name):
        if lost:
            raise StorageUnavailable("down")
        return await original_get(self, name)

    monkeypatch.setattr(RecordStore, "_get", get)
    original = RecordStore._write

    async def lands_then_lost(self, name, seen, new, token):
        await original(self, name, seen, new, token)
        lost.append(True)
        raise RecordConflict(name)

    monkeypatch.setattr(RecordStore, "_write", lands_then_lost)
    with pytest.raises(StorageUnavailable):
        await store.update("a", bump)


async def test_a_refusing_change_writes_nothing_and_none_leaves_the_record(store) -> None:
    first = await store.update("a", bump)

    def refuse(value: Counter | None) -> Counter:
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError):
        await store.update("a", refuse)
    assert await store.update("a", lambda v: None) == first
    assert (await store.get("a")).etag == first.etag


async def test_delete_through_update_and_a_lost_delete_answer(store, monkeypatch) -> None:
    await store.update("a", bump)
    assert await store.update("a", lambda v: DELETE) is None
    assert await store.get("a") is None
    await store.update("b", bump)
    with lose_answers(monkeypatch, PREFIX, name="b"):
        assert await store.update("b", lambda v: DELETE) is None
    assert await store.get("b") is None


async def test_endless_rivals_end_in_contended(store, monkeypatch) -> None:
    await store.update("a", bump)
    with race_writes(monkeypatch, PREFIX, bump, name="a", times=100), pytest.raises(RecordContended):
        await store.update("a", bump, attempts=3)


@pytest.mark.parametrize(
    "data",
    [
        {"version": 3, "writes": [], "count": 1},
        {"version": "2", "writes": [], "count": 1},
        {"version": 2, "writes": "x", "count": 1},
        {"version": 2, "writes": [], "count": "1"},
        {"version": 2, "writes": []},
    ],
    ids=["newer-version", "version-not-int", "writes-not-list", "field-wrong-type", "field-missing"],
)
async def test_a_record_this_app_did_not_write_is_unreadable_never_absent(store, container, data) -> None:
    await store.update("y", bump)  # creates the container
    await container.upload_blob(f"{PREFIX}x.json", json.dumps(data).encode())
    with pytest.raises(RecordUnreadable):
        await store.get("x")
    with pytest.raises(RecordUnreadable):
        await store.update("x", bump)
