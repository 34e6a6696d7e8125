"""The ``CheckpointStore`` contract (``resumable/checkpoints/store.py``), run against every
implementation: ``BlobCheckpointStorage`` on real Azurite and ``MemoryCheckpointStore``.

A new store (Cosmos DB, files) joins ``KINDS`` and must pass the same tests. The last tests
run a turn end to end with the checkpoints in memory and nothing else changed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pytest
from agent_framework import InMemoryCheckpointStorage, Message, WorkflowCheckpoint

from functions_adapter import wiring
from functions_adapter.settings import Settings
from resumable.base.errors import (
    CheckpointConflict,
    CheckpointNotFound,
    CheckpointNotSaveable,
    CheckpointTooLarge,
    CheckpointUnreadable,
    InvalidRequest,
)
from resumable.checkpoints.blob_metadata import CodecFor
from resumable.checkpoints.blob_store import BlobCheckpointStorage
from resumable.checkpoints.cache import HeadCache
from resumable.checkpoints.codec import CheckpointCodec
from resumable.checkpoints.info import VERSION_KEY, WORKFLOW_KEY
from resumable.checkpoints.memory_store import MemoryCheckpointStore
from resumable.checkpoints.store import CheckpointStore
from resumable.core.resume import TurnInput
from resumable.core.runs import RunRequest, RunService
from resumable.core.thread_turns import ThreadRunner
from resumable.storage.failures import create_container_if_missing
from resumable.threads.admin import history
from resumable.threads.ownership import Caller
from resumable.threads.pointers import ThreadLocks, ThreadPointers
from resumable.threads.transcript import messages_page
from tests import recording_workflow

KINDS = ["blob", "memory"]


class Note:
    """Application state a workflow might keep: readable only where it is allowlisted."""

    def __init__(self, text: str) -> None:
        self.text = text


NOTE = f"{Note.__module__}:{Note.__qualname__}"


@dataclass
class Stores:
    """Builds stores of one kind over one set of checkpoints (as two app instances share a
    container), each with the codec (and ``codec_for``) it is given."""

    build: Callable[[CheckpointCodec, CodecFor | None], CheckpointStore]

    def __call__(self, codec: CheckpointCodec | None = None) -> CheckpointStore:
        return self.build(codec or CheckpointCodec(), None)

    def build_with(self, codec_for: CodecFor) -> CheckpointStore:
        return self.build(CheckpointCodec(), codec_for)


@pytest.fixture
async def blob_stores(storage_env: str) -> Stores:
    container = wiring.container_for(Settings.from_env())
    await create_container_if_missing(container)
    return Stores(lambda codec, codec_for: BlobCheckpointStorage(container, codec, codec_for=codec_for))


@pytest.fixture
def memory_stores() -> Stores:
    shared: dict = {}
    return Stores(lambda codec, codec_for: MemoryCheckpointStore(codec, codec_for=codec_for, shared=shared))


@pytest.fixture(params=KINDS)
def stores(request: pytest.FixtureRequest) -> Stores:
    """Each kind's own fixture: only the Blob store needs Azurite."""
    return request.getfixturevalue(f"{request.param}_stores")


@pytest.fixture
def store(stores: Stores) -> CheckpointStore:
    return stores()


async def make_checkpoint(checkpoint_id: str | None = None) -> WorkflowCheckpoint:
    storage = InMemoryCheckpointStorage()
    workflow = recording_workflow.build()
    await workflow.run([Message(role="user", contents=["hi"])], checkpoint_storage=storage)
    checkpoint = await storage.load(workflow.get_last_checkpoint_id())
    if checkpoint_id is not None:
        checkpoint.checkpoint_id = checkpoint_id
    return checkpoint


async def all_infos(store: CheckpointStore, size: int) -> list[list[str]]:
    """Every page of the listing, as the IDs on each."""
    pages: list[list[str]] = []
    token: str | None = None
    while True:
        infos, token = await store.info_page(token, size)
        pages.append([info.checkpoint_id for info in infos])
        if token is None:
            return pages


def test_both_implement_the_protocol() -> None:
    assert issubclass(BlobCheckpointStorage, CheckpointStore)
    assert issubclass(MemoryCheckpointStore, CheckpointStore)


async def test_save_then_load_round_trips(store) -> None:
    checkpoint = await make_checkpoint()
    assert await store.save(checkpoint) == checkpoint.checkpoint_id
    assert (await store.load(checkpoint.checkpoint_id)).to_dict() == checkpoint.to_dict()


async def test_what_is_stored_is_bytes_not_the_object_saved_or_loaded(store) -> None:
    checkpoint = await make_checkpoint()
    await store.save(checkpoint)
    original = copy.deepcopy(checkpoint.to_dict())
    checkpoint.state["changed"] = "after the save"
    loaded = await store.load(checkpoint.checkpoint_id)
    loaded.state["changed"] = "after the load"
    assert (await store.load(checkpoint.checkpoint_id)).to_dict() == original


