"""One Blob Storage client per worker process (and per event loop).

Building a client costs a TLS session and, with managed identity, a token fetch, so
it is reused across invocations. The aio client is bound to the loop it first ran
on; the Functions worker keeps one loop, but tests make one per test, so the cache
is keyed by loop as well as by target.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import failures, operation_count

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from azure.storage.blob.aio import BlobServiceClient, ContainerClient


@dataclass(frozen=True, slots=True)
class StorageTarget:
    """Where checkpoints live: a connection string, or a service URI plus identity."""

    connection_string: str | None = None
    blob_service_uri: str | None = None
    client_id: str | None = None


_clients: dict[tuple[int, StorageTarget, float], BlobServiceClient] = {}

# Called with each outgoing request (the SDK's public ``raw_request_hook``); the tests
# and the benchmark count storage operations with it. ``response_hook`` sees each
# response (``raw_response_hook``): with both, a test sees how many calls are in flight.
request_hook: Callable[[Any], None] | None = None
response_hook: Callable[[Any], None] | None = None
# Builds the transport of each new client, given the service ("blob" or "queue"); None: the
# SDK's own. ``devtools.write_faults`` wraps the real transport to inject faults at the SDK
# boundary (below the SDK's retries) and to see every write that leaves the client.
transport_hook: Callable[[str], Any] | None = None


class ForgetsRetriedErrors:
    """Mixed into the SDK's retry policy, which sees every failed attempt: it reports each
    to ``failures`` (was it sent?), then forgets it. The policy's history keeps each retried
    attempt's error, and the error's traceback holds the retry loop's frame, which holds the
    history. That cycle kept the whole calling stack (a run's workflow and checkpoint) alive
    until the cycle collector ran. Nothing reads a history entry's error, so it is not kept."""

    def increment(self, settings: dict[str, Any], *args: Any, **kwargs: Any) -> bool:
        if kwargs.get("error") is not None:  # each failed attempt, retried or not
            failures.attempt_failed(kwargs.get("request"), kwargs["error"])
        try:
            return super().increment(settings, *args, **kwargs)  # type: ignore[misc]
        finally:
            for entry in settings["history"]:
                entry.error = None


def quick_retry(linear_retry: type) -> Any:
    """Two retries half a second apart, forgetting each retried error: the SDK default backs
    off 15 s, then 18 s, far past what an HTTP caller waits; after two, a 503 with
    Retry-After lets the caller decide. ``linear_retry`` is the SDK's (blob or queue) policy."""
    policy = type("QuickRetry", (ForgetsRetriedErrors, linear_retry), {})
    return policy(backoff=0.5, retry_total=2, random_jitter_range=0.2)


def _build_client(target: StorageTarget, timeout: float) -> BlobServiceClient:
    from azure.storage.blob.aio import BlobServiceClient, LinearRetry  # noqa: PLC0415 - on first use

    options: dict[str, Any] = {
        "connection_timeout": timeout,
        "read_timeout": timeout,
        "retry_policy": quick_retry(LinearRetry),
    }
    options["raw_request_hook"] = counted_hook()
    if response_hook is not None:
        options["raw_response_hook"] = response_hook
    if transport_hook is not None:
        options["transport"] = transport_hook("blob")
    if target.connection_string:
        return BlobServiceClient.from_connection_string(target.connection_string, **options)
    # Imported only on the identity path: azure-identity is not needed for Azurite.
    from azure.identity.aio import DefaultAzureCredential  # noqa: PLC0415

    credential = DefaultAzureCredential(managed_identity_client_id=target.client_id)
    return BlobServiceClient(str(target.blob_service_uri), credential=credential, **options)


def counted_hook() -> Callable[[Any], None]:
    """Every client's request hook: the current work's operation count, then the tests' hook
    (``request_hook`` as it is when the client is built)."""
    extra = request_hook

    def hook(request: Any) -> None:
        operation_count.note(request)
        failures.attempt_made(request)
        if extra is not None:
            extra(request)

    return hook


def container_client(target: StorageTarget, container: str, *, timeout: float = 10.0) -> ContainerClient:
    """A client for ``container`` on the process-wide service client for ``target``."""
    key = (id(asyncio.get_running_loop()), target, timeout)
    client = _clients.get(key)
    if client is None:
        client = _clients[key] = _build_client(target, timeout)
    return client.get_container_client(container)


async def close_all() -> None:
    """Close every cached client (tests and scripts call this before their loop ends)."""
    clients = list(_clients.values())
    _clients.clear()
    for client in clients:
        await client.close()
