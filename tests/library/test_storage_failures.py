"""Was a failed storage write sent? Each way a request can fail, made real below the SDK.

``resumable.storage.failures`` tells a write that never left (nothing of it can have landed:
an outage to retry) from one that went out and lost its answer (it may have landed: an
outcome to check). Each case here points a real client, with the app's retry policy and
request hook (``clients.container_client``), at a socket that fails in one way: nothing
listening, a name that does not resolve, a TLS handshake that fails, a server that reads the
request and then closes or resets the connection, or never answers, or answers 503. The
SDK's own retries run (three attempts); the block's ``WriteAttempts`` and the caller's error
are judged. azure-core calls a connection closed or reset after the request a
``ServiceRequestError`` ("not sent") too, which is why the cause decides.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from azure.storage.blob.aio import BlobServiceClient

from devtools.azurite import ACCOUNT_KEY, Azurite, free_port
from devtools.relay_transport import RelayTransport
from resumable.base.errors import StorageUnavailable
from resumable.storage import clients
from resumable.storage.failures import never_sent, storage_unavailable_on_failure, upload_new, watching_writes

ACCOUNT = "devstoreaccount1"
Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _connection_string(scheme: str, host: str, port: int) -> str:
    return (
        f"DefaultEndpointsProtocol={scheme};AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
        f"BlobEndpoint={scheme}://{host}:{port}/{ACCOUNT}"
    )


async def _read_request(reader: asyncio.StreamReader) -> None:
    await reader.readuntil(b"\r\n\r\n")


async def _close_after_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_request(reader)
    writer.close()


async def _reset_after_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_request(reader)
    linger_zero = struct.pack("ii", 1, 0)  # close with RST, not FIN
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger_zero)
    writer.close()


async def _never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_request(reader)
    await reader.read()  # until the client gives up and closes
    writer.close()


async def _answer_503(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_request(reader)
    writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    await writer.drain()
    writer.close()


async def _not_tls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(16)  # the ClientHello's first bytes; answered with plain HTTP
    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    await writer.drain()
    writer.close()


@asynccontextmanager
async def _endpoint(kind: str) -> AsyncIterator[str]:
    """A connection string whose blob endpoint fails in the way ``kind`` names."""
    if kind == "refused":
        yield _connection_string("http", "127.0.0.1", free_port())
        return
    if kind == "dns":
        yield _connection_string("http", "no-such-host.invalid", 10000)
        return
    serve: dict[str, Serve] = {
        "tls": _not_tls,
        "closed-after-request": _close_after_request,
        "reset-after-request": _reset_after_request,
        "read-timeout": _never_answer,
        "answered-503": _answer_503,
    }
    server = await asyncio.start_server(serve[kind], "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield _connection_string("https" if kind == "tls" else "http", "127.0.0.1", port)
    finally:
        server.close()


@pytest.fixture(autouse=True)
async def no_backoff(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """The SDK still makes its three attempts, without waiting between them."""
    from azure.storage.blob.aio import LinearRetry

    monkeypatch.setattr(LinearRetry, "get_backoff_time", lambda self, settings: 0.0)
    await clients.close_all()
    yield
    await clients.close_all()


NOT_SENT = ["refused", "dns", "tls"]
SENT = ["closed-after-request", "reset-after-request", "read-timeout", "answered-503"]


@pytest.mark.parametrize("kind", NOT_SENT + SENT)
async def test_each_failure_kind_is_told_sent_or_not(kind: str) -> None:
    async with _endpoint(kind) as connection_string:
        target = clients.StorageTarget(connection_string=connection_string)
        container = clients.container_client(target, "c", timeout=0.5)
        with watching_writes() as writes, pytest.raises(StorageUnavailable) as raised:
            await upload_new(container, "checkpoints/x.json", b"{}")
    assert writes.made == 3, writes  # the SDK's three attempts, each a write
    assert writes.none_reached_storage is (kind in NOT_SENT), writes
    cause = raised.value.__cause__
    assert cause is not None
    assert never_sent(cause) is (kind in NOT_SENT), repr(cause)


async def test_a_read_that_fails_counts_no_write() -> None:
    """Only writes can land: a failed read inside the block leaves it with nothing sent."""
    async with _endpoint("reset-after-request") as connection_string:
        container = clients.container_client(clients.StorageTarget(connection_string=connection_string), "c")
        with watching_writes() as writes, pytest.raises(StorageUnavailable), storage_unavailable_on_failure("read"):
            await container.get_blob_client("x").get_blob_properties()
    assert writes.made == 0 and writes.none_reached_storage


@pytest.mark.parametrize(
    ("attempts", "reached"),
    [
        (["unsent", "unsent", "unsent"], False),
        (["lost", "unsent", "unsent"], True),  # the first attempt landed; its retries could not
        (["unsent", "unsent", "lost"], True),
    ],
)
async def test_one_attempt_that_may_have_landed_makes_the_write_uncertain(
    azurite: Azurite, monkeypatch: pytest.MonkeyPatch, attempts: list[str], reached: bool
) -> None:
    """A relay below the retry policy (as ``devtools.write_faults`` injects its faults):
    ``ServiceRequestError`` with no cause is taken at its word (not sent); a lost answer
    (``ServiceResponseError``, after the request went out to a real Azurite) is not."""
    left = list(attempts)

    async def relay(service: str, inner: object, request: object, **kwargs: object) -> object:
        step = left.pop(0)
        if step == "unsent":
            raise ServiceRequestError("injected: not sent")
        await inner.send(request, **kwargs)  # type: ignore[attr-defined]
        raise ServiceResponseError("injected: landed, answer lost")

    from azure.core.pipeline.transport import AioHttpTransport

    monkeypatch.setattr(clients, "transport_hook", lambda service: RelayTransport(relay, service, AioHttpTransport()))
    await clients.close_all()
    name = f"relay{uuid.uuid4().hex[:12]}"
    async with BlobServiceClient.from_connection_string(azurite.connection_string) as admin:
        await admin.create_container(name)
    container = clients.container_client(clients.StorageTarget(connection_string=azurite.connection_string), name)
    with watching_writes() as writes, pytest.raises(StorageUnavailable):
        await upload_new(container, "checkpoints/y.json", b"{}")
    assert not left and writes.made == 3
    assert writes.none_reached_storage is not reached
