"""A thread's history for a snapshot: its messages, oldest first, and what it waits on.

Reads only: the pointer (whose origin must be the caller's, as on every thread route), then
the pointer again and one checkpoint per turn back from the head (``transcript.messages_page``,
at most ``MAX_SNAPSHOT_MESSAGES`` messages, the newest), then the head again for its pending
requests (they become interrupts).
A thread with no turns yet has an empty history.
"""

from __future__ import annotations

from typing import Any

from functions_adapter.settings import Settings
from functions_adapter.wiring import build_service
from resumable.base import CheckpointNotFound, ThreadNotFound
from resumable.core.results import request_json
from resumable.threads import Caller, ThreadMessage, messages_page, owned_head

MAX_SNAPSHOT_MESSAGES = 200


async def thread_history(
    settings: Settings, thread_id: str, caller: Caller
) -> tuple[list[ThreadMessage], list[dict[str, Any]]]:
    """``Forbidden`` before anything of the thread is read if ``caller`` did not make it."""
    service = build_service(settings)
    head = await owned_head(service.pointers, thread_id, caller)
    if head.checkpoint_id is None or head.deleting:
        return [], []
    try:
        page, _ = await messages_page(
            service.pointers, service.store, thread_id, caller=caller, limit=MAX_SNAPSHOT_MESSAGES
        )
    except ThreadNotFound:
        return [], []
    page.reverse()
    try:
        checkpoint = await service.store.load(head.checkpoint_id)
    except CheckpointNotFound:  # retention removed it: nothing waits any more
        return page, []
    return page, [request_json(e) for e in checkpoint.pending_request_info_events.values()]
