"""Whose a thread's metadata is when no turn has claimed the thread (no pointer yet, or none
any more): the red-team findings on issue 38, each of which failed before the metadata
recorded its creator's origin. A missing pointer used to be anyone's: metadata made before
a first turn, or left behind when retention removed an idle thread, was readable by every
caller, and the first turn of any origin took the thread over."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from functions_adapter import wiring
from resumable.storage import layout
from resumable.storage.record_store import RecordStore
from resumable.threads import Caller
from resumable.threads.delete import delete_thread
from tests import tamper
from tests.adapter.test_conversation_delete_race import Pair, hold_metadata_write, nothing_left, pair  # noqa: F401
from tests.adapter.test_ownership_matrix import ALICE, BOB, NOBODY, SECRET, THREAD

pytestmark = pytest.mark.usefixtures("queue_env")


@pytest.fixture
async def app(two_origins: FunctionHost) -> FunctionHost:
    """The app with Alice and Bob as two origins (tests/adapter/conftest.py)."""
    return two_origins


async def call(host: FunctionHost, method: str, path: str, headers: dict[str, str], body: Any = None, query: str = ""):
    answered = await host.request(method, path, json_body=body, headers=headers, query=query)
    return answered.status, (await answered.body()).decode()


# F1 (medium) PUT /api/threads/{id}/metadata racing DELETE /api/threads/{id}: the DELETE answers 204,
# then the PUT (no If-Match) recreates thread-meta/<id>.json with no pointer: it survives the
# erasure and, pointer-less, is readable by every caller. The conversation route got the fix
# (metadata_update.update_unless_deleted); thread_api.put_metadata did not.
async def test_f1_thread_metadata_put_racing_delete_survives_and_is_open_to_all(
    pair: Pair,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    thread_id = "alice-race"
    with pair.a.active():
        ran = await pair.host.request(
            "POST", f"/api/threads/{thread_id}/runs", json_body={"messages": "hi"}, headers=ALICE
        )
    assert ran.status == 200
    deleted: list[int] = []

    async def delete_on_b() -> None:
        with pair.b.active():
            deleted.append((await pair.host.request("DELETE", f"/api/threads/{thread_id}", headers=ALICE)).status)

    held = hold_metadata_write(monkeypatch, thread_id, delete_on_b)
    with pair.a.active():
        put = await pair.host.request(
            "PUT", f"/api/threads/{thread_id}/metadata", json_body={"card": SECRET}, headers=ALICE
        )
    assert held and deleted == [204]
    with pair.b.active():
        bob = await pair.host.request("GET", f"/api/threads/{thread_id}", headers=BOB)
    bob_text = (await bob.body()).decode()
    assert bob.status == 404 and SECRET not in bob_text, (bob.status, bob_text)  # is 200 with her metadata
    assert put.status == 404, put.status  # is 200
    await nothing_left(thread_id)


# F2 (medium) Retention: the 'expire-idle-threads' lifecycle rule (infra/app/storage.bicep) deletes
# checkpoints/ and threads/ but not thread-meta/ (and pointers.forget_expired removes only the
# pointer). An idle thread's metadata then has no owner: anyone reads/rewrites/deletes it, and
# whoever sends the next first turn on the (caller-chosen, guessable) ID inherits it.
async def test_f2_an_expired_threads_metadata_is_anyones(app: FunctionHost) -> None:
    thread = await _unclaimed_with_alices_metadata(app, "expired thread")
    status, text = await call(app, "GET", f"/api/threads/{thread}", BOB)
    assert SECRET not in text, (status, text)  # is 200 {"metadata": {"card": "<secret>"}}


# F3 (medium, documented as "before its first turn a conversation takes any caller") A
# conversation made by POST /api/conversations records no origin: until its first response,
# anyone holding the ID reads its metadata, rewrites or deletes it, or takes its first turn,
# after which its creator is the one refused (403). Same for PUT metadata before a thread's
# first turn (security.md "A thread with no turn yet ... takes any caller").
async def test_f3a_alices_new_conversation_is_readable_by_bob(app: FunctionHost) -> None:
    status, text = await call(app, "POST", "/api/conversations", ALICE, {"metadata": {"note": SECRET}})
    conv = json.loads(text)["id"]
    for caller in (BOB, NOBODY):
        status, text = await call(app, "GET", f"/api/conversations/{conv}", caller)
        assert status == 403 and SECRET not in text, (caller, status, text)  # is 200 with her metadata


async def test_f3b_bob_takes_the_first_turn_of_alices_new_conversation(app: FunctionHost) -> None:
    status, text = await call(app, "POST", "/api/conversations", ALICE, {})
    conv = json.loads(text)["id"]
    status, text = await call(app, "POST", "/api/responses", BOB, {"input": "hi", "conversation": conv})
    assert status == 403, (status, text)  # is 200; Alice's next response on it is then 403
    status, text = await call(app, "POST", "/api/responses", ALICE, {"input": "hi", "conversation": conv})
    assert status == 200, (status, text)


async def test_f3c_metadata_before_first_turn_is_readable_by_bob(app: FunctionHost) -> None:
    assert (await call(app, "PUT", "/api/threads/alice-notes/metadata", ALICE, {"card": SECRET}))[0] == 200
    status, text = await call(app, "GET", "/api/threads/alice-notes", BOB)
    assert status == 403 and SECRET not in text, (status, text)  # is 200 with her metadata


def hold_pointer_write(monkeypatch: pytest.MonkeyPatch, thread_id: str, meanwhile: Callable[[], Awaitable[None]]):
    """Run ``meanwhile`` once, just before the first pointer write of ``thread_id``."""
    write = RecordStore._write
    held: list[bool] = []

    async def held_write(self: RecordStore[Any], name: str, *args: Any) -> Any:
        if self.prefix == layout.THREADS and name == thread_id and not held:
            held.append(True)
            await meanwhile()
        return await write(self, name, *args)

    monkeypatch.setattr(RecordStore, "_write", held_write)
    return held


# A first turn reads the thread (no pointer, no metadata: nobody's), runs, and only then
# writes the pointer. Metadata written in between claims the pointer for its writer, so the
# turn's swap fails (409) and no turn of another origin ever owns that metadata.
async def test_a_first_turn_under_way_cannot_take_metadata_written_meanwhile(
    app: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id = "fresh-race"
    written: list[int] = []

    async def alice_writes_metadata() -> None:
        written.append((await call(app, "PUT", f"/api/threads/{thread_id}/metadata", ALICE, {"card": SECRET}))[0])

    held = hold_pointer_write(monkeypatch, thread_id, alice_writes_metadata)
    status, text = await call(app, "POST", f"/api/threads/{thread_id}/runs", BOB, {"messages": "hi"})
    assert held and written == [200]
    assert status == 409, (status, text)  # the pointer moved under the turn: nothing was committed
    status, text = await call(app, "GET", f"/api/threads/{thread_id}", BOB)
    assert status == 403 and SECRET not in text, (status, text)
    assert (await call(app, "POST", f"/api/threads/{thread_id}/runs", BOB, {"messages": "hi"}))[0] == 403
    assert (await call(app, "POST", f"/api/threads/{thread_id}/runs", ALICE, {"messages": "hi"}))[0] == 200
    status, text = await call(app, "GET", f"/api/threads/{thread_id}", ALICE)
    assert status == 200 and json.loads(text)["metadata"] == {"card": SECRET}, (status, text)


async def _unclaimed_with_alices_metadata(app: FunctionHost, shape: str) -> str:
    """A thread no turn has claimed whose metadata Alice created: a new conversation, or a
    thread whose pointer and checkpoints retention removed."""
    if shape == "conversation":
        status, text = await call(app, "POST", "/api/conversations", ALICE, {"metadata": {"note": SECRET}})
        assert status == 200, text
        return json.loads(text)["id"]
    assert (await call(app, "POST", f"/api/threads/{THREAD}/runs", ALICE, {"messages": "hello"}))[0] == 200
    assert (await call(app, "PUT", f"/api/threads/{THREAD}/metadata", ALICE, {"card": SECRET}))[0] == 200
    container = wiring.container_for(wiring.load_settings())
    async for blob in container.list_blobs():  # what the lifecycle rule removes after N idle days
        if blob.name.startswith((layout.CHECKPOINTS, layout.THREADS)):
            await container.delete_blob(blob.name)
    return THREAD


# Fail closed: when the record that says whose an unclaimed thread is cannot be read, nobody
# may read, change or claim the thread. It used to read as "no record", so the thread was
# anyone's: Bob's first turn claimed Alice's thread, after which she was the one refused.
@pytest.mark.parametrize("shape", ["conversation", "expired thread"])
async def test_an_unclaimed_thread_with_unreadable_metadata_refuses_every_caller(
    app: FunctionHost, storage_env: str, shape: str
) -> None:
    thread_id = await _unclaimed_with_alices_metadata(app, shape)
    await tamper.overwrite(storage_env, f"{layout.THREAD_METADATA}{thread_id}.json", b'{"values": "not ours')
    calls = [
        ("POST", f"/api/threads/{thread_id}/runs", {"messages": "mine now"}),
        ("POST", "/api/responses", {"input": "mine now", "conversation": thread_id}),
        ("GET", f"/api/threads/{thread_id}", None),
        ("GET", f"/api/threads/{thread_id}/history", None),
        ("GET", f"/api/conversations/{thread_id}", None),
        ("PUT", f"/api/threads/{thread_id}/metadata", {"card": "mine now"}),
        ("DELETE", f"/api/threads/{thread_id}", None),
        ("DELETE", f"/api/conversations/{thread_id}", None),
    ]
    for caller in (BOB, ALICE, NOBODY):
        for method, path, body in calls:
            status, text = await call(app, method, path, caller, body)
            assert status == 500 and json.loads(text)["error"]["code"] == "thread_unreadable", (
                caller,
                method,
                path,
                status,
                text,
            )
            assert "Traceback" not in text and SECRET not in text
    settings = wiring.load_settings()
    service = wiring.build_service(settings)
    head = await service.pointers.read(thread_id)
    assert head.unclaimed and head.checkpoint_id is None, head  # no turn claimed it
    container = wiring.container_for(settings)
    assert [b.name async for b in container.list_blobs(name_starts_with=layout.CHECKPOINTS)] == []
    # What is left to do: an operator repairs the blob, or erases the thread as maintenance.
    done = await delete_thread(container, service.pointers, thread_id, caller=Caller.MAINTENANCE, store=service.store)
    assert done.finished
    await nothing_left(thread_id)
