"""Listing threads: a page of thread pointers under an ID prefix, with an opaque cursor.

A page is one storage listing page of at most ``limit`` pointer blobs
(``threads/<prefix>...``), then one read of each pointer and of its metadata, a bounded
number at once: at most ``2 * limit + 1`` storage operations, however many threads there
are. What the page drops (threads being deleted, unreadable pointers, pointers with no
turns, threads ``allow`` refuses) is not replaced by reading further, so a page may hold
fewer than ``limit`` threads and still have a next cursor: callers page until the cursor
is None.

The cursor wraps the storage listing's continuation token with the prefix it was issued
for. It is not a secret and proves nothing: it only says where the listing goes on, and
every thread it reaches is filtered again. A cursor this module did not make, or made for
another prefix, is ``InvalidRequest`` before storage sees it; a token storage itself
refuses is ``InvalidRequest`` too (the only thing a caller controls in that listing).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from azure.core.exceptions import HttpResponseError
from azure.storage.blob.aio import ContainerClient

from ..base.errors import InvalidRequest, ServerMisconfigured, ThreadUnreadable
from ..base.ids import MAX_ID_LENGTH, validate_id
from ..storage import layout
from ..storage.failures import list_page
from .admin import ThreadMetadata
from .pointers import ThreadHead, ThreadPointers

logger = logging.getLogger(__name__)
MAX_LIST_PAGE = 100
# Pointer and metadata reads in flight at once for one page.
READ_CONCURRENCY = 16
# Azure's continuation tokens are a few hundred characters; ours wraps one in base64 JSON.
MAX_CURSOR_LENGTH = 2048
_SUFFIX = ".json"


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    """One listed thread: its head, when it last moved, and its metadata."""

    thread_id: str
    checkpoint_id: str
    updated_at: float | None
    metadata: dict[str, str] = field(default_factory=dict)
    head: ThreadHead | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoint_id": self.checkpoint_id,
            "updated_at": self.updated_at,
            "metadata": self.metadata,
        }


# (summary) -> whether the caller may see this thread; may be async.
Allow = Callable[[ThreadSummary], Awaitable[bool]]


def validate_prefix(prefix: str | None) -> str:
    """An ID prefix: empty, or the start of a valid thread ID (``InvalidRequest`` otherwise)."""
    if not prefix:
        return ""
    validate_id(prefix, kind="prefix")
    return prefix


def _refused() -> InvalidRequest:
    return InvalidRequest("'cursor' is not a cursor this listing returned.", details={"param": "cursor"})


def encode_cursor(prefix: str, token: str) -> str:
    raw = json.dumps({"p": prefix, "t": token}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(prefix: str, cursor: str) -> str:
    """The storage token inside ``cursor``; ``InvalidRequest`` for anything else."""
    if not cursor or len(cursor) > MAX_CURSOR_LENGTH:
        raise _refused()  # bounded before decoding
    try:
        data = json.loads(base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True))
        token = data["t"]
        if data["p"] != prefix or not isinstance(token, str) or not token or not token.isprintable():
            raise ValueError("another listing's cursor")
    except (ValueError, KeyError, TypeError, RecursionError, binascii.Error):
        raise _refused() from None
    return token


def _thread_id(blob_name: str) -> str | None:
    """The thread a pointer blob belongs to; None for a name no pointer has."""
    if not blob_name.startswith(layout.THREADS) or not blob_name.endswith(_SUFFIX):
        return None
    candidate = blob_name[len(layout.THREADS) : -len(_SUFFIX)]
    try:
        return validate_id(candidate, kind="thread_id") if len(candidate) <= MAX_ID_LENGTH else None
    except InvalidRequest:
        return None


async def list_threads(
    container: ContainerClient,
    pointers: ThreadPointers,
    *,
    prefix: str = "",
    limit: int = 20,
    cursor: str | None = None,
    allow: Allow | None = None,
) -> tuple[list[ThreadSummary], str | None]:
    """One page of threads whose IDs start with ``prefix``, and the next page's cursor (None: the end)."""
    prefix = validate_prefix(prefix)
    if not 1 <= limit <= MAX_LIST_PAGE:
        raise InvalidRequest(f"'limit' must be from 1 to {MAX_LIST_PAGE}.", details={"param": "limit"})
    token = None if cursor is None else decode_cursor(prefix, cursor)
    try:
        blobs, next_token = await list_page(container, layout.THREADS + prefix, token, limit)
    except ServerMisconfigured as exc:
        # Storage refusing a listing we made from a caller's token is the token's fault (a
        # forged one reaches storage only if it decodes); any other refusal is ours.
        cause = exc.__cause__
        if token is not None and isinstance(cause, HttpResponseError) and cause.status_code == 400:
            raise _refused() from None
        raise
    metadata = ThreadMetadata(container)
    gate = asyncio.Semaphore(READ_CONCURRENCY)

    async def one(thread_id: str) -> ThreadSummary | None:
        async with gate:
            try:
                head = await pointers.read(thread_id)
            except ThreadUnreadable:
                return None  # logged by the pointer reader; an operator repairs it
            if head.deleting or head.checkpoint_id is None:
                return None  # being deleted, or fenced with no turn yet
            values = (await metadata.get(thread_id)).values
        summary = ThreadSummary(thread_id, head.checkpoint_id, head.updated_at, values, head)
        if allow is not None and not await allow(summary):
            return None
        return summary

    ids = [thread_id for thread_id in (_thread_id(blob.name) for blob in blobs) if thread_id is not None]
    try:  # a failed read cancels the others: no read outlives the call
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(thread_id)) for thread_id in ids]
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
    page = [summary for summary in (task.result() for task in tasks) if summary is not None]
    return page, None if next_token is None else encode_cursor(prefix, next_token)
