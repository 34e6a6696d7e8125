"""Thread pointers that are corrupt, mistyped, stale or foreign: an error, never a silent reset.

Every test goes through the registered functions against real Azurite and writes the bad
blob directly, as a bug, a botched migration or a stray tool would.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable

import pytest
from agent_framework import Message

from devtools.function_host import FunctionHost
from devtools.record_faults import lose_answers
from functions_adapter import housekeeping
from functions_adapter import wiring as composition
from functions_adapter.settings import Settings
from resumable.base.errors import StorageUnavailable
from resumable.checkpoints import cache as checkpoint_cache
from resumable.checkpoints.blob_store import BlobCheckpointStorage
from resumable.checkpoints.cache import CheckpointCache, HeadCache
from resumable.core.resume import TurnInput
from resumable.core.runs import RunRequest, RunService
from resumable.core.thread_turns import ThreadRunner
from resumable.storage.blob_records import BlobRecords, RecordConflict
from resumable.storage.record_store import RecordStore
from resumable.threads.pointers import ThreadLocks, ThreadPointers

THREAD = "conv"


def service():
    return composition.build_service(Settings.from_env())


async def turn(host: FunctionHost, thread_id: str, text: str, **extra) -> tuple[int, dict]:
    response = await host.request("POST", f"/api/threads/{thread_id}/runs", json_body={"messages": text, **extra})
    if response.is_stream:
        return response.status, {"events": [e async for e in response.events()]}
    return response.status, await response.json()


async def write_blob(name: str, data: bytes) -> None:
    await service().store.container.upload_blob(name, data, overwrite=True)


async def read_blob(name: str) -> bytes:
    return await (await service().store.container.download_blob(name)).readall()


async def blob_names(prefix: str) -> list[str]:
    return [b.name async for b in service().store.container.list_blobs(name_starts_with=prefix)]


async def sweep_everything(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the registered timer with every checkpoint old enough to be swept."""
    monkeypatch.setattr(housekeeping, "ORPHAN_MIN_AGE_SECONDS", -1)
    await host.triggers["sweep_orphan_checkpoints"].handler(None)


async def orphan_of(thread_id: str) -> str:
    """Save a copy of ``thread_id``'s head under a new ID: a checkpoint no head reaches."""
    store = service().store
    orphan = await store.load((await service().pointers.read(thread_id)).checkpoint_id)
    orphan.checkpoint_id = f"orphan-of-{thread_id}"
    await store.save(orphan, thread_id=thread_id)
    return orphan.checkpoint_id


# -- unreadable pointers -------------------------------------------------------------

UNPARSEABLE = [b"{not json", b"", b"\xff\xfe", b"[1, 2]", b"null", b"{}"]


def mistyped(head: str) -> list[dict]:
    good = {"thread_id": THREAD, "checkpoint_id": head, "turns": 2, "recent_checkpoint_ids": [head]}
    tombstone = {**good, "checkpoint_id": None, "turns": 0, "recent_checkpoint_ids": [], "deleting": True}
    return [
        {**good, "checkpoint_id": 5},
        {**good, "checkpoint_id": "../../idempotency/x"},
        {**good, "turns": "two"},
        {**good, "turns": True},
        {**good, "turns": -1},
        {**good, "recent_checkpoint_ids": head},  # a string, not a list
        {**good, "recent_checkpoint_ids": [7]},
        {**good, "thread_id": "someone-else"},
        {key: value for key, value in good.items() if key != "turns"},
        # A delete's progress: only on a deleting pointer, and only as this app writes it.
        {**good, "deletion": {"phase": "checkpoints", "token": None, "found": True}},
        {**tombstone, "deletion": {"phase": "elsewhere", "token": None, "found": True}},
        {**tombstone, "deletion": {"phase": "runs", "token": "a\nb", "found": True}},
        {**tombstone, "deletion": {"phase": "runs", "token": None, "found": "yes"}},
    ]


async def two_turns(host: FunctionHost) -> str:
    assert (await turn(host, THREAD, "one"))[0] == 200
    status, body = await turn(host, THREAD, "two")
    assert status == 200
    return body["checkpoint_id"]