async def test_checkpoints_are_create_only(store) -> None:
    checkpoint = await make_checkpoint("only-once")
    await store.save(checkpoint)
    other = await make_checkpoint("only-once")
    with pytest.raises(CheckpointConflict):
        await store.save(other)
    assert (await store.load("only-once")).timestamp == checkpoint.timestamp
    # The very same save again (a retry whose answer was lost) is not a conflict.
    assert await store.save(checkpoint) == "only-once"


async def test_a_missing_checkpoint_is_not_found(store) -> None:
    for call in (store.load("absent"), store.load_described("absent"), store.get_info("absent")):
        with pytest.raises(CheckpointNotFound):
            await call


async def test_delete_is_idempotent_and_final(store) -> None:
    checkpoint = await make_checkpoint("doomed")
    await store.save(checkpoint)
    assert await store.delete("doomed") is True
    assert await store.delete("doomed") is False
    with pytest.raises(CheckpointNotFound):
        await store.load("doomed")
    with pytest.raises(CheckpointNotFound):
        await store.get_info("doomed")
    assert await all_infos(store, 10) == [[]]


@pytest.mark.parametrize("bad_id", ["../other", "a/b", "..", "", "a" * 129])
async def test_unsafe_ids_are_refused(store, bad_id: str) -> None:
    for call in (store.load(bad_id), store.delete(bad_id), store.get_info(bad_id)):
        with pytest.raises(InvalidRequest):
            await call


async def test_info_describes_a_checkpoint_without_its_body(store) -> None:
    checkpoint = await make_checkpoint("described")
    checkpoint.previous_checkpoint_id = "parent-1"
    await store.save(checkpoint)
    info = await store.get_info("described")
    assert (info.checkpoint_id, info.workflow_name, info.previous_checkpoint_id) == (
        "described",
        recording_workflow.NAME,
        "parent-1",
    )
    assert (info.timestamp, info.status, info.pending_request_ids) == (checkpoint.timestamp, "idle", ())
    assert info.size_bytes == len(store.codec.encode(checkpoint))
    assert info.stored_at is not None
    assert (info.thread_id, info.replaced_head_id) == (None, None)
    loaded, described = await store.load_described("described")
    assert loaded.checkpoint_id == "described"
    assert described == info


async def test_thread_tag_and_replaced_head_are_kept(store) -> None:
    await store.save(await make_checkpoint("turn-2"), thread_id="thread-1", replaced_head="turn-1b")
    info = await store.get_info("turn-2")
    assert (info.thread_id, info.replaced_head_id) == ("thread-1", "turn-1b")
    assert "turn-1b" in info.links
    [listed], _ = await store.info_page(None, 10)
    assert (listed.thread_id, listed.replaced_head_id) == ("thread-1", "turn-1b")


async def test_pages_come_in_name_order_and_tokens_go_on_from_the_last(store) -> None:
    # Name order is of "<id>.json", byte by byte: "a-b.json" < "a.json" < "a_b.json".
    for checkpoint_id in ["c", "a", "a_b", "b", "a-b"]:
        await store.save(await make_checkpoint(checkpoint_id))
    pages = await all_infos(store, 2)
    assert [checkpoint_id for page in pages for checkpoint_id in page] == ["a-b", "a", "a_b", "b", "c"]
    assert all(len(page) <= 2 for page in pages)
    assert [len(page) for page in pages[:2]] == [2, 2]
    assert await all_infos(store, 10) == [["a-b", "a", "a_b", "b", "c"]]


async def test_an_empty_store_lists_one_empty_page(store) -> None:
    assert await store.info_page(None, 5) == ([], None)


async def test_the_size_cap_holds_on_save_and_on_load(stores) -> None:
    checkpoint = await make_checkpoint("big")
    size = len(CheckpointCodec().encode(checkpoint))
    small = stores(CheckpointCodec(max_bytes=size - 1))
    with pytest.raises(CheckpointTooLarge):
        await small.save(checkpoint)
    with pytest.raises(CheckpointNotFound):
        await small.get_info("big")  # nothing was stored
    await stores().save(checkpoint)
    with pytest.raises(CheckpointUnreadable):
        await small.load("big")


async def test_the_allowlist_refuses_what_it_does_not_list(stores) -> None:
    checkpoint = await make_checkpoint("noted")
    checkpoint.state["note"] = Note("kept")
    plain, allowing = stores(), stores(CheckpointCodec(allowed_types=[NOTE]))
    with pytest.raises(CheckpointNotSaveable):
        await plain.save(checkpoint)
    with pytest.raises(CheckpointNotFound):
        await plain.get_info("noted")  # nothing was stored
    await allowing.save(checkpoint)
    assert (await allowing.load("noted")).state["note"].text == "kept"
    with pytest.raises(CheckpointUnreadable):
        await plain.load("noted")


