"""OpenAI Conversations-compatible routes: ``/api/conversations`` for any OpenAI SDK.

A conversation is a thread; this module only translates. Creating one writes the thread's
metadata record (``thread-meta/<id>.json``, the thread's existing metadata, empty if none
was sent), which is what makes a thread with no turn yet exist (``GET /api/threads/{id}``
answers it too); its first turn is ``responses.create(conversation=id)``, a turn on that
thread. Updating replaces the metadata; deleting is ``DELETE /api/threads/{id}``'s
deletion, whole; items are the thread's messages, read back from its turns' checkpoints
(``resumable.threads.transcript``). The thread authorizer is asked first, and a thread
another origin made is refused, as on every thread route. Errors are in OpenAI's shape
(``openai.objects.openai_error``).
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any

from fastapi import Request, Response

from functions_adapter import thread_access
from functions_adapter.body import read_body, require_json, verify_signature
from functions_adapter.callers import caller_of
from functions_adapter.http_responses import json_response
from functions_adapter.openai.objects import openai_error, with_param
from functions_adapter.params import json_object, one_of, whole_number
from functions_adapter.request_trace import traced
from functions_adapter.settings import Settings
from functions_adapter.wiring import build_service, container_for, load_settings
from resumable.base import CheckpointNotFound, InvalidRequest, RequestInProgress, ThreadNotFound
from resumable.threads import (
    Metadata,
    ThreadHead,
    ThreadMessage,
    ThreadMetadata,
    delete_thread,
    expired,
    messages_page,
    update_unless_deleted,
    validate_prefix,
)

PREFIX = "conv_"
# conv_<creation time, 8 hex digits of Unix seconds><96 random bits>: the ID carries its
# own creation time, so reading a conversation needs no record of when it was made.
# A create may put the ID under a prefix of the caller's (``id_prefix``), for an authorizer
# that gives each caller the IDs under a prefix (``authorizers.thread_prefix_of_principal``).
_GENERATED = re.compile(r"(?:.*[._-])?conv_([0-9a-f]{8})[0-9a-f]{24}")
MAX_ID_PREFIX = 64
ROUTE = "conversations/{conversation_id}"
MAX_PAGE = 100
DEFAULT_PAGE = 20
CREATE_FIELDS = frozenset({"metadata", "items", "id_prefix"})


class ConversationNotFound(ThreadNotFound):
    code = "conversation_not_found"


class ConversationDeleting(RequestInProgress):
    """The delete ran out of time before it finished: the same call goes on from where it stopped."""

    code = "conversation_deleting"


async def handle_create(request: Request) -> Response:
    return await traced(request, "conversations", lambda: _create(request), openai_error)


async def handle_get(request: Request, conversation_id: str) -> Response:
    return await traced(request, ROUTE, lambda: _get(request, conversation_id), openai_error)


async def handle_update(request: Request, conversation_id: str) -> Response:
    return await traced(request, ROUTE, lambda: _update(request, conversation_id), openai_error)


async def handle_delete(request: Request, conversation_id: str) -> Response:
    return await traced(request, ROUTE, lambda: _delete(request, conversation_id), openai_error)


async def handle_items(request: Request, conversation_id: str) -> Response:
    route = f"{ROUTE}/items"
    return await traced(request, route, lambda: _items(request, conversation_id), openai_error)


def new_id(id_prefix: object = None) -> str:
    """``[<id_prefix>]conv_<8 hex digits of Unix seconds><24 random hex digits>``."""
    if id_prefix is None:
        id_prefix = ""
    if not isinstance(id_prefix, str) or len(id_prefix) > MAX_ID_PREFIX or (id_prefix and id_prefix[-1] not in "._-"):
        why = f"'id_prefix' is at most {MAX_ID_PREFIX} characters of a thread ID, ending in '.', '_' or '-'."
        raise with_param(InvalidRequest(why), "id_prefix")
    try:
        validate_prefix(id_prefix)
    except InvalidRequest as exc:
        raise with_param(exc, "id_prefix") from None
    return f"{id_prefix}{PREFIX}{int(time.time()):08x}{secrets.token_hex(12)}"


def conversation(conversation_id: str, metadata: Metadata, head: ThreadHead | None) -> dict[str, Any]:
    generated = _GENERATED.fullmatch(conversation_id)
    if generated is not None:
        created_at = int(generated.group(1), 16)
    else:  # a thread started by its first turn: when it last moved is what is known
        created_at = int(head.updated_at or 0) if head is not None else 0
    return {"id": conversation_id, "object": "conversation", "created_at": created_at, "metadata": metadata.values}


async def _body(request: Request, settings: Settings, allowed: frozenset[str]) -> dict[str, Any]:
    body = await read_body(request, settings.max_request_bytes)
    verify_signature(request.headers, body, settings)
    require_json(request.headers.get("content-type"))
    data = json_object(body) if body else {}  # only no body at all is no fields: "\n" is not JSON
    for name in data:
        if name not in allowed:
            raise with_param(InvalidRequest(f"Unsupported parameter '{name}'."), name)
    return data


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise with_param(InvalidRequest("'metadata' must be an object of strings."), "metadata")
    return value


async def _create(request: Request) -> Response:
    settings = load_settings()
    data = await _body(request, settings, CREATE_FIELDS)
    items = data.get("items")
    if items is not None and (not isinstance(items, list) or items):
        why = "a conversation's items are its turns: send them with responses.create(conversation=...)"
        raise with_param(InvalidRequest(f"'items' is not supported here ({why})."), "items")
    values = _metadata(data.get("metadata"))
    conversation_id = new_id(data.get("id_prefix"))
    await thread_access.gate(request.headers, settings, "conversations", conversation_id)
    origin = caller_of(request).origin  # whose the conversation is until its first turn
    written = await ThreadMetadata(container_for(settings)).put(conversation_id, values, if_match=None, origin=origin)
    return json_response(conversation(conversation_id, written, None))


async def _existing(request: Request, settings: Settings, conversation_id: str) -> tuple[Metadata, ThreadHead]:
    """The conversation's metadata and pointer, once the authorizer allowed it; 404 unless
    it has metadata or a turn and is not being deleted."""
    await thread_access.gate(request.headers, settings, ROUTE, conversation_id)
    head = await thread_access.owned_head(caller_of(request), build_service(settings), conversation_id)
    metadata = await ThreadMetadata(container_for(settings)).get(conversation_id)
    if head.deleting or (metadata.etag is None and head.checkpoint_id is None):
        raise ConversationNotFound(f"No conversation has the ID '{conversation_id}'.")
    return metadata, head


async def _get(request: Request, conversation_id: str) -> Response:
    """The conversation; 410 ``thread_expired`` if retention removed its head, as for its thread."""
    settings = load_settings()
    metadata, head = await _existing(request, settings, conversation_id)
    if head.checkpoint_id is not None:
        try:
            await build_service(settings).store.get_info(head.checkpoint_id)
        except CheckpointNotFound:
            raise expired(conversation_id) from None
    return json_response(conversation(conversation_id, metadata, head))


async def _update(request: Request, conversation_id: str) -> Response:
    settings = load_settings()
    data = await _body(request, settings, frozenset({"metadata"}))
    if "metadata" not in data:
        raise with_param(InvalidRequest("Send the conversation's new 'metadata'."), "metadata")
    values = _metadata(data["metadata"])
    read, head = await _existing(request, settings, conversation_id)
    pointers = build_service(settings).pointers
    try:
        written = await update_unless_deleted(
            container_for(settings), pointers, conversation_id, values, read=read, head=head, caller=caller_of(request)
        )
    except ThreadNotFound:  # deleted, or being deleted, since it was read
        raise ConversationNotFound(f"No conversation has the ID '{conversation_id}'.") from None
    return json_response(conversation(conversation_id, written, head))


async def _delete(request: Request, conversation_id: str) -> Response:
    """The thread's deletion, whole; 409 with Retry-After if the deadline came first."""
    settings = load_settings()
    await thread_access.gate(request.headers, settings, ROUTE, conversation_id)
    service = build_service(settings)
    container = container_for(settings)
    head = await thread_access.owned_head(caller_of(request), service, conversation_id)
    if head.etag is None and (await ThreadMetadata(container).get(conversation_id)).etag is None:
        raise ConversationNotFound(f"No conversation has the ID '{conversation_id}'.")
    try:
        done = await delete_thread(
            container,
            service.pointers,
            conversation_id,
            caller=caller_of(request),
            store=service.store,
            deadline_seconds=settings.thread_delete_seconds,
        )
    except ThreadNotFound:
        raise ConversationNotFound(f"No conversation has the ID '{conversation_id}'.") from None
    if not done.finished:
        raise ConversationDeleting("The conversation is being deleted; send the same DELETE again to finish it.")
    return json_response({"id": conversation_id, "object": "conversation.deleted", "deleted": True})


