"""Several workflows per app, several versions per workflow (issue 31).

Through the HTTP routes against Azurite: every checkpoint records its workflow and version;
a thread keeps its own workflow and, pinned, its version; new threads start on the newest;
an explicit move migrates; one workflow's checkpoint never restores into another's; and
choosing the version costs no storage operation.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import workflows
from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from functions_adapter import wiring
from resumable.core.catalog import WorkflowRef
from resumable.core.resume import TurnInput
from resumable.core.runs import RunRequest
from resumable.core.thread_turns import ThreadRunner
from tests.adapter.conftest import V1, V2, V3, Register
from tests.tamper import attacker_container


async def post(host: FunctionHost, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = await host.request("POST", path, json_body=body)
    return response.status, await response.json()


async def turn(host: FunctionHost, thread: str, body: dict[str, Any] | str) -> dict[str, Any]:
    status, answer = await post(
        host, f"/api/threads/{thread}/runs", {"messages": body} if isinstance(body, str) else body
    )
    assert status == 200, answer
    return answer


async def recorded(host: FunctionHost, checkpoint_id: str) -> tuple[str | None, str | None]:
    response = await host.request("GET", f"/api/checkpoints/{checkpoint_id}")
    info = await response.json()
    return info["workflow"], info["workflow_version"]


def reply(answer: dict[str, Any]) -> str:
    return answer["messages"][-1]["content"]


async def test_an_unversioned_app_records_its_workflow_as_v1(host: FunctionHost) -> None:
    answer = await turn(host, "t-plain", "hello")
    assert await recorded(host, answer["checkpoint_id"]) == ("default", "v1")


async def test_pinned_threads_stay_and_new_threads_start_on_the_newest(host: FunctionHost, register: Register) -> None:
    register(v1=V1)
    await turn(host, "old", "hello")
    register(v1=V1, v2=V2)  # redeployed with v2, pinned
    again = await turn(host, "old", "again")
    assert reply(again).startswith('turn 2: you said "again"')  # v1's graph, its state intact
    assert await recorded(host, again["checkpoint_id"]) == ("default", "v1")
    fresh = await turn(host, "new", "hello")
    assert reply(fresh).startswith("[v2] turn 1")
    assert await recorded(host, fresh["checkpoint_id"]) == ("default", "v2")


async def test_upgrade_migrates_through_every_version_in_order(host: FunctionHost, register: Register) -> None:
    register(v1=V1)
    await turn(host, "t", "hello")
    register("upgrade", v1=V1, v2=V2, v3=V3)
    moved = await turn(host, "t", "again")
    assert reply(moved) == '[v3] turn 2: you said "again". Earlier you said: "hello"'
    assert await recorded(host, moved["checkpoint_id"]) == ("default", "v3")


async def test_an_explicit_move_migrates_and_a_thread_never_moves_back(host: FunctionHost, register: Register) -> None:
    register(v1=V1)
    await turn(host, "t", "hello")
    register(v1=V1, v2=V2)
    moved = await turn(host, "t", {"messages": "again", "workflow": "default@v2"})
    assert reply(moved).startswith("[v2] turn 2")
    stays = await turn(host, "t", "third")  # pinned, now to v2
    assert reply(stays).startswith("[v2] turn 3")
    status, body = await post(host, "/api/threads/t/runs", {"messages": "back", "workflow": "default@v1"})
    assert (status, body["error"]["code"]) == (409, "workflow_mismatch")


async def test_a_turn_with_only_a_newer_version_moves_an_idle_thread(host: FunctionHost, register: Register) -> None:
    register(v1=V1)
    await turn(host, "t", "hello")
    register(v1=V1, v2=V2)
    moved = await turn(host, "t", {"workflow": "default@v2"})
    assert moved["messages"] == [] and await recorded(host, moved["checkpoint_id"]) == ("default", "v2")
    assert reply(await turn(host, "t", "again")) == '[v2] turn 2: you said "again". Earlier you said: "hello"'


async def failed_upgrade(host: FunctionHost, register: Register, spec: str) -> dict[str, Any]:
    """A v1 thread's upgrade to ``spec`` (whose migration fails): 500 ``migration_failed``,
    the thread's head unchanged. Returns the error."""
    register(v1=V1)
    first = await turn(host, "t", "hello")
    register("upgrade", v1=V1, v2=spec)
    status, body = await post(host, "/api/threads/t/runs", {"messages": "again"})
    assert (status, body["error"]["code"]) == (500, "migration_failed"), body
    head = await (await host.request("GET", "/api/threads/t")).json()
    assert head["checkpoint_id"] == first["checkpoint_id"]  # nothing committed
    return dict(body["error"])


async def test_a_failing_migration_is_500_and_leaves_the_thread_on_its_version(
    host: FunctionHost, register: Register
) -> None:
    error = await failed_upgrade(host, register, "tests.versioned_workflow:BROKEN_V2")
    assert "this migration has a bug" not in error["message"]
    register(v1=V1, v2="tests.versioned_workflow:BROKEN_V2")  # pinned again: v1 serves it
    assert reply(await turn(host, "t", "again")).startswith("turn 2")


