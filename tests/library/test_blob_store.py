"""BlobCheckpointStorage against real Azurite: the framework protocol, immutability, IDs."""

from __future__ import annotations

import inspect

import pytest
from agent_framework import CheckpointStorage, InMemoryCheckpointStorage, Message, WorkflowCheckpoint
from agent_framework.exceptions import WorkflowCheckpointException

from devtools.op_counter import OperationCounter
from functions_adapter.settings import Settings
from functions_adapter.wiring import container_for
from resumable.base.errors import CheckpointConflict, CheckpointUnreadable, InvalidRequest
from resumable.checkpoints.blob_store import BlobCheckpointStorage
from resumable.checkpoints.codec import CheckpointCodec
from resumable.checkpoints.store import CheckpointStore
from tests import recording_workflow


@pytest.fixture
async def store(storage_env: str, ops: OperationCounter) -> BlobCheckpointStorage:
    return BlobCheckpointStorage(container_for(Settings.from_env()), CheckpointCodec())


async def make_checkpoint(name: str = recording_workflow.NAME) -> WorkflowCheckpoint:
    storage = InMemoryCheckpointStorage()
    workflow = recording_workflow.build(name)
    await workflow.run([Message(role="user", contents=["hi"])], checkpoint_storage=storage)
    return await storage.load(workflow.get_last_checkpoint_id())


def test_implements_the_whole_checkpoint_storage_protocol() -> None:
    for name, member in inspect.getmembers(CheckpointStorage, inspect.isfunction):
        if name.startswith("_"):
            continue
        ours = getattr(BlobCheckpointStorage, name, None)
        assert ours is not None, f"missing {name}"
        assert inspect.iscoroutinefunction(ours), f"{name} must be async"
        # Same parameters; extra keyword-only ones are allowed only with defaults.
        required = [
            p.name
            for p in inspect.signature(ours).parameters.values()
            if not (
                p.kind is p.KEYWORD_ONLY and p.default is not p.empty and p.name not in str(inspect.signature(member))
            )
        ]
        assert required == list(inspect.signature(member).parameters), name


async def test_save_then_load_round_trips_and_creates_the_container(store, ops) -> None:
    checkpoint = await make_checkpoint()
    assert await store.save(checkpoint) == checkpoint.checkpoint_id
    loaded = await store.load(checkpoint.checkpoint_id)
    assert loaded.to_dict() == checkpoint.to_dict()
    assert ops.counts["PUT"] == 3  # upload → ContainerNotFound, create container, upload again


async def test_checkpoints_are_create_only(store) -> None:
    checkpoint = await make_checkpoint()
    await store.save(checkpoint)
    changed = await make_checkpoint()
    changed.checkpoint_id = checkpoint.checkpoint_id
    with pytest.raises(CheckpointConflict):
        await store.save(changed)
    assert (await store.load(checkpoint.checkpoint_id)).timestamp == checkpoint.timestamp


async def test_load_of_a_missing_checkpoint_raises_the_protocol_exception(store) -> None:
    await store.ensure_container()
    with pytest.raises(WorkflowCheckpointException):
        await store.load("does-not-exist")
    assert await store.delete("does-not-exist") is False


@pytest.mark.parametrize(
    "bad_id",
    ["../other", "a/b", "a\\b", "..", "x..y", ".hidden", "tab\tid", "nul\x00", "é", "%2e%2e", "", "a" * 129],
)
async def test_unsafe_ids_are_refused_before_any_storage_call(store, ops, bad_id: str) -> None:
    for call in (store.load(bad_id), store.delete(bad_id), store.get_info(bad_id)):
        with pytest.raises(InvalidRequest):
            await call
    assert ops.total == 0


async def test_listing_by_workflow_reads_metadata_not_bodies(store, ops) -> None:
    mine = [await make_checkpoint() for _ in range(3)]
    other = await make_checkpoint("another-workflow")
    for checkpoint in [*mine, other]:
        await store.save(checkpoint)
    ops.reset()
    ids = await store.list_checkpoint_ids(workflow_name=recording_workflow.NAME)
    assert ids == [c.checkpoint_id for c in mine]
    assert ops.total == 1  # one listing call, no downloads

    ops.reset()
    latest = await store.get_latest(workflow_name=recording_workflow.NAME)
    assert latest is not None
    assert latest.checkpoint_id == mine[-1].checkpoint_id
    assert ops.total == 2  # listing + one download

    listed = await store.list_checkpoints(workflow_name="another-workflow")
    assert [c.checkpoint_id for c in listed] == [other.checkpoint_id]
    assert await store.get_latest(workflow_name="nobody") is None


