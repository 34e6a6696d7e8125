"""Completion callbacks: when a background run finishes, POST the outcome to its
``callback_url``, signed (Standard Webhooks), retried until delivered or given up.

* **Payload**: ``{"type": "run.completed", "run_id", "status", "thread_id", "result" |
  "error"}``; ``result`` is exactly the synchronous 200 body.
* **Headers**: ``webhook-id`` (``msg_<run_id>``: the same on every attempt, so a
  receiver can deduplicate), ``webhook-timestamp`` and ``webhook-signature``
  (``v1,<base64 HMAC-SHA256>`` with ``CALLBACK_SECRET``).
* **Retries** go through the run queue as delayed messages (``callback.<run_id>``), so
  they survive restarts: a 2xx is delivered, a 410 stops, anything else (a timeout,
  a refused connection, another status) is tried again after the next delay of
  ``CALLBACK_RETRY_SCHEDULE`` (with ±10 % jitter), until ``CALLBACK_MAX_ATTEMPTS``
  attempts or ``CALLBACK_MAX_SECONDS`` have passed.
* **Safe**: the URL is checked again at each attempt and the connection goes to the
  checked addresses (``callback_url``); no redirects; 10 s timeout; the response
  body is never read.

Each attempt is recorded in the run record (``callback.attempts``: time, HTTP status
or error class), with the outcome: ``pending``, ``delivered``, ``stopped`` or
``gave_up``. ``GET /api/runs/{id}`` shows them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
import time
from typing import Any

import aiohttp

from resumable import run_records as rr
from resumable import strict_json
from resumable.errors import ResumeError
from resumable.record_store import Stored
from resumable.run_queue import RunQueue
from resumable.run_records import RunRecord, RunRecords

from . import signatures
from .callback_url import CallbackPolicy, CallbackRefused, PinnedResolver, check
from .settings import Settings

logger = logging.getLogger(__name__)
MESSAGE_PREFIX = "callback."
TIMEOUT_SECONDS = 10.0
# A payload over this carries no result, only ``"result_truncated": true``: the receiver
# reads it from GET /api/runs/{id}. Keeps one slow receiver from holding megabytes.
MAX_PAYLOAD_BYTES = 256 * 1024
PENDING, DELIVERED, STOPPED, GAVE_UP = "pending", "delivered", "stopped", "gave_up"


def policy_of(settings: Settings) -> CallbackPolicy:
    return CallbackPolicy(settings.callback_allowed_hosts, settings.callback_allow_local_http)


def new_state(url: str) -> dict[str, Any]:
    """What a run record holds about its callback from the start."""
    return {"url": url, "outcome": PENDING, "scheduled": False, "attempts": [], "first_at": None}


def public_view(state: dict[str, Any]) -> dict[str, Any]:
    """The callback part of ``GET /api/runs/{id}``; the URL's query (often a token) is not shown."""
    return {
        "url": state["url"].split("?", 1)[0],
        "outcome": state["outcome"],
        "attempts": state["attempts"],
    }


def payload(record: RunRecord) -> bytes:
    status = record.status_json()
    body: dict[str, Any] = {
        "type": "run.completed",
        "run_id": record.run_id,
        "status": record.status,
        "thread_id": record.thread_id,
    }
    if record.status == rr.SUCCEEDED:
        body["result"] = status["result"]
    else:
        body["error"] = status["error"]
    encoded = strict_json.dumps(body)
    if len(encoded) > MAX_PAYLOAD_BYTES:
        encoded = strict_json.dumps({**body, "result": None, "result_truncated": True})
    return encoded


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


def next_delay(schedule: tuple[float, ...], attempts: int) -> float:
    """The wait after ``attempts`` failed attempts: the schedule's entry (its last one
    repeats), ±10 % jitter so that retries from many runs spread out."""
    base = schedule[min(attempts - 1, len(schedule) - 1)]
    return base * random.uniform(0.9, 1.1)  # noqa: S311 - jitter, not cryptography


class Callbacks:
    """Schedules and delivers completion callbacks, one attempt per queue message."""

    def __init__(self, records: RunRecords, queue: RunQueue, settings: Settings) -> None:
        self._records = records
        self._queue = queue
        self._settings = settings

    async def schedule(self, stored: Stored[RunRecord]) -> None:
        """A finished run with a pending callback: send its first delivery message (once)."""
        record = stored.value
        state = record.callback
        if not record.terminal or not state or state["outcome"] != PENDING or state["scheduled"]:
            return
        await self._queue.enqueue(MESSAGE_PREFIX + record.run_id)

        def scheduled(current: RunRecord | None) -> RunRecord | None:
            if current is None or current.callback is None:
                return None
            return dataclasses.replace(
                current, callback={**current.callback, "scheduled": True, "first_at": time.time()}
            )

        # Changed meanwhile: a second message is harmless (attempts are recorded by CAS).
        with contextlib.suppress(ResumeError):
            await self._records.update(record.run_id, scheduled, current=stored)

    async def deliver(self, run_id: str) -> None:
        """One delivery attempt for ``run_id``'s callback; schedules the next if needed."""
        stored = await self._records.get(run_id)
        record = None if stored is None else stored.value
        state = (record.callback if record else None) or {}
        if record is None or state.get("outcome") != PENDING:
            return
        settings = self._settings
        if not settings.callback_secrets:
            logger.error("Callback for run %s not sent: CALLBACK_SECRET is not set", run_id)
            await self._finish(stored, GAVE_UP, {"at": time.time(), "error": "server_misconfigured"})
            return
        body = payload(record)
        headers = signed_headers(settings.callback_secrets[0], f"msg_{run_id}", body)
        status, error = await post(state["url"], body, headers, policy_of(settings))
        attempt: dict[str, Any] = (
            {"at": time.time(), "status": status} if error is None else {"at": time.time(), "error": error}
        )
        attempts = len(state["attempts"]) + 1
        if status is not None and 200 <= status < 300:
            await self._finish(stored, DELIVERED, attempt)
        elif status == 410:
            await self._finish(stored, STOPPED, attempt)
        else:
            delay = next_delay(settings.callback_retry_schedule, attempts)
            elapsed = time.time() - float(state.get("first_at") or time.time())
            if attempts >= settings.callback_max_attempts or elapsed + delay > settings.callback_max_seconds:
                await self._finish(stored, GAVE_UP, attempt)
                return
            await self._finish(stored, PENDING, attempt)
            await self._queue.enqueue(MESSAGE_PREFIX + run_id, delay_seconds=max(0, round(delay)))

    async def _finish(self, stored: Stored[RunRecord], outcome: str, attempt: dict[str, Any]) -> None:
        def finished(current: RunRecord | None) -> RunRecord | None:
            if current is None or current.callback is None:
                return None
            state = current.callback
            callback = {**state, "outcome": outcome, "attempts": [*state["attempts"], attempt]}
            return dataclasses.replace(current, callback=callback)

        try:
            await self._records.update(stored.value.run_id, finished, current=stored)
        except ResumeError:
            logger.warning("Could not record a callback attempt for run %s", stored.value.run_id)
