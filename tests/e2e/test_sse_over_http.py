"""Server-sent events over a real socket: uvicorn, as the HTTP streaming extension runs them.

The Functions HTTP streaming extension proxies each request to an in-worker FastAPI app
served by uvicorn. devtools.local_server mounts the registered functions the same way
(scripts/serve.sh serves the app with it), and this reads the stream with a real HTTP
client, so chunking and flushing are exercised, not just the response object.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest

from devtools.function_host import FunctionHost
from devtools.local_server import asgi_app, served
from tests import recording_workflow


@asynccontextmanager
async def _served(host: FunctionHost, spec_version: str | None = None) -> AsyncIterator[str]:
    """The registered routes on uvicorn (devtools.local_server, as scripts/serve.sh serves
    them), on a free loopback port, optionally as an ASGI server of ``spec_version`` would
    call them."""
    app = asgi_app(host)
    async with served(app if spec_version is None else _with_spec_version(app, spec_version)) as url:
        yield url


@pytest.fixture
async def server(recording: FunctionHost) -> AsyncIterator[str]:
    async with _served(recording) as url:
        yield url


async def test_events_cross_the_socket_while_the_run_is_still_going(server: str) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{server}/api/runs", json={"messages": "setup"}) as response:
            first = await response.json()
        body = {"checkpoint_id": first["checkpoint_id"], "messages": "wait here"}
        headers = {"Accept": "text/event-stream"}
        async with session.post(f"{server}/api/runs", json=body, headers=headers) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/event-stream")
            assert response.headers.get("Content-Length") is None  # streamed, not buffered
            reader = response.content
            frame = (await reader.readuntil(b"\n\n")).decode()
            # The tail executor is still waiting for RELEASE: this frame crossed the socket mid-run.
            assert frame.startswith("id: 1\nevent: output\n")
            assert json.loads(frame.split("data: ", 1)[1])["output"] == "middle saw wait here"
            assert recording_workflow.GAVE_UP == []
            recording_workflow.RELEASE.set()
            rest = (await reader.read()).decode()
    names = [line.removeprefix("event: ") for line in rest.splitlines() if line.startswith("event: ")]
    assert names == ["output", "done"]
    done = json.loads(rest.rsplit("data: ", 1)[1])
    assert done["previous_checkpoint_id"] == first["checkpoint_id"]


async def test_errors_before_the_stream_are_plain_http(server: str) -> None:
    async with aiohttp.ClientSession() as session:
        body = {"checkpoint_id": "missing", "messages": "x", "stream": True}
        async with session.post(f"{server}/api/runs", json=body) as response:
            assert response.status == 404
            assert response.headers["Content-Type"] == "application/json"
            assert (await response.json())["error"]["code"] == "checkpoint_not_found"


def _with_spec_version(app, version: str):
    """The app as an ASGI server of ``version`` would call it: Starlette's disconnect
    handling differs between spec < 2.4 (cancel the response) and >= 2.4 (send raises)."""

    async def wrapped(scope, receive, send):
        if scope["type"] == "http":
            scope = {**scope, "asgi": {**scope.get("asgi", {}), "spec_version": version}}
        await app(scope, receive, send)

    return wrapped


@pytest.fixture(params=["2.3", "2.4"])
async def spec_server(recording: FunctionHost, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with _served(recording, request.param) as url:
        yield url


async def _drop_mid_stream(url: str, body: dict, headers: dict[str, str]) -> None:
    """Open a stream over a raw socket, read its first event, then close the socket."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    payload = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(
        f"POST /api/threads/dropped/runs HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(payload)}\r\n{head}\r\n".encode()
        + payload
    )
    await writer.drain()
    received = b""
    while b"event: output" not in received:
        received += await asyncio.wait_for(reader.read(4096), timeout=10)
    writer.transport.abort()  # the client goes away mid-run, as a proxy timeout would
    await asyncio.sleep(0)


async def test_a_dropped_stream_frees_its_idempotency_key_and_commits_nothing(spec_server: str) -> None:
    key = {"Idempotency-Key": "dropped-1"}
    body = {"messages": "wait here"}
    await _drop_mid_stream(spec_server, body, key)
    recording_workflow.RELEASE.set()  # let the tail finish if the run were still going
    deadline = asyncio.get_running_loop().time() + 5
    async with aiohttp.ClientSession() as session:
        while True:
            async with session.post(f"{spec_server}/api/threads/dropped/runs", json=body, headers=key) as response:
                status, answer = response.status, await response.json()
            if status != 409 or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)
    # The retry is judged afresh: the dropped run committed nothing and left the key free.
    assert status == 200, answer
    assert answer["previous_checkpoint_id"] is None
    assert recording_workflow.GAVE_UP == []
