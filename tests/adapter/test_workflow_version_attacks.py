"""Attacks on workflow versions (issue 31 review): edited blob metadata, migrations that
misbehave, a rolling deploy whose instances host different versions, hostile ``workflow``
values on every entry point. Against Azurite, through the HTTP routes."""

from __future__ import annotations

from typing import Any

import pytest

import workflows
from devtools.function_host import FunctionHost
from functions_adapter import wiring
from resumable.threads import housekeeping
from tests.adapter import test_workflow_entry_points as entry_points
from tests.adapter import test_workflow_versions as versions
from tests.adapter.conftest import V1, V2, Register
from tests.adapter.test_ag_ui import agui, agui_body, user
from tests.adapter.test_workflow_entry_points import _tool, respond
from tests.adapter.test_workflow_versions import post, reply, turn
from tests.tamper import attacker_container

# The fixture those tests use (``register``, a registry per request, is the adapter conftest's).
two = entry_points.two


@pytest.mark.parametrize("kept", [(), ("workflow_version",)])
async def test_stripped_blob_metadata_never_routes_a_checkpoint_to_another_allowlist(
    host: FunctionHost, register: Register, storage_env: str, kept: tuple[str, ...]
) -> None:
    """Blob metadata is not signed: a ``notes`` checkpoint whose blob no longer names its
    workflow must not be decoded under the default workflow's allowlist."""
    register(v1=V1)
    notes = await turn(host, "n", {"messages": "remember milk", "workflow": "notes"})
    async with attacker_container(storage_env) as client:
        blob = client.get_blob_client(f"checkpoints/{notes['checkpoint_id']}.json")
        metadata = (await blob.get_blob_properties()).metadata
        stripped = {k: v for k, v in metadata.items() if k not in ("workflow", "workflow_version") or k in kept}
        await blob.set_blob_metadata(stripped)
    status, answer = await post(host, "/api/runs", {"checkpoint_id": notes["checkpoint_id"], "messages": "x"})
    assert (status, answer["error"]["code"]) == (422, "checkpoint_unreadable"), answer


async def test_a_body_that_names_a_version_its_blob_does_not_is_refused(
    host: FunctionHost, register: Register, storage_env: str
) -> None:
    """The blob's metadata chose the codec (here: none named, so the default's ``v1``); a
    body recording ``v2`` was not decoded by its own version's allowlist: refused unread."""
    register(v1=V1, v2=V2)
    fresh = await turn(host, "t", "hello")  # default@v2
    async with attacker_container(storage_env) as client:
        blob = client.get_blob_client(f"checkpoints/{fresh['checkpoint_id']}.json")
        metadata = (await blob.get_blob_properties()).metadata
        await blob.set_blob_metadata({k: v for k, v in metadata.items() if k not in ("workflow", "workflow_version")})
    status, answer = await post(host, "/api/runs", {"checkpoint_id": fresh["checkpoint_id"], "messages": "x"})
    assert (status, answer["error"]["code"]) == (422, "checkpoint_unreadable"), answer


async def test_a_fork_never_crosses_workflows_and_runs_on_its_fork_points_version(
    host: FunctionHost, register: Register
) -> None:
    """A fork rewinds to a checkpoint: pinned, it runs on the version that wrote that one
    (as documented); ``upgrade`` migrates it to the newest as any turn."""
    register(v1=V1)
    notes = await turn(host, "n", {"messages": "milk", "workflow": "notes"})
    old = await turn(host, "t", "hello")  # default@v1
    register(v1=V1, v2=V2)
    await turn(host, "t", {"messages": "again", "workflow": "default@v2"})
    status, answer = await post(
        host, "/api/threads/t/runs", {"messages": "x", "from_checkpoint_id": notes["checkpoint_id"]}
    )
    assert (status, answer["error"]["code"]) == (409, "checkpoint_not_in_thread"), answer  # not its lineage
    back = {"messages": "x", "from_checkpoint_id": old["checkpoint_id"]}
    assert reply(await turn(host, "t", back)).startswith('turn 2: you said "x"')  # v1, pinned
    register("upgrade", v1=V1, v2=V2)
    assert reply(await turn(host, "t", back)).startswith('[v2] turn 2: you said "x"')


async def test_a_migration_returning_garbage_is_migration_failed_and_commits_nothing(
    host: FunctionHost, register: Register
) -> None:
    await versions.failed_upgrade(host, register, "tests.versioned_workflow:GARBAGE_V2")


async def test_a_migration_returning_a_new_checkpoint_keeps_the_thread_lineage(
    host: FunctionHost, register: Register
) -> None:
    """The migrated turn's checkpoint follows the one it was migrated from, whatever ID the
    migration's copy carries (lineage: forks, sweeps, the ledger follow it)."""
    register(v1=V1)
    first = await turn(host, "t", "hello")
    register("upgrade", v1=V1, v2="tests.versioned_workflow:REBUILDING_V2")
    moved = await turn(host, "t", "again")
    assert reply(moved).startswith("[v2] turn 2")
    info = await (await host.request("GET", f"/api/checkpoints/{moved['checkpoint_id']}")).json()
    assert info["previous_checkpoint_id"] == first["checkpoint_id"], info


