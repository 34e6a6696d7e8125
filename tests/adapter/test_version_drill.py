"""The redeploy drill (issue 31): threads on v1 in every state (idle, waiting for approval, a
background run queued, a turn running, a fork), then the app restarts with v2 registered (a
renamed executor, a new one and a changed edge: ``tests/versioned_workflow.py``) under each
policy. Every thread continues, pinned ones on v1, upgraded ones migrated and answering
through v2's graph; nothing is ``checkpoint_incompatible``; ``GET /api/workflows`` shows the
live-thread counts move as threads upgrade, and v1 goes once its count is 0.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import workflows
from devtools.function_host import FunctionHost
from devtools.instances import Instance, separate_instances
from devtools.queue_runner import QueueRunner
from functions_adapter import housekeeping as timer
from functions_adapter import version_check, wiring
from resumable.threads import housekeeping
from resumable.threads.pass_state import PassState

V1 = "workflows.default_conversation:SPEC"
V2 = "tests.versioned_workflow:SPEC_V2"


@pytest.fixture
def app(host: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FunctionHost]:
    monkeypatch.setattr(housekeeping, "PASS_INTERVAL_SECONDS", 0)  # every count below is a new pass
    deploy(monkeypatch, "pinned", v1=V1)
    yield host
    wiring.workflow_spec.cache_clear()


def deploy(monkeypatch: pytest.MonkeyPatch, policy: str, **specs: str) -> None:
    """What the app hosts from the next request on: a redeploy (the catalog is read per request)."""
    monkeypatch.setitem(workflows.REGISTRY, "default", workflows.Versions(specs, policy=policy))
    wiring.workflow_spec.cache_clear()


async def turn(host: FunctionHost, thread: str, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    response = await host.request("POST", f"/api/threads/{thread}/runs", json_body=body, headers=headers)
    answer = await response.json()
    assert response.status in (200, 202), answer
    return dict(answer)


async def counts(host: FunctionHost) -> dict[str, int | None]:
    """A full housekeeping pass, then the live threads per version of ``default``."""
    service = wiring.build_service(wiring.load_settings())
    report = await housekeeping.run_housekeeping(
        service.store.container, service.pointers, service.store, budget_seconds=600, orphan_min_age_seconds=3600
    )
    assert report.pass_finished
    listed = await (await host.request("GET", "/api/workflows")).json()
    (default,) = [w for w in listed["workflows"] if w["name"] == "default"]
    assert not listed["unhosted"]
    return {v["version"]: v["live_threads"] for v in default["versions"]}


async def running_turn(host: FunctionHost) -> AsyncIterator[tuple[str, Any]]:
    """A streamed turn that has started (its first event read) and not finished."""
    response = await host.request(
        "POST", "/api/threads/running/runs", json_body={"messages": "streaming", "stream": True}
    )
    assert response.status == 200
    return response.events()


def said(answer: dict[str, Any]) -> str:
    return answer["messages"][-1]["content"]


@pytest.mark.parametrize("policy", ["pinned", "upgrade"])
async def test_every_thread_continues_across_a_redeploy(
    app: FunctionHost, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, policy: str
) -> None:
    for thread in ("idle", "queued", "running"):
        await turn(app, thread, {"messages": "hello"})
    waiting = await turn(app, "waiting", {"messages": "I need approval"})
    (request,) = waiting["pending_requests"]
    first = await turn(app, "fork", {"messages": "one"})
    await turn(app, "fork", {"messages": "two"})
    await turn(app, "fork", {"messages": "forked", "from_checkpoint_id": first["checkpoint_id"]})
    queued = await turn(app, "queued", {"messages": "queued msg"}, Prefer="respond-async")
    stream = await running_turn(app)
    assert (await anext(stream))[0] is not None  # the turn runs on v1's graph
    assert await counts(app) == {"v1": 5}

    deploy(monkeypatch, policy, v1=V1, v2=V2)  # the restart, with v2
    events = [event async for event in stream]  # the running turn finishes where it started
    assert events[-1][0] == "done", events[-1]
    await QueueRunner(app).run_until_idle()
    background = await (await app.request("GET", f"/api/runs/{queued['run_id']}")).json()
    assert background["status"] == "succeeded", background

    tag = "[v2] " if policy == "upgrade" else ""
    assert said(background["result"]).startswith(f'{tag}turn 2: you said "queued msg"')
    assert said(await turn(app, "idle", {"messages": "next"})).startswith(f'{tag}turn 2: you said "next"')
    answered = await turn(app, "waiting", {"responses": {request["request_id"]: "yes"}})
    assert said(answered).startswith(f'{tag}turn 1: you said "I need approval". Approval answer: "yes"')
    assert said(await turn(app, "running", {"messages": "after"})).startswith(f'{tag}turn 3: you said "after"')
    forked = await turn(app, "fork", {"messages": "after"})
    assert said(forked) == f'{tag}turn 3: you said "after". Earlier you said: "one", "forked"'
    fresh = await turn(app, "fresh", {"messages": "hello"})
    assert said(fresh).startswith("[v2] turn 1")  # new threads start on the newest

    if policy == "pinned":
        assert await counts(app) == {"v1": 5, "v2": 1}
        deploy(monkeypatch, policy, v2=V2)  # a deploy that would strand the five: refused unless forced
        removed, counted_at = await version_check.removed_with_threads(wiring.load_settings())
        assert removed == ["default@v1 (5 threads)"] and counted_at is not None
        assert version_check.verdict(removed, counted_at, force=False) == 1
        assert version_check.verdict(removed, counted_at, force=True) == 0
        with caplog.at_level(logging.ERROR, logger=timer.__name__):  # deployed anyway: the timer says so
            assert (await timer.run()).pass_finished
        assert "no longer hosts: default@v1 (5 threads)" in caplog.text
        return
    assert await counts(app) == {"v1": 0, "v2": 6}
    deploy(monkeypatch, policy, v2=V2)  # v1 retired: no thread is on it any more
    assert said(await turn(app, "idle", {"messages": "last"})).startswith("[v2] turn 3")
    assert await counts(app) == {"v2": 6}
    assert (await version_check.removed_with_threads(wiring.load_settings()))[0] == []


@pytest.mark.parametrize("multitask", ["reject", "enqueue"])
async def test_two_instances_upgrading_one_thread_migrate_it_once(
    app: FunctionHost, monkeypatch: pytest.MonkeyPatch, multitask: str
) -> None:
    """Both instances meet the v1 head and migrate it; the compare-and-swap lets one commit.
    ``enqueue``: the other then runs from the v2 head the first committed (no second
    migration); ``reject``: it is 409 ``thread_busy``, its input not applied."""
    await turn(app, "raced", {"messages": "hello"})
    deploy(monkeypatch, "upgrade", v1=V1, v2=V2)
    first, second = Instance(), Instance()

    async def on(instance: Instance, text: str) -> tuple[int, dict[str, Any]]:
        with instance.active():
            body = {"messages": text, "multitask": multitask}
            response = await app.request("POST", "/api/threads/raced/runs", json_body=body)
            return response.status, await response.json()

    with separate_instances(monkeypatch):
        answers = await asyncio.gather(on(first, "from a"), on(second, "from b"))
    applied = sorted(said(body) for status, body in answers if status == 200)
    refused = [body["error"]["code"] for status, body in answers if status != 200]
    if multitask == "enqueue":
        assert [reply[:12] for reply in applied] == ["[v2] turn 2:", "[v2] turn 3:"], answers
    else:
        assert applied[0].startswith("[v2] turn 2:") and refused in ([], ["thread_busy"]), answers
    assert await counts(app) == {"v1": 0, "v2": 1}


def test_a_pass_record_from_before_versions_still_loads_and_counts_nothing_yet() -> None:
    """A rolling deploy meets the record the previous release wrote mid-pass."""
    old = {"phase": "touch", "token": None, "started_at": 1.0, "references": None, "finished_at": None, "slowest": 0.5}
    state = PassState.from_json(old)
    assert (state.counting, state.counted, state.counted_at) == ({}, None, None)
    done = state.counted_heads(Counter({"default@v1": 2, "@": 1})).after_page(None, 0.1).after_page(None, 0.1)
    assert done.phase == "done" and done.counted == {"default@v1": 2, "@": 1} and done.counting == {}
    assert PassState.from_json(done.to_json()).next_pass().counted == done.counted
    with pytest.raises(TypeError):
        PassState.from_json({**old, "counting": {"default@v1": "2"}})
