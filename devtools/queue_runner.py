"""Play the Functions host's queue listener for the app's queue triggers, in-process.

Core Tools cannot run here, so this does what the host's Storage Queue extension does
with host.json's ``extensions.queues`` options: receive a batch, hand each message to
the registered function with its real dequeue count, delete it on success, make it
visible again after ``visibilityTimeout`` on failure, and move it to
``<queue>-poison`` once it has failed ``maxDequeueCount`` times (or straight away,
uninvoked, if it arrives with more deliveries than that, as after a crash mid-run).
Messages are base64 (``messageEncoding``), as the host reads them.

    python -m devtools.queue_runner     # serve function_app's queue triggers until Ctrl+C

The command line reads local.settings.json's ``Values`` (as ``func start`` does) for any
setting not already in the environment.
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
from resumable.storage.run_queue import POISON_SUFFIX

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
    """host.json ``extensions.queues``, with the host's defaults for what it leaves out."""

    max_dequeue_count: int = 5
    visibility_timeout: float = 0.0
    batch_size: int = 16
    base64: bool = True
    max_polling_interval: float = 60.0

    @classmethod
    def from_host_json(cls, path: Path) -> QueueOptions:
        queues = json.loads(path.read_text()).get("extensions", {}).get("queues", {})
        return cls(
            max_dequeue_count=int(queues.get("maxDequeueCount", 5)),
            visibility_timeout=_seconds(queues.get("visibilityTimeout"), 0.0),
            batch_size=int(queues.get("batchSize", 16)),
            base64=str(queues.get("messageEncoding", "base64")).lower() == "base64",
            max_polling_interval=_seconds(queues.get("maxPollingInterval"), 60.0),
        )


class QueueRunner:
    """Pulls messages for every queue trigger on the ``AzureWebJobsStorage`` connection.

    ``connection_string`` defaults to the ``AzureWebJobsStorage`` setting, read when a
    pass runs. The background loop (``start``/``stop`` or ``async with``) polls every
    ``poll_seconds`` while busy and backs off, doubling, to ``max_poll_seconds`` while
    idle, as the host backs off to ``maxPollingInterval``; the default ceiling is that
    setting capped at 1 s, so a demo or a test never waits long.
    """

    def __init__(
        self,
        host: FunctionHost,
        *,
        connection_string: str | None = None,
        host_json: Path = ROOT / "host.json",
        poll_seconds: float = 0.05,
        max_poll_seconds: float | None = None,
    ) -> None:
        self._host = host
        self._connection_string = connection_string
        self.options = QueueOptions.from_host_json(host_json)
        self._poll = poll_seconds
        self._max_poll = max(
            poll_seconds, min(self.options.max_polling_interval, 1.0) if max_poll_seconds is None else max_poll_seconds
        )
        self._task: asyncio.Task[None] | None = None

    def _triggers(self) -> list[Trigger]:
        return [
            trigger
            for trigger in self._host.queue_triggers()
            if trigger.binding.get("connection") == "AzureWebJobsStorage"
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
        """One receive pass over every queue, side by side; each queue's batch (up to
        ``batchSize``) runs concurrently. Returns how many messages were handled."""
        counts = await asyncio.gather(*(self._pass(trigger) for trigger in self._triggers()))
        return sum(counts)

    async def _pass(self, trigger: Trigger) -> int:
        name = str(trigger.queue_name)  # a missing %SETTING% raises here, as the host refuses to start
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
            except ResourceNotFoundError:  # the host creates a trigger's queue if it is missing
                with contextlib.suppress(ResourceExistsError):
                    await client.create_queue()
                return 0
            await asyncio.gather(*(self._process(trigger, client, name, message) for message in received))
            return len(received)

    async def _poison(self, client: QueueClient, name: str, message: Any, body: bytes) -> None:
        """Copy the message's text to ``<queue>-poison``, then delete the original."""
        async with self._client(name + POISON_SUFFIX) as poison:
            with contextlib.suppress(ResourceExistsError):
                await poison.create_queue()
            await poison.send_message(body)
        await client.delete_message(message)

    async def _process(self, trigger: Trigger, client: QueueClient, name: str, message: Any) -> None:
        body = message.content if isinstance(message.content, bytes) else str(message.content).encode()
        if message.dequeue_count > self.options.max_dequeue_count:
            # Delivered more often than allowed without a verdict (a run that crashed or
            # outlived its hold): the host poisons it without invoking the function again.
            logger.warning("%s: message %s exceeded maxDequeueCount; poisoned", trigger.name, message.id)
            await self._poison(client, name, message, body)
            return
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
            await self._host.invoke_queue_trigger(trigger.name, delivered)
        except Exception as exc:  # the host logs a failed invocation and retries the message
            logger.warning("%s failed on delivery %d: %r", trigger.name, message.dequeue_count, exc)
            if message.dequeue_count >= self.options.max_dequeue_count:
                await self._poison(client, name, message, body)
            else:
                await client.update_message(message, visibility_timeout=int(self.options.visibility_timeout))
            return
        await client.delete_message(message)

    async def run_until_idle(
        self,
        *,
        timeout: float = 30.0,  # noqa: ASYNC109 - a drain budget for tests and demos
        limit_seconds: float | None = None,
    ) -> int:
        """Run passes until one handles nothing; return how many were handled in all.

        Invisible messages (a failed delivery waiting out ``visibilityTimeout``, a
        delayed send) are not waited for: call it again later, or use ``start``. With
        ``visibilityTimeout`` 0 a retry is visible at once, so retries and poisoning
        finish inside one call. ``limit_seconds`` is the older name of ``timeout``;
        past it, TimeoutError.
        """
        total = 0
        async with asyncio.timeout(timeout if limit_seconds is None else limit_seconds):
            while processed := await self.run_once():
                total += processed
        return total

    def start(self) -> None:
        """Poll in the background until ``stop``, like the host's listener."""
        if self._task is not None:
            raise RuntimeError("the queue runner is already running")

        async def loop() -> None:
            delay = self._poll
            while True:
                try:
                    busy = await self.run_once()
                except Exception:
                    logger.exception("Queue runner pass failed; polling on")
                    busy = 0
                delay = self._poll if busy else min(delay * 2, self._max_poll)
                await asyncio.sleep(0 if busy else delay)

        self._task = asyncio.get_running_loop().create_task(loop())

    @property
    def running(self) -> bool:
        return self._task is not None

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


def load_local_settings(path: Path = ROOT / "local.settings.json") -> None:
    """Put local.settings.json's ``Values`` into the environment, as ``func start`` does;
    a variable already set wins."""
    if path.exists():
        for name, value in json.loads(path.read_text()).get("Values", {}).items():
            os.environ.setdefault(name, str(value))


async def _serve() -> None:
    load_local_settings()
    import function_app  # noqa: PLC0415 - the app is imported only when serving it
    from resumable.storage import clients as storage_client  # noqa: PLC0415 - the app's clients, closed on exit
    from resumable.storage import run_queue  # noqa: PLC0415 - the app's clients, closed on exit

    try:
        async with QueueRunner(FunctionHost(function_app.app)):
            print("Serving function_app's queue triggers; Ctrl+C stops.")
            await asyncio.Event().wait()
    finally:
        await storage_client.close_all()
        await run_queue.close_all()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    logging.getLogger("azure").setLevel(logging.WARNING)  # else every poll logs its HTTP request
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve())
