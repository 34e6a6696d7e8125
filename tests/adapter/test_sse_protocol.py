"""SSE framing: an ``id:`` on every event, and keep-alive comments while a run is silent."""

from __future__ import annotations

import asyncio

import pytest

from devtools.function_host import FunctionHost
from tests import recording_workflow


async def test_a_silent_run_sends_keepalive_comments_until_it_speaks(
    recording: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSE_KEEPALIVE_SECONDS", "0.05")
    response = await recording.request("POST", "/api/runs", json_body={"messages": "wait quietly", "stream": True})
    chunks = response.response.body_iterator
    first = await anext(chunks)
    assert first.startswith(b"id: 1\nevent: output\n")
    await asyncio.wait_for(recording_workflow.WAITING.wait(), timeout=10)
    idle = [await anext(chunks) for _ in range(3)]  # the tail is holding: only comments flow
    assert idle == [b": keep-alive\n\n"] * 3
    recording_workflow.RELEASE.set()
    rest = [chunk async for chunk in chunks if chunk != b": keep-alive\n\n"]
    assert [c.split(b"\n", 2)[:2] for c in rest] == [[b"id: 2", b"event: output"], [b"id: 3", b"event: done"]]


async def test_a_busy_run_sends_no_keepalives(recording: FunctionHost) -> None:
    response = await recording.request("POST", "/api/runs", json_body={"messages": "quick", "stream": True})
    raw = await response.body()
    assert b"keep-alive" not in raw
    assert raw.count(b"id: ") == raw.count(b"event: ") == 3


@pytest.mark.parametrize("value", ["0", "-1", "soon", "86400"])
async def test_a_bad_keepalive_setting_is_a_misconfiguration(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("SSE_KEEPALIVE_SECONDS", value)
    response = await host.request("POST", "/api/runs", json_body={"messages": "hi", "stream": True})
    assert (response.status, (await response.json())["error"]["code"]) == (500, "server_misconfigured")
