"""The warm-instance cache: what it saves, and the rule that it never answers for a
checkpoint another instance could not read (``resumable/checkpoints/cache.py``).

"Another instance" is a ``RunService`` with caches of its own, on the same container.
"""

from __future__ import annotations

import json
import os
import time
import tracemalloc
import uuid

import pytest
from agent_framework import Message

from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from functions_adapter import wiring
from functions_adapter.settings import Settings
from resumable.base.errors import StorageUnavailable
from resumable.checkpoints import cache as checkpoint_cache
from resumable.checkpoints.blob_store import BlobCheckpointStorage
from resumable.checkpoints.cache import CachedBlob, CheckpointCache, HeadCache
from resumable.core.resume import TurnInput
from resumable.core.runs import RunRequest, RunService
from resumable.core.thread_turns import ThreadRunner
from resumable.storage import failures as storage
from resumable.threads.pointers import ThreadLocks, ThreadPointers
from tests.adapter.test_threads import lineage


async def post(host: FunctionHost, url: str, body: dict, **headers: str) -> tuple[int, dict]:
    response = await host.request("POST", url, json_body=body, headers=headers)
    return response.status, await response.json()


def this_instance() -> RunService:
    return wiring.build_service(Settings.from_env())


def other_instance() -> RunService:
    """A second worker: the same container, caches of its own."""
    base = this_instance()
    container = base.store.container
    store = BlobCheckpointStorage(
        container, base.store.codec, base.store.mac, CheckpointCache(), codec_for=base.store.codec_for
    )
    return RunService(store, base.spec, ThreadPointers(container, HeadCache()))


async def turn_on(service: RunService, thread_id: str, text: str) -> dict:
    # The app's turns come from a function-key caller (origin "api"): so do these.
    request = RunRequest(None, TurnInput(messages=[Message(role="user", contents=[text])]), False, origin="api")
    return json.loads(await ThreadRunner(service, thread_id, ThreadLocks()).run_to_json(request))


# -- what a warm instance saves ------------------------------------------------------------


async def test_a_warm_resume_reads_nothing_and_a_warm_thread_turn_costs_two(
    host: FunctionHost, ops: OperationCounter
) -> None:
    _, start = await post(host, "/api/runs", {"messages": "hello"})
    ops.reset()
    status, _ = await post(host, "/api/runs", {"checkpoint_id": start["checkpoint_id"], "messages": "again"})
    assert status == 200
    assert dict(ops.counts) == {"PUT": 1}, ops.log  # the new checkpoint; the old one came from memory
    resume = dict(ops.counts)
    assert (await post(host, "/api/threads/warm/runs", {"messages": "one"}))[0] == 200
    ops.reset()
    status, second = await post(host, "/api/threads/warm/runs", {"messages": "two"})
    assert status == 200
    assert [method for method, _ in ops.log] == ["PUT", "PUT"]  # the checkpoint, then the pointer's swap
    head = await this_instance().pointers.read("warm")
    assert (head.checkpoint_id, head.turns) == (second["checkpoint_id"], 2)
    print(f"\n[cache] warm resume: {resume}; warm thread turn: 2 ops")