async def test_a_keyed_retry_of_an_upgrading_turn_replays_it(host: FunctionHost, register: Register) -> None:
    register(v1=V1)
    await turn(host, "t", "hello")
    register("upgrade", v1=V1, v2=V2)
    answers = []
    for _ in range(2):
        response = await host.request(
            "POST", "/api/threads/t/runs", json_body={"messages": "again"}, headers={"Idempotency-Key": "k-up"}
        )
        assert response.status == 200
        answers.append(await response.json())
    assert answers[0] == answers[1] and reply(answers[0]).startswith("[v2] turn 2")
    assert reply(await turn(host, "t", "third")).startswith("[v2] turn 3")  # migrated once, ran once


async def test_a_migration_that_edits_its_input_then_raises_leaves_nothing_behind(
    host: FunctionHost, register: Register
) -> None:
    """The warm cache keeps bytes, not decoded checkpoints: the next turn (v1 again) sees
    the state as it was saved, not as the failed migration left it."""
    await versions.failed_upgrade(host, register, "tests.versioned_workflow:SPOILING_V2")
    register(v1=V1, v2="tests.versioned_workflow:SPOILING_V2")
    assert reply(await turn(host, "t", "again")) == 'turn 2: you said "again". Earlier you said: "hello"'


async def test_an_instance_without_the_heads_version_refuses_and_never_overwrites_it(
    host: FunctionHost, register: Register
) -> None:
    """A rolling deploy: one instance hosts v2, another still only v1."""
    register(v1=V1, v2=V2)
    head = await turn(host, "t", "hello")  # a new thread: v2
    register(v1=V1)  # the instance that has not been redeployed
    for body in (
        {"messages": "x"},
        {"messages": "x", "workflow": "default"},
        {"messages": "x", "multitask": "enqueue"},
    ):
        status, answer = await post(host, "/api/threads/t/runs", body)
        assert (status, answer["error"]["code"]) == (409, "checkpoint_incompatible"), answer
    status, answer = await post(host, "/api/runs", {"checkpoint_id": head["checkpoint_id"], "messages": "x"})
    assert (status, answer["error"]["code"]) == (409, "checkpoint_incompatible"), answer
    assert (await (await host.request("GET", "/api/threads/t")).json())["checkpoint_id"] == head["checkpoint_id"]
    register(v1=V1, v2=V2)
    assert reply(await turn(host, "t", "again")).startswith("[v2] turn 2")


HOSTILE: list[Any] = [
    "",
    "a" * 65,
    "défault",
    "default\n",
    "default@v1\n",
    "@v1",
    "default@",
    "a@b@c",
    "../default",
    "default/v1",
    "default v1",
    "\x00",
    1,
    1.5,
    True,
    [],
    {},
    ["default"],
]


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
async def test_hostile_workflow_values_are_400_on_every_entry_point(two: FunctionHost, value: Any) -> None:
    for path, body in (
        ("/api/runs", {"messages": "x", "workflow": value}),
        ("/api/threads/h/runs", {"messages": "x", "workflow": value}),
    ):
        status, answer = await post(two, path, body)
        assert status == 400 and answer["error"]["code"] == "invalid_request", (path, answer)
    status, answer = await respond(two, {"model": value, "input": "x"})
    assert status == 400, answer
    result = await _tool(two, "run_turn", {"thread_id": "m", "message": "x", "workflow": value})
    assert result["isError"] and result["structuredContent"]["error"]["code"] == "invalid_request", result
    status, events = await agui(two, agui_body("g", [user("x")], forwardedProps={"workflow": value}))
    assert status == 400 or events[-1]["code"] == "invalid_request", events


async def test_a_workflow_named_outside_url_safe_characters_is_counted_as_itself(
    host: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An app from before versions whose ``WORKFLOW`` is ``"triage bot"`` (blob metadata holds
    it percent-encoded): its live threads are counted under its own name, not as unhosted."""
    monkeypatch.setattr(housekeeping, "PASS_INTERVAL_SECONDS", 0)
    monkeypatch.setitem(workflows.REGISTRY, "triage bot", V1)
    monkeypatch.setenv("WORKFLOW", "triage bot")
    wiring.workflow_spec.cache_clear()
    await turn(host, "t", "hello")
    service = wiring.build_service(wiring.load_settings())
    report = await housekeeping.run_housekeeping(
        service.store.container, service.pointers, service.store, budget_seconds=600, orphan_min_age_seconds=3600
    )
    assert report.pass_finished
    listed = await (await host.request("GET", "/api/workflows")).json()
    assert listed["unhosted"] == [], listed
    (triage,) = [w for w in listed["workflows"] if w["name"] == "triage bot"]
    assert triage["versions"][0]["live_threads"] == 1, listed
