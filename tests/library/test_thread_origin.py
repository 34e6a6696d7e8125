"""A thread remembers who made it: the pointer records its first turn's origin, keeps it
through every later write, and a turn of another origin is refused before anything runs.

Two runners with locks (and caches) of their own stand for two instances on one Azurite.
"""

from __future__ import annotations

import json

import pytest
from agent_framework import Message

from functions_adapter import queue_triggers, wiring
from functions_adapter.settings import Settings
from resumable.background.schema import RunRecord
from resumable.base.errors import Forbidden
from resumable.checkpoints.blob_store import BlobCheckpointStorage
from resumable.checkpoints.cache import CheckpointCache, HeadCache
from resumable.core.resume import TurnInput
from resumable.core.runs import RunRequest, RunService
from resumable.core.thread_turns import ThreadRunner
from resumable.threads.delete import delete_thread
from resumable.threads.ownership import Caller
from resumable.threads.pointers import ThreadLocks, ThreadPointers


def instance() -> RunService:
    """One app instance: the same container, caches of its own."""
    base = wiring.build_service(Settings.from_env())
    container = base.store.container
    store = BlobCheckpointStorage(
        container, base.store.codec, base.store.mac, CheckpointCache(), codec_for=base.store.codec_for
    )
    return RunService(store, base.spec, ThreadPointers(container, HeadCache()))


def request(text: str, origin: str | None, *, stream: bool = False) -> RunRequest:
    return RunRequest(None, TurnInput(messages=[Message(role="user", contents=[text])]), stream, origin=origin)


async def turn(service: RunService, thread_id: str, text: str, origin: str | None) -> dict:
    return json.loads(await ThreadRunner(service, thread_id, ThreadLocks()).run_to_json(request(text, origin)))


async def checkpoints(service: RunService) -> list[str]:
    return [b.name async for b in service.store.container.list_blobs(name_starts_with="checkpoints/")]


async def pointer_json(service: RunService, thread_id: str) -> dict:
    return json.loads(await (await service.store.container.download_blob(f"threads/{thread_id}.json")).readall())


@pytest.fixture
async def services(storage_env: str) -> tuple[RunService, RunService]:
    first = instance()
    await first.store.ensure_container()
    return first, instance()


async def test_the_first_turn_records_its_origin_and_later_turns_keep_it(services) -> None:
    mine, other = services
    await turn(mine, "owned", "one", "principal:alice")
    await turn(other, "owned", "two", "principal:alice")
    head = await mine.pointers.read("owned")
    assert (head.turns, head.origin) == (2, "principal:alice")
    assert (await pointer_json(mine, "owned"))["origin"] == "principal:alice"


@pytest.mark.parametrize("origin", ["principal:mallory", "slack:T1", None])
async def test_a_turn_of_another_origin_is_forbidden_before_anything_runs(services, origin) -> None:
    mine, other = services
    await turn(mine, "owned", "one", "principal:alice")
    before = (await pointer_json(mine, "owned"), await checkpoints(mine))
    runner = ThreadRunner(other, "owned", ThreadLocks())
    with pytest.raises(Forbidden) as refused:
        await runner.run_to_json(request("hijack", origin))
    assert "alice" not in str(refused.value), "the refusal must not name the owner"
    with pytest.raises(Forbidden):
        await runner.validate(request("hijack", origin))
    with pytest.raises(Forbidden):
        await runner.open_stream(request("hijack", origin, stream=True))
    # The warm instance refuses too: its cached head is not trusted to decide either way.
    with pytest.raises(Forbidden):
        await ThreadRunner(mine, "owned", ThreadLocks()).run_to_json(request("hijack", origin))
    assert (await pointer_json(mine, "owned"), await checkpoints(mine)) == before


async def test_a_legacy_pointer_without_origin_accepts_any_origin_and_gains_none(services) -> None:
    mine, other = services
    await turn(mine, "legacy", "one", None)
    assert "origin" not in await pointer_json(mine, "legacy")
    await turn(other, "legacy", "two", "principal:bob")
    await turn(mine, "legacy", "three", "slack:T1")
    head = await other.pointers.read("legacy")
    assert (head.turns, head.origin) == (3, None)


async def test_the_deletion_mark_keeps_the_origin_and_a_deleted_thread_starts_afresh(services) -> None:
    mine, other = services
    await turn(mine, "gone", "one", "principal:alice")
    assert (
        await delete_thread(
            other.store.container,
            other.pointers,
            "gone",
            store=other.store,
            deadline_seconds=30,
            caller=Caller.MAINTENANCE,
        )
    ).finished
    await turn(other, "gone", "new owner", "principal:bob")
    assert (await mine.pointers.read("gone")).origin == "principal:bob"


def test_a_background_run_record_keeps_the_origin() -> None:
    record = RunRecord("run-1", b"{}", "f", b"{}", 1.0, thread_id="t", origin="slack:T1")
    assert RunRecord.from_json(record.to_json()).origin == "slack:T1"
    older = {key: value for key, value in record.to_json().items() if key != "origin"}
    assert RunRecord.from_json(older).origin is None


async def test_a_background_run_executes_with_the_origin_it_was_accepted_with(storage_env: str) -> None:
    """The queue trigger rebuilds the turn from the record: the origin comes with it."""
    body = json.dumps({"messages": "hello"}).encode()
    record = RunRecord("run-1", body, "f", b"{}", 1.0, thread_id="t", origin="slack:T1")
    rebuilt = queue_triggers.parse_record(Settings.from_env())(record)
    assert rebuilt.request.origin == "slack:T1"
    assert isinstance(rebuilt.runner, ThreadRunner)
