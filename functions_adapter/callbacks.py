"""Completion callbacks, the adapter's part: the signed, address-checked POST, and wiring.

The library (``resumable.background.callbacks``) schedules callbacks and runs their
delivery state machine; this module gives it the ``Sender``:

* **Payload**: ``{"type": "run.completed", "run_id", "status", "thread_id", "result" |
  "error"}`` (built by the library); ``result`` is exactly the synchronous 200 body. A run
  that names a format (an A2A push notification) gets that format's body and added
  headers instead (``callback_formats``), signed the same way.
* **Headers**: ``webhook-id`` (``msg_<run_id>``: the same on every attempt, so a
  receiver can deduplicate), ``webhook-timestamp`` and ``webhook-signature``
  (``v1,<base64 HMAC-SHA256>`` with ``CALLBACK_SECRET``).
* **Safe**: the URL is checked again at each attempt and the connection goes to the
  checked addresses (``callback_url``); no redirects; 10 s timeout; the response
  body is never read.
"""

from __future__ import annotations

import time
from typing import Any

import aiohttp
from azure.storage.blob.aio import ContainerClient

from functions_adapter import callback_formats, signatures
from functions_adapter.callback_url import CallbackPolicy, CallbackRefused, PinnedResolver, check
from functions_adapter.settings import Settings
from resumable.background import RunRecord, RunRecordView
from resumable.background.callback_records import PENDING, CallbackDelivery, callback_store
from resumable.background.callbacks import MESSAGE_PREFIX, CallbackDeliveries, RetryPolicy, Sender
from resumable.base import ServerMisconfigured
from resumable.storage.record_store import Stored
from resumable.storage.run_queue import RunQueue

TIMEOUT_SECONDS = 10.0
__all__ = ["MESSAGE_PREFIX", "Callbacks", "public_view"]


def policy_of(settings: Settings) -> CallbackPolicy:
    return CallbackPolicy(settings.callback_allowed_hosts, settings.callback_allow_local_http)


def signed_headers(secret: str, message_id: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    stamp = int(time.time()) if timestamp is None else timestamp
    return {
        "content-type": "application/json",
        "user-agent": "resumable-callbacks/1",
        "webhook-id": message_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": signatures.sign(secret, message_id, stamp, body),
    }


async def post(url: str, body: bytes, headers: dict[str, str], policy: CallbackPolicy) -> tuple[int | None, str | None]:
    """One attempt: (HTTP status, None) or (None, error class). Never raises."""
    try:
        checked = await check(url, policy)  # again: DNS may have changed since submission
    except CallbackRefused:
        return None, "refused_address"
    connector = aiohttp.TCPConnector(resolver=PinnedResolver(checked), use_dns_cache=False, force_close=True)
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
    try:
        async with (
            aiohttp.ClientSession(connector=connector, timeout=timeout) as session,
            session.post(url, data=body, headers=headers, allow_redirects=False) as response,
        ):
            return response.status, None  # the body is never read
    except TimeoutError:
        return None, "timeout"
    except aiohttp.ClientConnectorError:
        return None, "connection_error"
    except aiohttp.ClientError as exc:
        return None, type(exc).__name__


def sender(settings: Settings) -> Sender:
    """Signs with the first ``CALLBACK_SECRET`` and POSTs; unsigned is never sent."""

    async def send(url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str | None]:
        if not settings.callback_secrets:
            raise ServerMisconfigured()
        signed = {**headers, **signed_headers(settings.callback_secrets[0], headers["webhook-id"], body)}
        return await post(url, body, signed, policy_of(settings))

    return send


def public_view(url: str, state: CallbackDelivery | None) -> dict[str, Any]:
    """The callback part of ``GET /api/runs/{id}``; the URL's query (often a token) is not
    shown. Before the run finished there is no delivery record yet: ``pending``."""
    view: dict[str, Any] = {
        "url": url.split("?", 1)[0],
        "outcome": PENDING if state is None else state.outcome,
        "attempts": [] if state is None else [attempt.to_json() for attempt in state.attempts],
    }
    if state is not None and state.reason is not None:
        view["reason"] = state.reason
    return view


async def status_view(container: ContainerClient, record: RunRecord) -> dict[str, Any] | None:
    """The run's callback as ``public_view`` shows it (None: the run has no callback)."""
    url = RunRecordView(record).callback_url
    if url is None:
        return None
    stored = await callback_store(container).get(record.run_id)
    return public_view(url, None if stored is None else stored.value)


class Callbacks:
    """The library's callback service, wired to the run queue, the sender and the settings."""

    def __init__(self, container: ContainerClient, queue: RunQueue, settings: Settings) -> None:
        self.deliveries = CallbackDeliveries(
            container,
            lambda message, delay: queue.enqueue(message, delay_seconds=delay),
            sender(settings),
            RetryPolicy(
                settings.callback_retry_schedule, settings.callback_max_attempts, settings.callback_max_seconds
            ),
            render=callback_formats.render,
        )

    async def schedule(self, stored: Stored[RunRecord]) -> None:
        """A run that finished: its callback's first delivery, if it has one (once)."""
        await self.deliveries.schedule(RunRecordView(stored.value))

    async def deliver(self, run_id: str, message_id: str | None = None) -> None:
        await self.deliveries.deliver(run_id, message_id)

    async def settle_poisoned(self, run_id: str) -> None:
        await self.deliveries.settle_poisoned(run_id)
