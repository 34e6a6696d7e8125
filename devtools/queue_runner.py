"""Play the Functions host's queue listener for the app's queue triggers, in-process.

Core Tools cannot run here, so this does what the host's Storage Queue extension does
with host.json's ``extensions.queues`` options: receive a batch, hand each message to
the registered function with its real dequeue count, delete it on success, make it
visible again after ``visibilityTimeout`` on failure, and move it to
``<queue>-poison`` once it has failed ``maxDequeueCount`` times. Messages are
base64 (``messageEncoding``), as the host reads them.

    python -m devtools.queue_runner     # serve function_app's queue triggers until Ctrl+C
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.functions.queue import QueueMessage
from azure.storage.queue import BinaryBase64DecodePolicy, BinaryBase64EncodePolicy
from azure.storage.queue.aio import QueueClient

from devtools.function_host import FunctionHost, Trigger

ROOT = Path(__file__).resolve().parent.parent
logger = logging.getLogger(__name__)
# How long a received message stays invisible while its function runs (the host renews
# its hold on a message for as long as the function runs; ten minutes covers a test).
PROCESSING_SECONDS = 600


def _seconds(timespan: str | None, default: float) -> float:
    """host.json timespans are ``hh:mm:ss``."""
    if not timespan:
        return default
    match = re.fullmatch(r"(\d+):(\d+):(\d+(?:\.\d+)?)", timespan)
    if match is None:
        raise ValueError(f"not a timespan: {timespan!r}")
    hours, minutes, seconds = match.groups()
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


@dataclass(frozen=True)
class QueueOptions:
    max_dequeue_count: int = 5
    visibility_timeout: float = 0.0
    batch_size: int = 16
    base64: bool = True

    @classmethod
    def from_host_json(cls, path: Path) -> QueueOptions:
        queues = json.loads(path.read_text()).get("extensions", {}).get("queues", {})
        return cls(
            max_dequeue_count=int(queues.get("maxDequeueCount", 5)),
            visibility_timeout=_seconds(queues.get("visibilityTimeout"), 0.0),
            batch_size=int(queues.get("batchSize", 16)),
            base64=str(queues.get("messageEncoding", "base64")).lower() == "base64",
        )


class QueueRunner:
    """Pulls messages for every queue trigger on the ``AzureWebJobsStorage`` connection."""

    def __init__(
        self,
        host: FunctionHost,
        *,
        connection_string: str | None = None,
        host_json: Path = ROOT / "host.json",
        poll_seconds: float = 0.05,
    ) -> None:
        self._host = host
        self._connection_string = connection_string
        self.options = QueueOptions.from_host_json(host_json)
        self._poll = poll_seconds
        self._task: asyncio.Task[None] | None = None

    def _triggers(self) -> list[Trigger]:
        return [
            trigger
            for trigger in self._host.triggers.values()
            if trigger.queue_name is not None and trigger.binding.get("connection") == "AzureWebJobsStorage"
        ]

    @contextlib.asynccontextmanager
    async def _client(self, queue: str) -> AsyncIterator[QueueClient]:
        connection = self._connection_string or os.environ["AzureWebJobsStorage"]  # noqa: SIM112 - the host's name
        policies: dict[str, Any] = (
            {"message_encode_policy": BinaryBase64EncodePolicy(), "message_decode_policy": BinaryBase64DecodePolicy()}
            if self.options.base64
            else {}
        )
        async with QueueClient.from_connection_string(connection, queue, **policies) as client:
            yield client

    async def run_once(self) -> int:
        """One receive pass over every queue; the batch runs concurrently. Returns how many ran."""
        processed = 0
        for trigger in self._triggers():
            name = str(trigger.queue_name)
            async with self._client(name) as client:
                try:
                    received = [
                        message
                        async for message in client.receive_messages(
                            messages_per_page=self.options.batch_size,
                            max_messages=self.options.batch_size,
                            visibility_timeout=PROCESSING_SECONDS,
                        )
                    ]
                except ResourceNotFoundError:
                    with contextlib.suppress(ResourceExistsError):
                        await client.create_queue()
                    continue
                await asyncio.gather(*(self._process(trigger, client, name, message) for message in received))
                processed += len(received)
        return processed

    async def _process(self, trigger: Trigger, client: QueueClient, name: str, message: Any) -> None:
        body = message.content if isinstance(message.content, bytes) else str(message.content).encode()
        delivered = QueueMessage(
            id=message.id,
            body=body,
            dequeue_count=message.dequeue_count,
            insertion_time=message.inserted_on,
            expiration_time=message.expires_on,
            time_next_visible=message.next_visible_on,
            pop_receipt=message.pop_receipt,
        )
        try:
            await trigger.handler(delivered)
        except Exception as exc:  # the host logs a failed invocation and retries the message
            logger.warning("%s failed on delivery %d: %r", trigger.name, message.dequeue_count, exc)
            if message.dequeue_count >= self.options.max_dequeue_count:
                async with self._client(f"{name}-poison") as poison:
                    with contextlib.suppress(ResourceExistsError):
                        await poison.create_queue()
                    await poison.send_message(body)
                await client.delete_message(message)
            else:
                await client.update_message(message, visibility_timeout=int(self.options.visibility_timeout))
            return
        await client.delete_message(message)

    async def run_until_idle(self, *, limit_seconds: float = 30.0) -> int:
        """Run passes until one finds no visible message; return how many ran in all.

        Messages that are invisible (a retry's visibility timeout, a delayed message)
        are not waited for: a caller that wants them runs it again, or uses ``start``.
        """
        total = 0
        async with asyncio.timeout(limit_seconds):
            while processed := await self.run_once():
                total += processed
        return total

    def start(self) -> None:
        """Poll in the background until ``stop``, like the host's listener."""

        async def loop() -> None:
            while True:
                try:
                    if not await self.run_once():
                        await asyncio.sleep(self._poll)
                except Exception:
                    logger.exception("Queue runner pass failed; polling on")
                    await asyncio.sleep(self._poll)

        self._task = asyncio.get_running_loop().create_task(loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def __aenter__(self) -> QueueRunner:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def _serve() -> None:
    import function_app  # noqa: PLC0415 - the app is imported only when serving it

    async with QueueRunner(FunctionHost(function_app.app)):
        print("Serving function_app's queue triggers; Ctrl+C stops.")
        await asyncio.Event().wait()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve())