async def assert_unreadable_everywhere(host: FunctionHost, pointer: bytes, caplog: pytest.LogCaptureFixture) -> None:
    checkpoints = await blob_names("checkpoints/")
    with caplog.at_level(logging.ERROR):
        for stream in (False, True):
            status, body = await turn(host, THREAD, "three", stream=stream)
            assert (status, body["error"]["code"]) == (500, "thread_unreadable"), (pointer, stream)
        got = await host.request("GET", f"/api/threads/{THREAD}")
        assert (got.status, (await got.json())["error"]["code"]) == (500, "thread_unreadable")
    # Nothing restarted: the pointer is as it was and no turn saved a checkpoint.
    assert await read_blob(f"threads/{THREAD}.json") == pointer
    assert await blob_names("checkpoints/") == checkpoints
    assert any(f"threads/{THREAD}.json" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    assert "not json" not in json.dumps(body)


@pytest.mark.parametrize("pointer", UNPARSEABLE, ids=repr)
async def test_a_pointer_that_does_not_parse_is_thread_unreadable_not_a_new_thread(
    host: FunctionHost, pointer: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    await two_turns(host)
    await write_blob(f"threads/{THREAD}.json", pointer)
    await assert_unreadable_everywhere(host, pointer, caplog)


@pytest.mark.parametrize("case", range(13))
async def test_a_pointer_with_wrongly_typed_fields_is_thread_unreadable(
    host: FunctionHost, case: int, caplog: pytest.LogCaptureFixture
) -> None:
    head = await two_turns(host)
    pointer = json.dumps(mistyped(head)[case]).encode()
    await write_blob(f"threads/{THREAD}.json", pointer)
    await assert_unreadable_everywhere(host, pointer, caplog)


@pytest.mark.parametrize("pointer", [b"{not json", b"{}", b'{"checkpoint_id": 5, "turns": "x"}'], ids=repr)
async def test_the_sweep_keeps_every_checkpoint_of_a_thread_whose_pointer_it_cannot_read(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, pointer: bytes
) -> None:
    await two_turns(host)
    kept = await blob_names("checkpoints/")
    assert (await turn(host, "other", "hello"))[0] == 200
    orphan = await orphan_of("other")
    await write_blob(f"threads/{THREAD}.json", pointer)
    await sweep_everything(host, monkeypatch)
    remaining = await blob_names("checkpoints/")
    assert set(kept) <= set(remaining), "the unreadable thread's history was swept"
    assert f"checkpoints/{orphan}.json" not in remaining, "one bad pointer stopped the whole sweep"


async def test_a_stray_blob_under_threads_does_not_abort_the_sweep(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (await turn(host, "other", "hello"))[0] == 200
    orphan = await orphan_of("other")
    await write_blob("threads/notes/readme.json", b'{"note": "not a thread"}')
    await write_blob("threads/README", b"hello")
    await sweep_everything(host, monkeypatch)
    assert f"checkpoints/{orphan}.json" not in await blob_names("checkpoints/")
    assert set(await blob_names("threads/")) >= {"threads/notes/readme.json", "threads/README"}


# -- expired threads: the head is gone (retention), the pointer is not (yet) ----------


async def expire_head(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> str:
    """What a lifecycle rule can leave behind: the pointer is there, its head is deleted.
    Retention deletes only what was idle for a day; a checkpoint that old is one no cache
    answers for, so the test makes every checkpoint that old."""
    monkeypatch.setattr(checkpoint_cache, "RETENTION_SAFE_SECONDS", 0.0)
    head = await two_turns(host)
    await service().store.container.delete_blob(f"checkpoints/{head}.json")
    return head


@pytest.mark.parametrize("stream", [False, True])
async def test_a_turn_on_an_expired_thread_is_410_then_the_thread_starts_afresh(
    host: FunctionHost, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = await expire_head(host, monkeypatch)
    status, body = await turn(host, THREAD, "three", stream=stream)
    assert (status, body["error"]["code"]) == (410, "thread_expired")
    assert head not in json.dumps(body), "the caller never named that checkpoint"
    assert f"threads/{THREAD}.json" not in await blob_names("threads/"), "the stale pointer must go"
    status, body = await turn(host, THREAD, "again")
    assert status == 200
    assert body["previous_checkpoint_id"] is None
    thread = await (await host.request("GET", f"/api/threads/{THREAD}")).json()
    assert (thread["checkpoint_id"], thread["turns"]) == (body["checkpoint_id"], 1)


async def test_get_on_an_expired_thread_says_expired(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    await expire_head(host, monkeypatch)
    got = await host.request("GET", f"/api/threads/{THREAD}")
    assert (got.status, (await got.json())["error"]["code"]) == (410, "thread_expired")


async def test_an_expired_thread_is_not_removed_if_its_pointer_moved_meanwhile(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stale pointer is deleted only if it is still the one that named the missing head."""
    await expire_head(host, monkeypatch)
    pointers = service().pointers
    stale = await pointers.read(THREAD)
    # Another worker already removed the stale pointer and started the thread again.
    await service().store.container.delete_blob(f"threads/{THREAD}.json")
    assert (await turn(host, THREAD, "fresh"))[0] == 200
    fresh = await pointers.read(THREAD)
    assert await pointers.forget_expired(stale) is False
    assert (await pointers.read(THREAD)).checkpoint_id == fresh.checkpoint_id


# -- a pointer write that landed, its answer lost, and another instance on top --------


@contextlib.contextmanager
def landed_then_overtaken(monkeypatch: pytest.MonkeyPatch, thread_id: str, rival: Callable[[], Awaitable[None]]):
    """The next write of ``thread_id``'s pointer lands; then another instance commits a turn
    on top of it; then the writer is told 412 (the SDK retried the landed write and met it).
    Injected at the raw record write, under the one write helper."""
    original = BlobRecords.replace
    hit: list[str] = []

    async def write(self: BlobRecords, name: str, data: dict, etag: str):
        record = await original(self, name, data, etag)
        if not hit and self._prefix == "threads/" and name == thread_id:
            hit.append(name)
            await rival()
            raise RecordConflict(name)
        return record

    with monkeypatch.context() as patch:
        patch.setattr(BlobRecords, "replace", write)
        yield hit


def other_instance():
    base = service()
    container = base.store.container
    store = BlobCheckpointStorage(
        container, base.store.codec, base.store.mac, CheckpointCache(), codec_for=base.store.codec_for
    )
    return RunService(store, base.spec, ThreadPointers(container, HeadCache()))


@pytest.mark.parametrize("stream", [False, True])
async def test_a_turn_whose_pointer_write_landed_is_applied_even_when_another_commits_on_top(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """Its checkpoint is now the parent of the head: the turn is applied (never 409 "not
    applied"), its checkpoint stays, and a keyed retry replays it instead of running it again."""
    await two_turns(host)
    rival_ids: list[str] = []

    async def rival() -> None:
        # Another instance of the app, serving a function-key caller (origin "api") too.
        request = RunRequest(None, TurnInput(messages=[Message(role="user", contents=["rival"])]), False, origin="api")
        done = await ThreadRunner(other_instance(), THREAD, ThreadLocks()).run_to_json(request)
        rival_ids.append(json.loads(done)["checkpoint_id"])

    key = {"Idempotency-Key": f"lost-answer-{stream}"}
    body = {"messages": "mine", "stream": stream}
    with landed_then_overtaken(monkeypatch, THREAD, rival) as hit:
        response = await host.request("POST", f"/api/threads/{THREAD}/runs", json_body=body, headers=key)
        if stream:
            events = [e async for e in response.events()]
            status, mine = response.status, events[-1][1]
            assert events[-1][0] == "done", events[-1]
        else:
            status, mine = response.status, await response.json()
    assert hit and rival_ids, "the fault must have hit"
    assert status == 200, mine
    head = await service().pointers.read(THREAD)
    assert head.checkpoint_id == rival_ids[0]
    assert mine["checkpoint_id"] in head.recent
    assert (await service().store.get_info(rival_ids[0])).previous_checkpoint_id == mine["checkpoint_id"]
    await service().store.get_info(mine["checkpoint_id"])  # not deleted: it is the head's parent
    again = await host.request("POST", f"/api/threads/{THREAD}/runs", json_body=body, headers=key)
    if stream:
        replayed = [e async for e in again.events()][-1][1]
    else:
        replayed = await again.json()
    assert again.status == 200 and replayed["checkpoint_id"] == mine["checkpoint_id"]
    assert (await service().pointers.read(THREAD)).turns == head.turns, "the retry ran the turn again"


@pytest.mark.parametrize("error", ["conflict", "unavailable"])
async def test_a_pointer_write_whose_answer_was_lost_is_applied(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, error: str
) -> None:
    """At the one write helper: the SDK's retry met the landed write, or the answer timed out."""
    await two_turns(host)
    with lose_answers(monkeypatch, "threads/", name=THREAD, error=error) as hits:
        status, body = await turn(host, THREAD, "three")
    assert hits.writes and status == 200, body
    head = await service().pointers.read(THREAD)
    assert (head.checkpoint_id, head.turns) == (body["checkpoint_id"], 3)


async def test_when_the_pointer_cannot_be_read_after_a_lost_answer_the_turn_is_not_reported_lost(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outcome unknown: 500 ``outcome_unknown`` (never a retryable 503, whose blind retry would
    apply the turn twice), and the checkpoint (which may now be the head) is kept."""
    await two_turns(host)
    original_get = BlobRecords.get
    down: list[bool] = []

    async def get(self: BlobRecords, name: str):
        if down and self._prefix == "threads/":
            raise StorageUnavailable("down")
        return await original_get(self, name)

    with (
        lose_answers(monkeypatch, "threads/", name=THREAD, error="unavailable") as hits,
        monkeypatch.context() as patch,
    ):
        patch.setattr(BlobRecords, "get", get)
        lost_write = RecordStore._write

        async def then_down(self, *args):
            try:
                return await lost_write(self, *args)
            finally:
                down.append(True)

        patch.setattr(RecordStore, "_write", then_down)
        status, body = await turn(host, THREAD, "three")
    assert hits.writes
    assert (status, body["error"]["code"]) == (500, "outcome_unknown")
    head = await service().pointers.read(THREAD)
    assert head.turns == 3, "the write landed"
    await service().store.get_info(head.checkpoint_id)  # and its checkpoint was not deleted


# -- did a checkpoint commit? (one answer for the commit checks and forks) -----------------


async def test_a_lineage_checkpoint_counts_as_committed_whatever_the_writers_clocks(host: FunctionHost) -> None:
    """One turn came from an instance whose clock ran an hour slow: its checkpoint looks older
    than the first turn's. The lineage still holds the first turn (past the ten recent ones),
    and a lost race's leftover beside it is still not committed."""
    first = (await turn(host, THREAD, "one"))[1]["checkpoint_id"]
    await turn(host, THREAD, "two")
    svc = service()
    head = await svc.pointers.read(THREAD)
    skewed = await svc.store.load(head.checkpoint_id)
    skewed.previous_checkpoint_id, skewed.checkpoint_id = head.checkpoint_id, "from-a-slow-clock"
    skewed.timestamp = "2000-01-01T00:00:00+00:00"
    await svc.store.save(skewed, thread_id=THREAD)
    await svc.pointers.advance(head, skewed.checkpoint_id)
    leftover = await svc.store.load(first)
    leftover.checkpoint_id = "a-lost-race"  # a child of the first turn that never committed
    await svc.store.save(leftover, thread_id=THREAD)
    for i in range(10):
        assert (await turn(host, THREAD, f"later {i}"))[0] == 200
    head = await svc.pointers.read(THREAD)
    assert first not in head.recent and "from-a-slow-clock" not in head.recent
    assert await svc.is_committed(first, THREAD)
    assert await svc.is_committed("from-a-slow-clock", THREAD)
    assert not await svc.is_committed("a-lost-race", THREAD)