async def test_the_codec_for_a_version_is_chosen_by_the_metadata_stored_beside_it(stores) -> None:
    """``codec_for``, given at construction: v2 lists ``Note``, v1 does not."""
    codecs = {"v1": CheckpointCodec(), "v2": CheckpointCodec(allowed_types=[NOTE])}

    def codec_for(metadata: Mapping[str, str]) -> CheckpointCodec:
        return codecs[metadata.get(VERSION_KEY) or "v1"]

    versioned = stores.build_with(codec_for)
    for version in ("v1", "v2"):
        checkpoint = await make_checkpoint(f"on-{version}")
        checkpoint.metadata = {**checkpoint.metadata, WORKFLOW_KEY: "default", VERSION_KEY: version}
        checkpoint.state["note"] = Note(version)
        if version == "v1":
            with pytest.raises(CheckpointNotSaveable):
                await versioned.save(checkpoint)
        else:
            await versioned.save(checkpoint)
    assert (await versioned.load("on-v2")).state["note"].text == "v2"
    assert (await versioned.get_info("on-v2")).workflow_version == "v2"
    with pytest.raises(CheckpointUnreadable):
        await stores().load("on-v2")  # the default codec does not list Note


# -- a turn end to end, with the checkpoints in memory ----------------------------------------


@pytest.fixture
async def memory_service(storage_env: str) -> RunService:
    """The app's workflows and codecs, its checkpoints in memory. Thread pointers are
    records on Blob Storage (``RecordStore``), not checkpoints: they stay on Azurite."""
    settings = Settings.from_env()
    catalog = wiring.workflow_catalog(settings)
    codec = catalog.load(catalog.default, catalog.entry(catalog.default).newest).codec
    container = wiring.container_for(settings)
    await create_container_if_missing(container)
    store = MemoryCheckpointStore(codec, codec_for=catalog.codec_for)
    return RunService(store, catalog, ThreadPointers(container, HeadCache()))


async def test_the_service_leaves_the_store_as_it_was_built(storage_env: str) -> None:
    """The codec per version is the store's constructor argument; a service never sets it."""
    catalog = wiring.workflow_catalog(Settings.from_env())
    store = MemoryCheckpointStore()
    RunService(store, catalog, ThreadPointers(wiring.container_for(Settings.from_env())))
    assert store.codec_for is None


def say(text: str, checkpoint_id: str | None = None) -> RunRequest:
    return RunRequest(checkpoint_id, TurnInput(messages=[Message(role="user", contents=[text])]), stream=False)


async def checkpoint_blobs() -> list[str]:
    container = wiring.container_for(Settings.from_env())
    return [b.name async for b in container.list_blobs(name_starts_with="checkpoints/")]


async def test_a_run_without_a_thread_resumes_from_the_memory_store(memory_service) -> None:
    first = json.loads(await memory_service.run_to_json(say("one")))
    second = json.loads(await memory_service.run_to_json(say("two", first["checkpoint_id"])))
    assert second["previous_checkpoint_id"] == first["checkpoint_id"]
    assert await memory_service.ledger.committed(second["checkpoint_id"])
    assert (await memory_service.store.get_info(second["checkpoint_id"])).thread_id is None
    assert await checkpoint_blobs() == []


async def test_thread_turns_run_on_the_memory_store(memory_service) -> None:
    runner = ThreadRunner(memory_service, "memory-thread", ThreadLocks())
    first = json.loads(await runner.run_to_json(say("one")))
    second = json.loads(await runner.run_to_json(say("two")))
    head = await memory_service.pointers.read("memory-thread")
    assert (head.checkpoint_id, head.turns) == (second["checkpoint_id"], 2)
    assert second["previous_checkpoint_id"] == first["checkpoint_id"]
    assert await memory_service.ledger.committed(first["checkpoint_id"], "memory-thread")
    page, _ = await history(
        memory_service.pointers,
        memory_service.store,
        "memory-thread",
        caller=Caller.MAINTENANCE,
        limit=10,
        before=None,
        with_checkpoints=True,
    )
    assert [entry.info.checkpoint_id for entry in page] == [second["checkpoint_id"], first["checkpoint_id"]]
    messages, more = await messages_page(
        memory_service.pointers,
        memory_service.store,
        "memory-thread",
        caller=Caller.MAINTENANCE,
        limit=10,
        newest_first=False,
    )
    assert [m.content for m in messages if m.sent] == ["one", "two"]
    assert not more
    assert await checkpoint_blobs() == []
