"""A checkpoint of a thread is its thread's: no caller reaches it by its ID outside the
thread's own routes (issue 38, §1.1 and §1.2).

Checkpoint IDs are not secrets (AG-UI reply IDs and conversation item IDs carry them), so
``POST /api/runs {"checkpoint_id": ...}`` and ``GET /api/checkpoints/{id}`` must not read,
run or copy another origin's thread state. ``POST /api/runs`` refuses a thread's checkpoint
for every caller, its owner included (the owner forks through the thread's own route), so no
thread-less copy of a thread's state can outlive the thread's deletion.
"""

from __future__ import annotations

from typing import Any

import pytest
from azure.core.exceptions import ResourceNotFoundError

from devtools.function_host import FunctionHost
from functions_adapter import wiring

SECRET = "my card number is 4111-1111"
ALICE = {"x-caller": "alice"}
BOB = {"x-caller": "bob"}
NOBODY: dict[str, str] = {}


@pytest.fixture
def principals(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> FunctionHost:
    """The app with a gateway's principal header trusted (each principal is an origin)."""
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    return host


async def _checkpoints() -> dict[str, dict[str, str]]:
    """Every checkpoint blob and its metadata, as storage holds them."""
    container = wiring.container_for(wiring.load_settings())
    try:
        return {
            b.name: dict(b.metadata or {})
            async for b in container.list_blobs(name_starts_with="checkpoints/", include=["metadata"])
        }
    except ResourceNotFoundError:
        return {}


async def _alice_thread(host: FunctionHost, thread: str = "alice-t1") -> str:
    """Alice's thread with her secret in it; its head checkpoint's ID."""
    answered = await host.request("POST", f"/api/threads/{thread}/runs", json_body={"messages": SECRET}, headers=ALICE)
    assert answered.status == 200, await answered.body()
    return str((await answered.json())["checkpoint_id"])


def _refused_run(status: int, body: dict[str, Any]) -> bool:
    return status == 409 and body["error"]["code"] == "checkpoint_in_thread"


@pytest.mark.parametrize("caller", [BOB, NOBODY], ids=["bob", "anonymous"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_another_caller_cannot_resume_a_thread_s_checkpoint_by_id(
    principals: FunctionHost, caller: dict[str, str], stream: bool
) -> None:
    head = await _alice_thread(principals)
    before = await _checkpoints()
    body = {"checkpoint_id": head, "messages": "what did I say?", "stream": stream}
    answered = await principals.request("POST", "/api/runs", json_body=body, headers=caller)
    raw = await answered.body()
    assert b"4111" not in raw
    assert _refused_run(answered.status, await answered.json()), raw
    assert await _checkpoints() == before  # nothing ran: no copy of her state was written


@pytest.mark.parametrize("caller", [BOB, NOBODY], ids=["bob", "anonymous"])
async def test_another_caller_cannot_resume_a_thread_s_checkpoint_in_the_background(
    principals: FunctionHost, caller: dict[str, str], queue_env: str
) -> None:
    head = await _alice_thread(principals)
    before = await _checkpoints()
    body = {"checkpoint_id": head, "messages": "what did I say?", "background": True}
    answered = await principals.request("POST", "/api/runs", json_body=body, headers=caller)
    assert _refused_run(answered.status, await answered.json()), await answered.body()
    assert await _checkpoints() == before


async def test_the_owner_forks_through_the_thread_not_through_api_runs(principals: FunctionHost) -> None:
    """Alice herself is refused too (a thread-less copy of her thread would outlive its
    deletion); the refusal names the route that forks, and that route works."""
    head = await _alice_thread(principals)
    answered = await principals.request(
        "POST", "/api/runs", json_body={"checkpoint_id": head, "messages": "again"}, headers=ALICE
    )
    refusal = await answered.json()
    assert _refused_run(answered.status, refusal), refusal
    assert "from_checkpoint_id" in refusal["error"]["message"]
    fork = {"from_checkpoint_id": head, "messages": "again"}
    forked = await principals.request("POST", "/api/threads/alice-t1/runs", json_body=fork, headers=ALICE)
    assert forked.status == 200, await forked.body()
    bob = await principals.request("POST", "/api/threads/alice-t1/runs", json_body=fork, headers=BOB)
    assert (bob.status, (await bob.json())["error"]["code"]) == (403, "forbidden")


async def test_a_thread_less_checkpoint_still_resumes_by_id(principals: FunctionHost) -> None:
    """What ``/api/runs`` made without a thread stays resumable by its ID, as documented."""
    first = await principals.request("POST", "/api/runs", json_body={"messages": "hi"}, headers=ALICE)
    assert first.status == 200
    resumed = await principals.request(
        "POST", "/api/runs", json_body={"checkpoint_id": (await first.json())["checkpoint_id"], "messages": "again"}
    )
    assert resumed.status == 200, await resumed.body()


@pytest.mark.parametrize("caller", [BOB, NOBODY], ids=["bob", "anonymous"])
async def test_another_caller_cannot_read_a_thread_s_checkpoint(
    principals: FunctionHost, caller: dict[str, str]
) -> None:
    head = await _alice_thread(principals)
    mine = await principals.request("GET", f"/api/checkpoints/{head}", headers=ALICE)
    assert mine.status == 200 and (await mine.json())["thread_id"] == "alice-t1"
    theirs = await principals.request("GET", f"/api/checkpoints/{head}", headers=caller)
    body = await theirs.json()
    assert (theirs.status, body["error"]["code"]) == (403, "forbidden"), body
    assert "alice-t1" not in str(body)


async def test_a_deleted_thread_s_checkpoints_are_gone_for_everyone(principals: FunctionHost) -> None:
    """Nothing of a deleted thread survives through a checkpoint ID: neither a copy made
    from it (refused above) nor the checkpoint itself."""
    head = await _alice_thread(principals)
    assert (await principals.request("DELETE", "/api/threads/alice-t1", headers=ALICE)).status == 204
    assert not [m for m in (await _checkpoints()).values() if m.get("thread_id") == "alice-t1"]
    for caller in (ALICE, BOB, NOBODY):
        read = await principals.request("GET", f"/api/checkpoints/{head}", headers=caller)
        assert read.status == 404
        run = await principals.request(
            "POST", "/api/runs", json_body={"checkpoint_id": head, "messages": "x"}, headers=caller
        )
        assert run.status == 404
    assert await _checkpoints() == {}


async def _blob_bodies() -> list[bytes]:
    container = wiring.container_for(wiring.load_settings())
    bodies = []
    async for blob in container.list_blobs():
        bodies.append(await (await container.download_blob(blob.name)).readall())
    return bodies


async def test_nothing_of_a_deleted_thread_survives_a_resume_by_its_owner(principals: FunctionHost) -> None:
    """Alice resumes her own thread's checkpoint without the thread (what a client holding a
    checkpoint ID would do): refused, so no thread-less copy of her text exists for her
    DELETE to miss; after it, no blob anywhere holds her text."""
    head = await _alice_thread(principals)
    copy = await principals.request(
        "POST", "/api/runs", json_body={"checkpoint_id": head, "messages": "keep this"}, headers=ALICE
    )
    assert copy.status == 409
    assert (await principals.request("DELETE", "/api/threads/alice-t1", headers=ALICE)).status == 204
    assert not [body for body in await _blob_bodies() if b"4111" in body]


def team_a_only(*, route: str, thread_id: str, headers: Any, metadata: Any) -> bool:
    """A custom authorizer for the test: only threads named ``a.*``."""
    return thread_id.startswith("a.")


async def test_the_authorizer_is_asked_about_a_thread_s_checkpoint(
    principals: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed, refused = await _alice_thread(principals, "a.t1"), await _alice_thread(principals, "b.t1")
    monkeypatch.setenv("THREAD_AUTHORIZER", "tests.adapter.test_checkpoint_ownership:team_a_only")
    assert (await principals.request("GET", f"/api/checkpoints/{allowed}", headers=ALICE)).status == 200
    answered = await principals.request("GET", f"/api/checkpoints/{refused}", headers=ALICE)
    assert (answered.status, (await answered.json())["error"]["code"]) == (403, "forbidden")
