"""A conversation's metadata update racing its deletion on another app instance.

The update reads the conversation (its metadata and pointer), then writes; each test holds
that write until the other instance's ``DELETE`` has run (whole, or up to its tombstone),
so the interleaving that brought deleted conversations back is forced, not hoped for. An
update of a conversation that is gone or being deleted is 404, and nothing of the
conversation is left once its delete finishes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from devtools.function_host import FunctionHost, HostResponse
from devtools.instances import Instance, separate_instances
from functions_adapter.wiring import build_service, container_for, load_settings
from resumable.storage.record_store import RecordStore
from resumable.threads.admin import METADATA_PREFIX, ThreadMetadata


@dataclass
class Pair:
    host: FunctionHost
    a: Instance
    b: Instance

    async def on(self, instance: Instance, method: str, path: str, body: Any = None) -> HostResponse:
        with instance.active():
            return await self.host.request(method, path, json_body=body)


@pytest.fixture
async def pair(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Pair]:
    with separate_instances(monkeypatch):
        yield Pair(host, Instance(), Instance())


def hold_metadata_write(monkeypatch: pytest.MonkeyPatch, thread_id: str, meanwhile: Callable[[], Awaitable[None]]):
    """Run ``meanwhile`` once, just before the first metadata write of ``thread_id``."""
    write = RecordStore._write
    held: list[bool] = []

    async def held_write(self: RecordStore[Any], name: str, *args: Any) -> Any:
        if self.prefix == METADATA_PREFIX and name == thread_id and not held:
            held.append(True)
            await meanwhile()
        return await write(self, name, *args)

    monkeypatch.setattr(RecordStore, "_write", held_write)
    return held


async def nothing_left(thread_id: str) -> None:
    settings = load_settings()
    assert (await ThreadMetadata(container_for(settings)).get(thread_id)).etag is None
    assert (await build_service(settings).pointers.read(thread_id)).etag is None


async def _conversation(pair: Pair, *, turn: bool) -> str:
    created = await pair.on(pair.a, "POST", "/api/conversations", {"metadata": {"k": "v1"}})
    assert created.status == 200
    conversation_id = (await created.json())["id"]
    if turn:
        answered = await pair.on(pair.a, "POST", f"/api/threads/{conversation_id}/runs", {"messages": "hello"})
        assert answered.status == 200
    return conversation_id


async def _thread_without_metadata(pair: Pair) -> str:
    thread_id = "race-thread-no-meta"
    answered = await pair.on(pair.a, "POST", f"/api/threads/{thread_id}/runs", {"messages": "hello"})
    assert answered.status == 200
    return thread_id


@pytest.mark.parametrize("shape", ["no-turns", "with-a-turn", "turn-without-metadata"])
async def test_an_update_whose_conversation_was_deleted_meanwhile_is_404_and_brings_nothing_back(
    pair: Pair, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    if shape == "turn-without-metadata":
        conversation_id = await _thread_without_metadata(pair)
    else:
        conversation_id = await _conversation(pair, turn=shape == "with-a-turn")
    path = f"/api/conversations/{conversation_id}"
    deleted: list[int] = []

    async def delete_on_b() -> None:
        deleted.append((await pair.on(pair.b, "DELETE", path)).status)

    held = hold_metadata_write(monkeypatch, conversation_id, delete_on_b)
    updated = await pair.on(pair.a, "POST", path, {"metadata": {"k": "v2"}})
    assert held and deleted == [200]  # the interleaving happened as forced
    assert updated.status == 404, await updated.json()
    assert (await updated.json())["error"]["code"] == "conversation_not_found"
    assert (await pair.on(pair.b, "GET", path)).status == 404
    await nothing_left(conversation_id)


@pytest.mark.parametrize("turn", [False, True])
async def test_an_update_that_lands_while_the_delete_is_in_progress_is_404_and_the_delete_removes_all(
    pair: Pair, monkeypatch: pytest.MonkeyPatch, turn: bool
) -> None:
    conversation_id = await _conversation(pair, turn=turn)
    path = f"/api/conversations/{conversation_id}"
    started: list[int] = []

    async def start_delete_on_b() -> None:
        # a deadline already past: the delete tombstones the thread, does one page and stops
        with monkeypatch.context() as patch:
            patch.setenv("THREAD_DELETE_SECONDS", "0.000001")
            started.append((await pair.on(pair.b, "DELETE", path)).status)

    held = hold_metadata_write(monkeypatch, conversation_id, start_delete_on_b)
    updated = await pair.on(pair.a, "POST", path, {"metadata": {"k": "v2"}})
    assert held and started == [409]  # the delete is under way, not finished
    assert updated.status == 404, await updated.json()
    finished = await pair.on(pair.b, "DELETE", path)
    assert finished.status == 200, await finished.json()
    assert (await pair.on(pair.a, "GET", path)).status == 404
    await nothing_left(conversation_id)


async def test_concurrent_updates_both_apply_in_turn(pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    """An update on the other instance between this one's read and write is not a deletion:
    this update lands on top of it (last writer wins), as before."""
    conversation_id = await _conversation(pair, turn=False)
    path = f"/api/conversations/{conversation_id}"
    rival: list[int] = []

    async def update_on_b() -> None:
        rival.append((await pair.on(pair.b, "POST", path, {"metadata": {"k": "rival"}})).status)

    hold_metadata_write(monkeypatch, conversation_id, update_on_b)
    updated = await pair.on(pair.a, "POST", path, {"metadata": {"k": "v2"}})
    assert rival == [200] and updated.status == 200
    assert (await (await pair.on(pair.b, "GET", path)).json())["metadata"] == {"k": "v2"}
