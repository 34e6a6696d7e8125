"""A thread's messages, read back from its checkpoints: each turn's transcript.

A workflow's state is its own (the default workflow keeps only the user's texts; an agent
keeps its session), so the messages of a turn cannot be read out of any workflow's state.
Instead each turn's checkpoint carries, in its own ``metadata``, what that turn was sent
and what it answered: ``{"in": [{"role", "content"}], "out": [{"role", "content"}]}``
(``TRANSCRIPT``). It is written with the checkpoint, so it costs no storage operation,
commits with the turn and goes with the thread. Long texts are cut to
``MAX_TRANSCRIPT_CHARS`` in all (a turn's checkpoint must stay under its size cap).

``messages_page`` walks the lineage from the head (as ``admin.history`` does), newest
first, reading one checkpoint per turn until the page is full. Oldest first
(``newest_first=False``) walks the lineage's metadata back to the start first (one
metadata read per turn, at most ``MAX_OLDEST_FIRST_TURNS``), then reads only the page's
checkpoints. A message's ID is ``msg_<checkpoint_id>_<n>``; ``after`` takes one, and a
message ID of another thread's checkpoint is ``InvalidRequest``. A sent message that came
with its own ID (``Message.message_id``: AG-UI's client-made IDs) is recorded with it
(``"id"``, read back as ``client_id``; ``recorded_input_ids``: what a resent conversation is
checked against).

``snapshot`` is the newest page with what the head waits on, for a frontend that reloads a
thread (AG-UI): one pointer read, decided on by the owner check and then walked from, and
one read per turn, the head's giving both its messages and its pending requests (N + 1
reads for N turns, where ``owned_head`` then ``messages_page`` then the head again took N + 3).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_framework import WorkflowCheckpoint

from ..base import strict_json
from ..base.errors import CheckpointNotFound, InvalidRequest, ThreadNotFound
from ..checkpoints.store import CheckpointStore
from .ownership import Caller, owned_head
from .pointers import ThreadPointers, expired

TRANSCRIPT = "transcript"
MAX_TRANSCRIPT_CHARS = 64 * 1024
MAX_OLDEST_FIRST_TURNS = 1000
_MESSAGE_ID = re.compile(r"msg_([A-Za-z0-9][A-Za-z0-9._-]{0,127})_(\d{1,4})")


def transcript(sent: Iterable[Mapping[str, str]], body: Mapping[str, Any]) -> dict[str, Any]:
    """What a turn's checkpoint records: the messages it was sent, then what it answered
    (the response body's messages, then its other outputs as text)."""
    outputs = [{"role": "assistant", "content": _text(value)} for value in body.get("outputs", [])]
    budget = [MAX_TRANSCRIPT_CHARS]

    def kept(message: Mapping[str, Any]) -> dict[str, str]:
        content = str(message.get("content", ""))[: max(budget[0], 0)]
        budget[0] -= len(content)
        item = {"role": str(message.get("role", "")), "content": content}
        if isinstance(message.get("id"), str):
            item["id"] = message["id"]
        return item

    return {
        "in": [kept(m) for m in sent],
        "out": [kept(m) for m in [*body.get("messages", []), *outputs]],
    }


def _text(value: Any) -> str:
    return value if isinstance(value, str) else strict_json.dumps(value).decode()


@dataclass(frozen=True, slots=True)
class ThreadMessage:
    """One message of a thread: ``sent`` to the workflow, or answered by it."""

    message_id: str
    role: str
    content: str
    sent: bool
    # The ID the client sent it with (AG-UI), if any; ``message_id`` is the thread's own.
    client_id: str | None = None


def _messages(checkpoint_id: str, metadata: Mapping[str, Any]) -> list[ThreadMessage]:
    """A turn's messages, oldest first (none for a checkpoint written without a transcript)."""
    record = metadata.get(TRANSCRIPT)
    if not isinstance(record, dict):
        return []
    found: list[ThreadMessage] = []
    for sent, key in ((True, "in"), (False, "out")):
        for item in record.get(key) or []:
            if isinstance(item, dict) and isinstance(item.get("content"), str) and isinstance(item.get("role"), str):
                own = item.get("id") if sent and isinstance(item.get("id"), str) else None
                message_id = f"msg_{checkpoint_id}_{len(found)}"
                found.append(ThreadMessage(message_id, item["role"], item["content"], sent, own))
    return found


def recorded(metadata: Mapping[str, Any]) -> dict[str, list[dict[str, str]]]:
    """A turn's transcript as ``{"in": [...], "out": [...]}`` of ``{"role", "content"}``,
    whatever else a stored item holds (empty lists for a checkpoint written without one)."""
    record = metadata.get(TRANSCRIPT)
    found: dict[str, list[dict[str, str]]] = {"in": [], "out": []}
    if isinstance(record, dict):
        for key, items in found.items():
            for item in record.get(key) or []:
                if (
                    isinstance(item, dict)
                    and isinstance(item.get("role"), str)
                    and isinstance(item.get("content"), str)
                ):
                    items.append({"role": item["role"], "content": item["content"]})
    return found


def recorded_input_ids(metadata: Mapping[str, Any]) -> frozenset[str]:
    """The IDs a turn's sent messages came with (none for a turn sent without IDs)."""
    record = metadata.get(TRANSCRIPT)
    items = record.get("in") if isinstance(record, dict) else None
    return frozenset(i["id"] for i in items or [] if isinstance(i, dict) and isinstance(i.get("id"), str))


def _after(value: str | None) -> tuple[str, int] | None:
    if value is None:
        return None
    matched = _MESSAGE_ID.fullmatch(value)
    if matched is None or ".." in matched.group(1):
        raise _not_ours()
    return matched.group(1), int(matched.group(2))


def _not_ours() -> InvalidRequest:
    return InvalidRequest("'after' is not a message of this thread.", details={"param": "after"})


async def messages_page(
    pointers: ThreadPointers,
    store: CheckpointStore,
    thread_id: str,
    *,
    caller: Caller,
    limit: int,
    after: str | None = None,
    newest_first: bool = True,
) -> tuple[list[ThreadMessage], bool]:
    """One page of the thread's messages and whether more follow. ``ThreadNotFound`` if the
    thread has no turns (callers decide whether an empty thread exists); ``ThreadExpired``
    if retention removed its head checkpoint, as for a turn; ``Forbidden`` before anything
    else unless ``caller`` made the thread."""
    head = await owned_head(pointers, thread_id, caller)
    if head.checkpoint_id is None or head.deleting:
        raise ThreadNotFound(f"Thread '{thread_id}' has no turns yet.")
    start = _after(after)
    cursor: str | None = head.checkpoint_id
    if start is not None:
        info = await _info(store, start[0])
        if info is None or info.thread_id != thread_id:
            raise _not_ours()
        # After a turn's first message, the page starts at the turn before: its checkpoint is
        # not read for nothing.
        cursor = info.previous_checkpoint_id if start[1] == 0 else start[0]
    if newest_first:
        return await _newest_first(store, cursor, start, limit, None if start is not None else thread_id)
    return await _oldest_first(store, head.checkpoint_id, thread_id, start, limit)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A thread's newest messages, oldest first, and the requests its head waits on."""

    messages: list[ThreadMessage]
    # The head checkpoint's pending ``request_info`` events (none for a thread with no turns).
    pending: list[Any]


async def snapshot(
    pointers: ThreadPointers, store: CheckpointStore, thread_id: str, *, caller: Caller, limit: int
) -> Snapshot:
    """The thread's newest ``limit`` messages and what it waits on, for ``caller`` only
    (``Forbidden`` before anything else is read). A thread with no turns, or being deleted,
    is empty; ``ThreadExpired`` if retention removed its head checkpoint, as for a turn."""
    head = await owned_head(pointers, thread_id, caller)
    if head.checkpoint_id is None or head.deleting:
        return Snapshot([], [])
    try:
        checkpoint = await store.load(head.checkpoint_id)
    except CheckpointNotFound:
        raise expired(thread_id) from None
    page, _ = await _newest_first(store, head.checkpoint_id, None, limit, thread_id, loaded=checkpoint)
    page.reverse()
    return Snapshot(page, list(checkpoint.pending_request_info_events.values()))


async def _info(store: CheckpointStore, checkpoint_id: str) -> Any:
    try:
        return await store.get_info(checkpoint_id)
    except CheckpointNotFound:
        return None


async def _turn(
    store: CheckpointStore, checkpoint_id: str, loaded: WorkflowCheckpoint | None = None
) -> tuple[list[ThreadMessage], str | None] | None:
    """A turn's messages and its parent; None if retention removed it (the lineage ends).
    ``loaded``: this checkpoint, if the caller read it already."""
    if loaded is not None:
        checkpoint = loaded
    else:
        try:
            checkpoint = await store.load(checkpoint_id)
        except CheckpointNotFound:
            return None
    return _messages(checkpoint_id, checkpoint.metadata), checkpoint.previous_checkpoint_id


async def _newest_first(
    store: CheckpointStore,
    cursor: str | None,
    start: tuple[str, int] | None,
    limit: int,
    at_head: str | None,
    *,
    loaded: WorkflowCheckpoint | None = None,
) -> tuple[list[ThreadMessage], bool]:
    """``at_head``: the thread whose head ``cursor`` is (its absence: the thread expired);
    ``loaded``: the head's checkpoint, if the caller read it already."""
    page: list[ThreadMessage] = []
    while cursor is not None:
        turn = await _turn(store, cursor, loaded)
        loaded = None
        if turn is None:
            if at_head is not None:
                raise expired(at_head)
            return page, False
        at_head = None
        messages, parent = turn
        if start is not None and cursor == start[0]:
            messages = messages[: start[1]]
        for message in reversed(messages):
            if len(page) == limit:
                return page, True
            page.append(message)
        cursor = parent
    return page, False


async def _oldest_first(
    store: CheckpointStore, head: str, thread_id: str, start: tuple[str, int] | None, limit: int
) -> tuple[list[ThreadMessage], bool]:
    lineage: list[str] = []
    cursor: str | None = head
    while cursor is not None:
        if len(lineage) == MAX_OLDEST_FIRST_TURNS:
            raise InvalidRequest(
                f"This thread has more than {MAX_OLDEST_FIRST_TURNS} turns: list it newest first.",
                details={"param": "order"},
            )
        info = await _info(store, cursor)
        if info is None and cursor == head:
            raise expired(thread_id)
        if info is None or info.thread_id != thread_id:
            break
        lineage.append(cursor)
        cursor = info.previous_checkpoint_id
    lineage.reverse()
    index = 0 if start is None else lineage.index(start[0]) if start[0] in lineage else -1
    if index < 0:
        raise _not_ours()
    return await _collect(store, lineage[index:], start, limit)


async def _collect(
    store: CheckpointStore, lineage: Sequence[str], start: tuple[str, int] | None, limit: int
) -> tuple[list[ThreadMessage], bool]:
    page: list[ThreadMessage] = []
    for checkpoint_id in lineage:
        turn = await _turn(store, checkpoint_id)
        if turn is None:
            continue
        messages = turn[0]
        if start is not None and checkpoint_id == start[0]:
            messages = messages[start[1] + 1 :]
        for message in messages:
            if len(page) == limit:
                return page, True
            page.append(message)
    return page, False
