"""Thread pointers that are corrupt, mistyped, stale or foreign: an error, never a silent reset.

Every test goes through the registered functions against real Azurite and writes the bad
blob directly, as a bug, a botched migration or a stray tool would.
"""

from __future__ import annotations

import json
import logging

import pytest

from devtools.function_host import FunctionHost
from functions_adapter import maintenance
from functions_adapter import wiring as composition
from functions_adapter.settings import Settings
from resumable.checkpoints import cache as checkpoint_cache

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
    monkeypatch.setattr(maintenance, "ORPHAN_MIN_AGE_SECONDS", -1)
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