async def test_delete_removes_the_blob(store) -> None:
    checkpoint = await make_checkpoint()
    await store.save(checkpoint)
    assert await store.delete(checkpoint.checkpoint_id) is True
    assert await store.list_checkpoint_ids(workflow_name=recording_workflow.NAME) == []


async def test_oversized_blob_is_refused_after_reading_only_the_cap(store) -> None:
    checkpoint = await make_checkpoint()
    await store.save(checkpoint)
    size = len(store.codec.encode(checkpoint))
    small = BlobCheckpointStorage(store.container, CheckpointCodec(max_bytes=size // 2))
    with pytest.raises(CheckpointUnreadable):
        await small.load(checkpoint.checkpoint_id)


async def test_get_info_describes_lineage_from_metadata(store) -> None:
    checkpoint = await make_checkpoint("wörkflow with spaces")
    checkpoint.previous_checkpoint_id = "parent-1"
    await store.save(checkpoint)
    info = await store.get_info(checkpoint.checkpoint_id)
    assert info.workflow_name == "wörkflow with spaces"
    assert info.previous_checkpoint_id == "parent-1"
    assert info.status == "idle"
    assert info.size_bytes > 0


async def test_the_upstream_two_step_pattern_works_with_this_store(store) -> None:
    """Runtime checkpointing through the framework itself, as users do today."""
    first = recording_workflow.build()
    await first.run([Message(role="user", contents=["one"])], checkpoint_storage=store)
    last = first.get_last_checkpoint_id()
    assert last in await store.list_checkpoint_ids(workflow_name=recording_workflow.NAME)

    second = recording_workflow.build()
    await second.run(checkpoint_id=last, checkpoint_storage=store)
    result = await second.run([Message(role="user", contents=["two"])], checkpoint_storage=store)
    assert [o for o in result.get_outputs() if isinstance(o, str)] == ["middle saw two"]
    assert second.get_start_executor().seen == 2


async def test_a_retried_upload_that_meets_its_own_blob_is_a_success(store) -> None:
    """The SDK retries a create-only PUT whose answer was lost; the retry finds our own blob."""
    checkpoint = await make_checkpoint()
    await store.save(checkpoint)
    assert await store.save(checkpoint) == checkpoint.checkpoint_id  # same bytes and metadata: not a conflict
    assert (await store.load(checkpoint.checkpoint_id)).to_dict() == checkpoint.to_dict()


def test_the_blob_store_is_the_library_s_narrow_checkpoint_store() -> None:
    """Deletion, the sweeps and housekeeping take a ``CheckpointStore``; the blob store is one,
    and the protocol stays narrow (no container, no listing of whole bodies)."""
    assert issubclass(BlobCheckpointStorage, CheckpointStore)
    members = {name for name in vars(CheckpointStore) if not name.startswith("_")}
    assert members == {"save", "load", "load_described", "delete", "get_info", "info_page"}


async def test_get_latest_breaks_a_timestamp_tie_by_lineage_then_by_the_highest_id(store) -> None:
    """Two checkpoints can carry the same timestamp (the writers' clocks, microseconds). On a tie
    ``get_latest`` answers as the framework's own storages do from 1.26: a checkpoint another
    tied one names as its parent is superseded; among the rest, the highest ID. Before, it
    answered whichever the listing (name order) put last: here the parent."""
    parent, child, other = [await make_checkpoint() for _ in range(3)]
    parent.checkpoint_id, child.checkpoint_id = "ffff-parent", "0000-child"
    child.previous_checkpoint_id = parent.checkpoint_id
    child.timestamp = parent.timestamp
    for checkpoint in (parent, child):
        await store.save(checkpoint)
    latest = await store.get_latest(workflow_name=recording_workflow.NAME)
    assert latest is not None and latest.checkpoint_id == "0000-child"

    other.checkpoint_id, other.timestamp = "7777-unrelated", parent.timestamp
    await store.save(other)
    latest = await store.get_latest(workflow_name=recording_workflow.NAME)
    assert latest is not None and latest.checkpoint_id == "7777-unrelated"  # two leaves: the higher ID