async def test_a_cached_checkpoint_is_still_verified_and_guarded_on_every_use(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is kept is the blob as stored: a MAC required after it was cached refuses it,
    exactly as it refuses the same blob downloaded."""
    _, start = await post(host, "/api/runs", {"messages": "hello"})  # saved (and cached) unsigned
    monkeypatch.setenv("CHECKPOINT_MAC_KEYS", "k1:" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=")
    status, body = await post(host, "/api/runs", {"checkpoint_id": start["checkpoint_id"], "messages": "again"})
    assert (status, body["error"]["code"]) == (422, "checkpoint_unreadable")


def test_the_cache_is_bounded_in_bytes_and_keeps_nothing_when_off() -> None:
    cache = CheckpointCache(max_bytes=10_000)

    def blob(size: int) -> CachedBlob:
        return CachedBlob(b"x" * size, {}, None, 9e18, 9e18)

    for i in range(10):
        cache.put("c", f"id{i}", blob(1_000))
    assert cache.size <= 10_000
    assert cache.find("c", "id0", head_of=None) is None  # the least recently used went first
    assert cache.find("c", "id9", head_of=None) is not None
    cache.put("c", "huge", blob(3_000))  # over a quarter of the cache: not kept
    assert cache.find("c", "huge", head_of=None) is None
    cache.resize(0)
    cache.put("c", "id1", blob(10))
    assert cache.find("c", "id1", head_of=None) is None


@pytest.mark.parametrize("size", [2 * 1024, 256 * 1024])
def test_the_byte_bound_counts_what_the_cache_really_holds(size: int) -> None:
    """``CHECKPOINT_CACHE_BYTES`` bounds memory, not blob lengths: the cache's count agrees
    with what ``tracemalloc`` sees it hold (small blobs are mostly metadata and entry), and
    a cache filled past its bound holds no more than the bound."""
    capacity = 8 * 1024 * 1024

    def metadata() -> dict[str, str]:  # fresh strings, as each storage response brings
        return json.loads(
            json.dumps(
                {
                    "workflow_name": "conversation-demo",
                    "timestamp": "2026-12-04T22:00:00.123456+00:00",
                    "previous_checkpoint_id": str(uuid.uuid4()),
                    "status": "idle",
                    "thread_id": f"thread-{uuid.uuid4().hex[:8]}",
                    "mac": "k1:" + uuid.uuid4().hex * 2,
                }
            )
        )

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = CheckpointCache(capacity)
        for _ in range(capacity // size // 2):  # half full: nothing evicted yet
            cache.put("c", str(uuid.uuid4()), CachedBlob(os.urandom(size), metadata(), None, 9e18, 9e18))
        held = tracemalloc.get_traced_memory()[0] - before
        assert abs(held - cache.size) <= 0.05 * held, f"counted {cache.size}, holds {held}"
        for _ in range(capacity // size * 2):  # twice over: the least recent go
            cache.put("c", str(uuid.uuid4()), CachedBlob(os.urandom(size), metadata(), None, 9e18, 9e18))
        held = tracemalloc.get_traced_memory()[0] - before
        assert cache.size <= capacity
        assert held <= 1.05 * capacity, f"a {capacity}-byte cache holds {held} bytes"
    finally:
        tracemalloc.stop()


# -- the rule: never answer for a checkpoint another instance could not read -------------


async def test_by_id_a_thread_checkpoint_is_never_answered_from_the_cache(host: FunctionHost) -> None:
    """Deleting a thread (here through the API, as any instance may) removes its checkpoints
    by listing, not through this cache: by ID they must then be 404 here as everywhere."""
    _, first = await post(host, "/api/threads/gone/runs", {"messages": "one"})
    assert (await host.request("DELETE", "/api/threads/gone")).status == 204
    status, body = await post(host, "/api/runs", {"checkpoint_id": first["checkpoint_id"], "messages": "x"})
    assert (status, body["error"]["code"]) == (404, "checkpoint_not_found")


async def test_a_stale_pointer_etag_costs_a_reread_and_the_turn_builds_on_the_real_head(
    host: FunctionHost, ops: OperationCounter
) -> None:
    """This instance cached the pointer; another advanced it since. The swap on the stale
    ETag fails, the turn reads the pointer and runs again on the real head: a plain
    ``reject`` turn, not a 409, because the other turn committed before this one began."""
    await post(host, "/api/threads/shared/runs", {"messages": "one"})
    elsewhere = await turn_on(other_instance(), "shared", "two")
    ops.reset()
    status, mine = await post(host, "/api/threads/shared/runs", {"messages": "three"})
    assert status == 200, mine
    spent = [method for method, _ in ops.log]
    assert mine["previous_checkpoint_id"] == elsewhere["checkpoint_id"]
    service = this_instance()
    head = await service.pointers.read("shared")
    assert (head.checkpoint_id, head.turns) == (mine["checkpoint_id"], 3)
    chain = await lineage(service, head.checkpoint_id)
    assert len(chain) == 3
    names = [b.name async for b in service.store.container.list_blobs(name_starts_with="checkpoints/")]
    assert sorted(names) == sorted(f"checkpoints/{c}.json" for c in chain)  # the stale attempt's is gone
    print(f"\n[cache] turn on a stale pointer: {len(spent)} ops {spent}")


async def test_a_stale_cached_pointer_is_judged_on_the_storage_clock_not_another_instance_s(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other instance's clock runs an hour fast, and it committed before this turn
    began: the turn still builds on the real head (200), as without the cache. The writer's
    own timestamp would make the change look newer than the turn, and answer 409."""
    await post(host, "/api/threads/skewed/runs", {"messages": "one"})
    real = time.time
    with monkeypatch.context() as patch:
        patch.setattr(time, "time", lambda: real() + 3600)
        elsewhere = await turn_on(other_instance(), "skewed", "two")
    status, mine = await post(host, "/api/threads/skewed/runs", {"messages": "three"})
    assert status == 200, mine
    assert mine["previous_checkpoint_id"] == elsewhere["checkpoint_id"]


async def test_a_thread_deleted_elsewhere_is_not_continued_from_the_cache(host: FunctionHost) -> None:
    """The pointer's swap is the proof: a delete rewrote (then removed) the pointer, so the
    warm turn commits nothing; the thread's ID then starts afresh, as on any instance."""
    await post(host, "/api/threads/deleted/runs", {"messages": "one"})
    await post(host, "/api/threads/deleted/runs", {"messages": "two"})
    other = other_instance()
    from resumable.threads.delete import delete_thread
    from resumable.threads.ownership import Caller

    assert (
        await delete_thread(
            other.store.container,
            other.pointers,
            "deleted",
            store=other.store,
            deadline_seconds=30,
            caller=Caller.MAINTENANCE,
        )
    ).finished
    status, body = await post(host, "/api/threads/deleted/runs", {"messages": "three"})
    assert (status, body["error"]["code"]) == (409, "thread_busy")  # a delete raced it: nothing committed
    names = [b.name async for b in other.store.container.list_blobs(name_starts_with="checkpoints/")]
    assert names == []
    status, body = await post(host, "/api/threads/deleted/runs", {"messages": "four"})
    assert status == 200 and body["previous_checkpoint_id"] is None


async def test_a_checkpoint_deleted_behind_the_app_s_back_is_seen_once_the_entry_is_stale(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing in the app deletes a checkpoint of no thread but retention; a blob deleted by
    hand is seen everywhere within ``FRESH_SECONDS`` (an entry answers only that long after
    this instance last met the blob in storage) and at once where the entry is older."""
    _, start = await post(host, "/api/runs", {"messages": "hello"})
    await this_instance().store.container.delete_blob(f"checkpoints/{start['checkpoint_id']}.json")
    other = other_instance()
    with pytest.raises(Exception, match="not found"):
        await other.store.load(start["checkpoint_id"])
    monkeypatch.setattr(checkpoint_cache, "FRESH_SECONDS", 0.0)
    status, body = await post(host, "/api/runs", {"checkpoint_id": start["checkpoint_id"], "messages": "x"})
    assert (status, body["error"]["code"]) == (404, "checkpoint_not_found")


async def test_retention_age_is_never_answered_from_the_cache(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention deletes only what was idle a day, so a checkpoint created over 23 h ago may
    be gone: the cache does not answer for it, however recently it was used."""
    _, start = await post(host, "/api/runs", {"messages": "hello"})
    monkeypatch.setattr(checkpoint_cache, "RETENTION_SAFE_SECONDS", 0.0)  # every checkpoint is that old
    await this_instance().store.container.delete_blob(f"checkpoints/{start['checkpoint_id']}.json")
    status, body = await post(host, "/api/runs", {"checkpoint_id": start["checkpoint_id"], "messages": "x"})
    assert (status, body["error"]["code"]) == (404, "checkpoint_not_found")


# -- an instance killed mid-write ------------------------------------------------------------


class Killed(BaseException):
    """The worker dies here (not an error the app could catch and clean up after)."""


async def test_an_instance_killed_between_save_and_pointer_swap_leaves_no_head_anywhere(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its checkpoint was saved (and cached) but the pointer never moved: neither it nor any
    other instance continues from that checkpoint; both build on the real head."""
    _, first = await post(host, "/api/threads/killed/runs", {"messages": "one"})
    original = ThreadPointers.advance

    async def die(self, head, checkpoint_id, **_):
        raise Killed()

    monkeypatch.setattr(ThreadPointers, "advance", die)
    with pytest.raises(Killed):
        await turn_on(this_instance(), "killed", "lost")
    monkeypatch.setattr(ThreadPointers, "advance", original)
    status, mine = await post(host, "/api/threads/killed/runs", {"messages": "two"})
    assert status == 200 and mine["previous_checkpoint_id"] == first["checkpoint_id"]
    elsewhere = await turn_on(other_instance(), "killed", "three")
    assert elsewhere["previous_checkpoint_id"] == mine["checkpoint_id"]
    service = this_instance()
    assert await lineage(service, elsewhere["checkpoint_id"]) == [
        elsewhere["checkpoint_id"],
        mine["checkpoint_id"],
        first["checkpoint_id"],
    ]


async def test_a_save_that_dies_mid_write_is_never_answered_from_the_cache(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A blob is cached only once storage confirmed it. A keyed call whose save fails leaves
    a claim naming a checkpoint that does not exist: the retry must run, not replay a
    response the cache would otherwise vouch for."""
    original = storage.upload_new

    async def failing(container, name, data, **kwargs):
        if name.startswith("checkpoints/"):
            raise StorageUnavailable("Checkpoint storage failed during save.")
        return await original(container, name, data, **kwargs)

    from resumable.checkpoints import blob_store

    monkeypatch.setattr(blob_store, "upload_new", failing)
    status, _ = await post(host, "/api/runs", {"messages": "pay"}, **{"Idempotency-Key": "mid-write"})
    assert status == 503
    monkeypatch.setattr(blob_store, "upload_new", original)
    status, body = await post(host, "/api/runs", {"messages": "pay"}, **{"Idempotency-Key": "mid-write"})
    assert status == 200
    info = await other_instance().store.get_info(body["checkpoint_id"])  # it really was saved this time
    assert info.checkpoint_id == body["checkpoint_id"]
