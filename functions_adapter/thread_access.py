"""Who may reach a thread, shared by every protocol: the thread authorizer's gate (on the
thread's ID and metadata, before anything else) and what a thread read answers its owner.

Plain values, no request object: ``gate`` takes the headers a call arrived with, so an MCP
tool call passes the same check as an HTTP route.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from functions_adapter.callers import authorize
from functions_adapter.settings import Settings
from functions_adapter.wiring import build_service, container_for
from resumable import RunService
from resumable.base import CheckpointNotFound, ThreadNotFound, validate_id
from resumable.threads import Caller, ThreadHead, ThreadMetadata, expired, ownership


async def gate(headers: Mapping[str, str], settings: Settings, route: str, thread_id: str) -> None:
    """Validate the ID, then ask the authorizer (with the thread's metadata) before anything
    else, given the headers the call arrived with (an HTTP route's, an MCP tool call's).

    An adapter's turn is not put to the authorizer: it is a ``turn_call.TurnCall`` without
    authorizer headers (its sender's signature authenticated it, and the thread's origin
    confines it), so no authorizer needs a rule for adapter threads.
    """
    validate_id(thread_id, kind="thread_id")
    if settings.thread_authorizer:
        metadata = await ThreadMetadata(container_for(settings)).get(thread_id)
        await authorize(
            settings.thread_authorizer,
            route=route,
            thread_id=thread_id,
            headers=headers,
            metadata=metadata.values,
        )


async def owned_head(caller: Caller, service: RunService, thread_id: str) -> ThreadHead:
    """The thread's pointer, if the caller's origin made the thread (else 403 ``forbidden``,
    before anything of the thread is read or changed; ``ownership.owned_head``). Names decide
    nothing here: a thread called ``slack.*`` is a Slack channel's only if that channel's turn
    created it."""
    return await ownership.owned_head(service.pointers, thread_id, caller)


async def thread_view(settings: Settings, thread_id: str, caller: Caller) -> tuple[dict[str, Any], str | None]:
    """What ``GET /api/threads/{id}`` answers (after the gate) to ``caller``: the body and
    the metadata's ETag."""
    service = build_service(settings)
    owned = await ownership.owned_head(service.pointers, thread_id, caller)
    metadata = await ThreadMetadata(container_for(settings)).get(thread_id)
    head = None if owned.checkpoint_id is None else owned  # None: no turns yet
    if head is not None:
        try:  # retention may have removed the head: the thread expired
            await service.store.get_info(str(head.checkpoint_id))
        except CheckpointNotFound:
            raise expired(thread_id) from None
    if head is None and metadata.etag is None:
        raise ThreadNotFound(f"Thread '{thread_id}' has no turns yet.")
    body = (
        head.to_json()
        if head is not None
        else {"thread_id": thread_id, "checkpoint_id": None, "turns": 0, "recent_checkpoint_ids": []}
    )
    body["metadata"] = metadata.values
    return body, metadata.etag
