"""A loopback TCP proxy that holds every response back, to simulate slow storage."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass


@dataclass
class SlowProxy:
    server: asyncio.Server
    port: int

    async def close(self) -> None:
        self.server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.server.wait_closed(), 1)


async def start_slow_proxy(upstream_port: int, delay_seconds: float) -> SlowProxy:
    """Forward 127.0.0.1:<new port> to ``upstream_port``, delaying each response chunk."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
        try:
            while data := await reader.read(65536):
                if delay:
                    await asyncio.sleep(delay)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        await asyncio.gather(
            pipe(client_reader, upstream_writer, 0),
            pipe(upstream_reader, client_writer, delay_seconds),
        )

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return SlowProxy(server, server.sockets[0].getsockname()[1])