def item(message: ThreadMessage) -> dict[str, Any]:
    """A thread message as a conversation item."""
    part: dict[str, Any] = {"type": "input_text" if message.sent else "output_text", "text": message.content}
    if not message.sent:
        part["annotations"] = []
    role = message.role if message.role in ("user", "assistant", "system", "developer", "tool") else "unknown"
    return {"type": "message", "id": message.message_id, "role": role, "status": "completed", "content": [part]}


async def _items(request: Request, conversation_id: str) -> Response:
    """``?after=&limit=&order=``: the thread's messages, newest first by default."""
    settings = load_settings()
    query = request.query_params
    limit = whole_number(query.get("limit"), "limit", low=1, high=MAX_PAGE, default=DEFAULT_PAGE)
    order = one_of(query.get("order"), "order", ("asc", "desc"), default="desc")
    _, head = await _existing(request, settings, conversation_id)
    page: list[ThreadMessage] = []
    more = False
    if head.checkpoint_id is not None:
        service = build_service(settings)
        page, more = await messages_page(
            service.pointers,
            service.store,
            conversation_id,
            caller=caller_of(request),
            limit=limit,
            after=query.get("after"),
            newest_first=order == "desc",
        )
    elif query.get("after") is not None:
        raise with_param(InvalidRequest("'after' is not a message of this conversation."), "after")
    data = [item(message) for message in page]
    return json_response(
        {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": more,
        }
    )
