"""The development loop of ``scripts/serve.sh``: kept-alive connections answered without a
delayed-ACK wait, local storage that survives a restart, reload on save, and start-up errors
a user can act on."""

from __future__ import annotations

import asyncio
import http.client
import socket
from typing import Any

import uvicorn

from devtools.serve import _reserve


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _get(connection: http.client.HTTPConnection) -> bytes:
    connection.request("GET", "/")
    response = connection.getresponse()
    assert response.status == 200
    return response.read()


async def test_kept_alive_connections_are_accepted_with_tcp_nodelay() -> None:
    """The dev server's listening socket is one asyncio knows as TCP, so every connection it
    accepts has Nagle off: an answer written in two pieces (headers, then body) is not held
    back until the client's delayed ACK, about 40 ms per call on a kept-alive connection."""
    sock = _reserve(0)
    assert sock is not None
    server = uvicorn.Server(uvicorn.Config(_ok, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    connection = http.client.HTTPConnection("127.0.0.1", sock.getsockname()[1], timeout=30)
    try:
        while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
            await asyncio.sleep(0.01)
        assert await asyncio.to_thread(_get, connection) == b"ok"
        (accepted,) = server.server_state.connections  # the server's end of our connection
        assert accepted.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert await asyncio.to_thread(_get, connection) == b"ok"  # the same connection, kept alive
        assert len(server.server_state.connections) == 1
    finally:
        connection.close()
        server.should_exit = True
        await task
        sock.close()
