"""Threads as a resource over HTTP: read, history, metadata, delete (the gate and the owner's
view are ``thread_access``'s, shared with the other protocols)."""

from __future__ import annotations

import logging
import re

from fastapi import Request, Response

from functions_adapter.callers import caller_of
from functions_adapter.http_responses import json_response
from functions_adapter.params import whole_number
from functions_adapter.thread_access import gate, thread_view
from functions_adapter.wiring import build_service, container_for, load_settings
from resumable.base import InvalidRequest, PreconditionFailed, strict_json
from resumable.core.results import turn_json
from resumable.threads import MAX_PAGE, ThreadMetadata, delete_thread, history, ownership, update_unless_deleted

logger = logging.getLogger(__name__)
DEFAULT_PAGE = 20
# RFC 9110 entity-tag: an optional W/ and a quoted run of visible ASCII (no '"'); RFC 9110
# also admits obs-text, which no ETag of this app (Azure Storage's) ever holds.
_ETAG = re.compile(r'(W/)?"[\x21\x23-\x7e]*"')
# What Blob Storage's ETags look like: a well-formed ETag of any other shape never matches one
# (412 here, before storage sees a header it might read as a list, like '"a,b"').
_STORAGE_ETAG = re.compile(r'"0x[0-9A-F]{1,32}"')


async def get_thread(request: Request, thread_id: str) -> Response:
    """The pointer, its recent lineage and the metadata (with its ETag)."""
    settings = load_settings()
    await gate(request.headers, settings, "threads/{thread_id}", thread_id)
    body, etag = await thread_view(settings, thread_id, caller_of(request))
    return json_response(body, headers={"ETag": etag} if etag else None)


async def get_history(request: Request, thread_id: str) -> Response:
    """``?limit=&before=``: the lineage from the head backwards, a page at a time;
    ``from=<checkpoint_id>`` walks from that checkpoint instead (a branch a fork replaced);
    ``include=turn`` adds each checkpoint's turn (what it was sent and answered, and the
    requests it left pending)."""
    settings = load_settings()
    await gate(request.headers, settings, "threads/{thread_id}/history", thread_id)
    service = build_service(settings)
    query = request.query_params
    limit = whole_number(query.get("limit"), "limit", low=1, high=MAX_PAGE, default=DEFAULT_PAGE)
    include = query.get("include")
    if include not in (None, "turn"):
        raise InvalidRequest("'include' takes one value: turn.", details={"param": "include"})
    page, cursor = await history(
        service.pointers,
        service.store,
        thread_id,
        caller=caller_of(request),
        limit=limit,
        before=query.get("before"),
        start=query.get("from"),
        with_checkpoints=include == "turn",
    )
    checkpoints = [
        entry.info.to_json() | ({"turn": turn_json(entry.checkpoint)} if entry.checkpoint is not None else {})
        for entry in page
    ]
    return json_response({"thread_id": thread_id, "checkpoints": checkpoints, "next": cursor})


async def put_metadata(request: Request, thread_id: str, body: bytes) -> Response:
    settings = load_settings()
    await gate(request.headers, settings, "threads/{thread_id}/metadata", thread_id)
    try:
        values = strict_json.loads(body)
    except strict_json.StrictJsonError as exc:
        raise InvalidRequest(f"The body must be one JSON object: {exc}") from None
    if_match = _if_match(request.headers.get("if-match"))
    pointers, container, caller = build_service(settings).pointers, container_for(settings), caller_of(request)
    head = await ownership.owned_head(pointers, thread_id, caller)
    read = await ThreadMetadata(container).get(thread_id)
    # Never brings back a thread deleted meanwhile, nor writes on one another origin claimed.
    written = await update_unless_deleted(
        container, pointers, thread_id, values, read=read, head=head, caller=caller, if_match=if_match
    )
    return json_response({"thread_id": thread_id, "metadata": written.values}, headers={"ETag": str(written.etag)})


def _if_match(raw: str | None) -> str | None:
    """One strong ETag or ``*``, checked here so storage never sees anything else. A weak
    ETag is well formed but never matches (If-Match compares strongly): 412."""
    if raw is None:
        return None
    value = raw.strip()
    if value == "*":
        return value
    if _ETAG.fullmatch(value) is None:
        raise InvalidRequest("'If-Match' must be one ETag, as the metadata's 'ETag' header gave it, or '*'.")
    if value.startswith("W/"):
        raise PreconditionFailed("A weak ETag never matches 'If-Match'; send the metadata's 'ETag' as given.")
    if _STORAGE_ETAG.fullmatch(value) is None:
        raise PreconditionFailed("That ETag is not the metadata's; send the metadata's 'ETag' as given.")
    return value


async def delete(request: Request, thread_id: str) -> Response:
    """204 once everything is gone; 202 when the deadline came first (call again to finish)."""
    settings = load_settings()
    await gate(request.headers, settings, "threads/{thread_id}", thread_id)
    service = build_service(settings)
    done = await delete_thread(
        container_for(settings),
        service.pointers,
        thread_id,
        caller=caller_of(request),
        store=service.store,
        deadline_seconds=settings.thread_delete_seconds,
    )
    if done.finished:
        return Response(status_code=204)
    return json_response({"thread_id": thread_id, "status": "deleting", "deleted": done.deleted}, status=202)