async def test_a_legacy_checkpoint_without_a_version_resumes_as_the_first(
    host: FunctionHost, register: Register, storage_env: str
) -> None:
    status, first = await post(host, "/api/runs", {"messages": "hello"})  # no thread: resumable by ID
    assert status == 200, first
    legacy = uuid.uuid4().hex
    async with attacker_container(storage_env) as client:  # as written before versions existed
        source = await client.download_blob(f"checkpoints/{first['checkpoint_id']}.json")
        raw = json.loads(await source.readall())
        assert raw["metadata"].pop("workflow") == "default" and raw["metadata"].pop("workflow_version") == "v1"
        raw["checkpoint_id"] = legacy
        metadata = {k: v for k, v in (source.properties.metadata or {}).items() if not k.startswith("workflow_v")}
        metadata.pop("workflow")
        await client.upload_blob(f"checkpoints/{legacy}.json", json.dumps(raw).encode(), metadata=metadata)
    register(v1=V1, v2=V2)  # pinned: it stays on v1
    status, stays = await post(host, "/api/runs", {"checkpoint_id": legacy, "messages": "again"})
    assert status == 200, stays
    assert reply(stays).startswith("turn 2") and await recorded(host, stays["checkpoint_id"]) == ("default", "v1")
    register("upgrade", v1=V1, v2=V2)
    status, moved = await post(host, "/api/runs", {"checkpoint_id": legacy, "messages": "again"})
    assert status == 200, moved
    assert reply(moved).startswith("[v2] turn 2") and await recorded(host, moved["checkpoint_id"]) == ("default", "v2")
    register("pinned", v2=V2)  # v1 retired: it is refused as v1's, never run on v2's graph unmigrated
    status, refused = await post(host, "/api/runs", {"checkpoint_id": legacy, "messages": "again"})
    assert (status, refused["error"]["code"]) == (409, "checkpoint_incompatible"), refused
    assert refused["error"]["details"] == {"workflow": "default", "version": "v1"}


async def test_unknown_workflows_are_404_listing_the_hosted_ones(host: FunctionHost, register: Register) -> None:
    register(v1=V1, v2=V2)
    for body in ({"messages": "x", "workflow": "nope"}, {"messages": "x", "workflow": "default@v9"}):
        status, answer = await post(host, "/api/runs", body)
        assert (status, answer["error"]["code"]) == (404, "workflow_not_found")
        assert answer["error"]["details"]["workflows"] == sorted(workflows.REGISTRY)
    status, answer = await post(host, "/api/threads/t/runs", {"messages": "x", "workflow": "nope"})
    assert (status, answer["error"]["code"]) == (404, "workflow_not_found")


async def test_a_checkpoint_of_one_workflow_never_restores_into_another(
    host: FunctionHost, register: Register, storage_env: str
) -> None:
    register(v1=V1)
    notes = await turn(host, "n", {"messages": "remember milk", "workflow": "notes"})
    assert await recorded(host, notes["checkpoint_id"]) == ("notes", "v1")
    assert reply(await turn(host, "n", "and eggs")) == "notes: ['remember milk', 'and eggs']"
    status, loose = await post(host, "/api/runs", {"messages": "remember milk", "workflow": "notes"})
    assert status == 200, loose  # a checkpoint of no thread: /api/runs resumes it by ID
    for path, body in (
        ("/api/threads/n/runs", {"messages": "x", "workflow": "default"}),
        ("/api/threads/n/runs", {"from_checkpoint_id": notes["checkpoint_id"], "messages": "x", "workflow": "default"}),
        ("/api/runs", {"checkpoint_id": loose["checkpoint_id"], "messages": "x", "workflow": "default"}),
    ):
        status, answer = await post(host, path, body)
        assert (status, answer["error"]["code"]) == (409, "workflow_mismatch"), answer
    # Metadata edited to route the blob to the default workflow's allowlist: refused unread.
    async with attacker_container(storage_env) as client:
        blob = client.get_blob_client(f"checkpoints/{notes['checkpoint_id']}.json")
        metadata = (await blob.get_blob_properties()).metadata
        await blob.set_blob_metadata({**metadata, "workflow": "default"})
    status, answer = await post(host, "/api/runs", {"checkpoint_id": notes["checkpoint_id"], "messages": "x"})
    assert (status, answer["error"]["code"]) == (422, "checkpoint_unreadable")


async def test_choosing_the_version_costs_no_storage_operation(
    ops: OperationCounter, host: FunctionHost, register: Register
) -> None:
    """The same turn on one unversioned workflow, and on a pinned and an upgraded thread
    once v2 is deployed, costs the same storage operations."""

    async def cost(thread: str, text: str) -> int:
        ops.reset()
        await turn(host, thread, text)
        return ops.total

    register(v1=V1)
    for thread in ("a", "b", "c"):
        await turn(host, thread, "hello")
    unversioned = await cost("a", "again")
    register(v1=V1, v2=V2)
    pinned = await cost("b", "again")
    register("upgrade", v1=V1, v2=V2)
    upgraded = await cost("c", "again")
    assert unversioned == pinned == upgraded > 0


async def test_the_library_move_as_documented(host: FunctionHost, register: Register) -> None:
    """docs/changing-workflows.md's library call: a turn whose request names the version."""
    register(v1=V1)
    await turn(host, "ticket-42", "hello")
    register(v1=V1, v2=V2)
    service = wiring.build_service(wiring.load_settings())
    move = RunRequest(None, TurnInput(), stream=False, origin="api", workflow=WorkflowRef("default", "v2"))
    moved = json.loads(await ThreadRunner(service, "ticket-42").run_to_json(move))
    assert await recorded(host, moved["checkpoint_id"]) == ("default", "v2")
    assert reply(await turn(host, "ticket-42", "again")).startswith("[v2] turn 2")
