"""A thread's history for a snapshot: its messages, oldest first, and what it waits on.

Reads only, through ``transcript.snapshot``: the pointer once (whose origin must be the
caller's, as on every thread route; the library decides), then one checkpoint per turn back
from the head, at most ``MAX_SNAPSHOT_MESSAGES`` messages (the newest); the head's pending
requests (they become interrupts) come from the head as that walk read it.
A thread with no turns yet has an empty history.
"""

from __future__ import annotations

from typing import Any

from functions_adapter.settings import Settings
from functions_adapter.wiring import build_service
from resumable.core.results import request_json
from resumable.threads import Caller, ThreadMessage, snapshot

MAX_SNAPSHOT_MESSAGES = 200


async def thread_history(
    settings: Settings, thread_id: str, caller: Caller
) -> tuple[list[ThreadMessage], list[dict[str, Any]]]:
    """``Forbidden`` before anything of the thread is read if ``caller`` did not make it."""
    service = build_service(settings)
    found = await snapshot(service.pointers, service.store, thread_id, caller=caller, limit=MAX_SNAPSHOT_MESSAGES)
    return found.messages, [request_json(e) for e in found.pending]
