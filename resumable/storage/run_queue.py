"""The run queue: one message per background run, carrying its run ID and nothing else.

The request itself lives in the run record (``run_records``), so a message is tiny,
holds no user data and can be delivered twice harmlessly. Messages are base64 text,
the Functions queue trigger's default ``messageEncoding``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..base.errors import ConfigurationError
from . import clients as storage_client
from . import sdk
from .failures import storage_unavailable_on_failure

if TYPE_CHECKING:
    from azure.storage.queue.aio import QueueClient

# Queue names are 3-63 lowercase letters, digits and single hyphens; the host appends
# "-poison" (7 characters) for messages that exhausted their deliveries.
_QUEUE_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9]|-(?!-)){1,54}[a-z0-9]$")
POISON_SUFFIX = "-poison"


def validate_queue_name(name: str) -> str:
    if not _QUEUE_NAME.fullmatch(name):
        raise ConfigurationError(
            f"RUNS_QUEUE {name!r} is not a valid queue name: 3 to 56 lowercase letters, digits and single hyphens."
        )
    return name


@dataclass(frozen=True, slots=True)
class QueueTarget:
    """Where the run queue lives: a connection string, or a service URI plus identity."""

    connection_string: str | None = None
    queue_service_uri: str | None = None
    client_id: str | None = None


_clients: dict[tuple[int, QueueTarget, str], QueueClient] = {}


def queue_client(target: QueueTarget, name: str) -> QueueClient:
    """One client per (event loop, target, queue), like ``storage_client`` for blobs."""
    key = (id(asyncio.get_running_loop()), target, name)
    client = _clients.get(key)
    if client is None:
        # Imported on first use: the queue SDK is ~50 ms of cold start that only background
        # runs need, and every HTTP-only instance would pay it.
        from azure.storage.queue import TextBase64DecodePolicy, TextBase64EncodePolicy  # noqa: PLC0415
        from azure.storage.queue._shared.policies_async import LinearRetry  # noqa: PLC0415 - the aio retry
        from azure.storage.queue.aio import QueueClient  # noqa: PLC0415

        options: dict[str, Any] = {
            "retry_policy": storage_client.quick_retry(LinearRetry),  # as for blobs
            "connection_timeout": 10,
            "read_timeout": 10,
            "message_encode_policy": TextBase64EncodePolicy(),
            "message_decode_policy": TextBase64DecodePolicy(),
        }
        options["raw_request_hook"] = storage_client.counted_hook()  # counted with the blob operations
        if storage_client.transport_hook is not None:  # faults at the SDK boundary, in tests
            options["transport"] = storage_client.transport_hook("queue")
        if target.connection_string:
            client = QueueClient.from_connection_string(target.connection_string, name, **options)
        else:
            from azure.identity.aio import DefaultAzureCredential  # noqa: PLC0415 - identity path only

            credential = DefaultAzureCredential(managed_identity_client_id=target.client_id)
            client = QueueClient(str(target.queue_service_uri), name, credential=credential, **options)
        _clients[key] = client
    return client


async def close_all() -> None:
    clients = list(_clients.values())
    _clients.clear()
    for client in clients:
        await client.close()


class RunQueue:
    """Enqueue run IDs; the queue is created on first use if it is missing."""

    def __init__(self, target: QueueTarget, name: str) -> None:
        self._target = target
        self.name = validate_queue_name(name)

    async def enqueue(self, run_id: str, *, delay_seconds: int = 0) -> None:
        client = queue_client(self._target, self.name)
        with storage_unavailable_on_failure("enqueue run"):
            try:
                await client.send_message(run_id, visibility_timeout=delay_seconds or None)
            except sdk.ResourceNotFoundError:
                with contextlib.suppress(sdk.ResourceExistsError):
                    await client.create_queue()
                await client.send_message(run_id, visibility_timeout=delay_seconds or None)
