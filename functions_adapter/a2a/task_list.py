"""ListTasks: the tasks of one context (a thread), newest first, from the thread's lineage.

``contextId`` is required: no index of an origin's tasks is kept (a task is only its
checkpoints, ``task_ids``), so listing them across contexts would mean walking every thread.
A page walks ``pageSize`` turns of the lineage from the head back (``admin.history``: the
owner check on the pointer first, then one read per turn, each turn's checkpoint whole) and
lists the tasks among them, each once, at its latest turn (the turns of one task are
consecutive: an answer runs only on its task's head). A page may therefore hold fewer
than ``pageSize`` tasks; ``nextPageToken`` says where the walk goes on ("" at the end).
A background task whose run is its only turn is not listed: its checkpoint does not name it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from functions_adapter import thread_access
from functions_adapter.a2a import jsonrpc, tasks
from functions_adapter.a2a.jsonrpc import RpcError
from functions_adapter.a2a.task_ids import task_turn_of
from functions_adapter.callers import caller_origin
from functions_adapter.params import whole_number
from functions_adapter.wiring import build_service, load_settings
from resumable.base import ThreadNotFound
from resumable.core.results import turn_json
from resumable.threads import MAX_PAGE, Caller, history
from resumable.threads.admin import HistoryEntry

# A2A's TaskState names: what ``status`` may filter by.
UNSPECIFIED = "TASK_STATE_UNSPECIFIED"
STATES = frozenset(
    {
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_AUTH_REQUIRED",
    }
)
DEFAULT_PAGE = 50  # A2A's default page size
MAX_TOKEN_LENGTH = 2048  # two checkpoint IDs and a history cursor, base64url
_ROUTE = "threads/{thread_id}/history"
Task = dict[str, Any]


def _page_size(value: Any) -> int:
    """``pageSize`` through the app's one number parser (a JSON number, or its text)."""
    raw = None if value is None else str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if raw is not None and not isinstance(raw, str):
        raw = "not a number"
    return whole_number(raw, "pageSize", low=1, high=MAX_PAGE, default=DEFAULT_PAGE)


def _status(value: Any) -> str | None:
    """The ``status`` filter: a task state's name (absent, empty or unspecified: no filter);
    anything else is refused rather than matching no task."""
    if value in (None, "", UNSPECIFIED):
        return None
    if not isinstance(value, str) or value not in STATES:
        raise RpcError(jsonrpc.INVALID_PARAMS, "'status' must be a task state such as 'TASK_STATE_COMPLETED'.")
    return value


def _token(before: str, newest_seen: str) -> str:
    raw = json.dumps({"b": before, "n": newest_seen}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _untoken(value: Any) -> tuple[str | None, str | None]:
    """The history cursor to walk on from, and the turn walked just before it."""
    if value is None or value == "":
        return None, None
    refused = RpcError(jsonrpc.INVALID_PARAMS, "'pageToken' is not a token ListTasks returned.")
    if not isinstance(value, str) or len(value) > MAX_TOKEN_LENGTH:
        raise refused  # bounded before decoding
    try:
        data = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
        before, newest = data["b"], data["n"]
    except (ValueError, KeyError, TypeError, RecursionError, binascii.Error):
        raise refused from None
    if not isinstance(before, str) or not isinstance(newest, str):
        raise refused
    return before, newest  # the cursor is checked against the thread by ``history``


async def list_tasks(params: Mapping[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    context_id = params.get("contextId")
    if not isinstance(context_id, str) or not context_id:
        raise RpcError(
            jsonrpc.INVALID_PARAMS,
            "'contextId' is required: tasks are listed one context at a time.",
        )
    if params.get("statusTimestampAfter") is not None:
        raise RpcError(jsonrpc.INVALID_PARAMS, "'statusTimestampAfter' is not supported.")
    size = _page_size(params.get("pageSize"))
    wanted = _status(params.get("status"))
    with_artifacts = jsonrpc.flag(params, "includeArtifacts")
    before, newer = _untoken(params.get("pageToken"))
    settings = load_settings()
    await thread_access.gate(headers, settings, _ROUTE, context_id)
    service = build_service(settings)
    caller = Caller(caller_origin(headers))
    try:
        page, cursor = await history(
            service.pointers, service.store, context_id, caller=caller, limit=size, before=before, with_checkpoints=True
        )
    except ThreadNotFound:  # no turns yet: no tasks
        page, cursor = [], None
    listed, newer = _tasks_among(page, context_id, newer)
    if not with_artifacts:
        for task in listed:
            task.pop("artifacts", None)
    listed = [task for task in listed if wanted in (None, task["status"]["state"])]
    token = "" if cursor is None or newer is None else _token(cursor, newer)
    return {"tasks": listed, "nextPageToken": token, "pageSize": size}


def _tasks_among(
    page: list[HistoryEntry], context_id: str, newer: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """The tasks whose latest turn is on ``page`` (newest first; ``newer``: the turn walked
    just before it), and the last turn walked."""
    listed: list[Task] = []
    for entry in page:
        checkpoint_id, later = entry.info.checkpoint_id, newer
        newer = checkpoint_id
        found = task_turn_of(checkpoint_id)
        if found is None or entry.checkpoint is None:
            continue  # a turn of no task (the thread route's, or a background run's own)
        task_id, turn = found
        if later is not None and task_turn_of(later) == (task_id, turn + 1):
            continue  # an earlier turn of a task listed at its latest
        read = {**turn_json(entry.checkpoint), "checkpoint_id": checkpoint_id}
        listed.append(tasks.turn_task(task_id, context_id, turn, read))
    return listed, newer
