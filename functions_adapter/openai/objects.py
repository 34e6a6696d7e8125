"""The OpenAI Responses API's objects, built from ours: responses, output and input items, errors.

A response is a run record (``runs/<run_id>.json``) whose ``accepted`` bytes hold the
response object as it was created (its ID, ``created_at``, ``model``, ``metadata``...);
``status``, ``output`` and ``error`` come from the record as it is now, ``output`` from
the run's result (the exact body ``POST /api/runs`` returns). Rendering is a pure
function of those, so the JSON answer, a later ``GET`` and a stream's final event agree.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import Response

from functions_adapter.http_responses import json_response
from functions_adapter.status_map import headers_of, status_of
from resumable.background import RunRecord
from resumable.background import records as rr
from resumable.base import InvalidRequest, RequestInProgress, ResumeError, RunNotFound, strict_json

PREFIX = "resp_"
_RUN_ID = re.compile(r"[0-9a-f]{32}")
# Run record status -> Responses status.
STATUS = {
    rr.QUEUED: "queued",
    rr.RUNNING: "in_progress",
    rr.SUCCEEDED: "completed",
    rr.FAILED: "failed",
    rr.CANCELLED: "cancelled",
}
# A workflow reports no token counts: zeros, so clients that read usage keep working.
USAGE = {
    "input_tokens": 0,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 0,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 0,
}
# The function name a pending human-in-the-loop request is shown under.
REQUEST_INFO = "request_info"


class ResponseNotFound(RunNotFound):
    """No stored response has this ID (404, so the SDK raises ``NotFoundError``)."""

    code = "response_not_found"


class ResponseInProgress(RequestInProgress):
    """The response is still queued or running (409 with Retry-After)."""

    code = "response_in_progress"


def with_param(error: ResumeError, param: str) -> ResumeError:
    """``error`` naming the request field it is about (OpenAI's ``param``)."""
    error.details = {**(error.details or {}), "param": param}
    return error


def response_id(run_id: str) -> str:
    return PREFIX + run_id


def run_id_of(value: object, *, param: str | None = None) -> str:
    """The run ID inside a response ID; ``ResponseNotFound`` for any ID this app never makes."""
    text = value if isinstance(value, str) else ""
    run_id = text.removeprefix(PREFIX)
    if text.startswith(PREFIX) and _RUN_ID.fullmatch(run_id):
        return run_id
    shown = f" '{text}'" if re.fullmatch(r"[A-Za-z0-9_.-]{1,80}", text) else ""
    error = ResponseNotFound(f"No response has the ID{shown}.")
    raise error if param is None else with_param(error, param)


def skeleton(
    *,
    run_id: str,
    created_at: float,
    model: str,
    background: bool,
    previous_response_id: str | None,
    conversation: str | None,
    metadata: dict[str, str],
) -> dict[str, Any]:
    """The response as created, before it ran: what a run record's ``accepted`` keeps."""
    return {
        "id": response_id(run_id),
        "object": "response",
        "created_at": int(created_at),
        "status": "queued" if background else "in_progress",
        "background": background,
        "model": model,
        "output": [],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": metadata,
        "previous_response_id": previous_response_id,
        "conversation": None if conversation is None else {"id": conversation},
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": USAGE,
        "completed_at": None,
    }


def render(
    base: dict[str, Any],
    status: str,
    *,
    result: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    completed_at: float | None = None,
) -> dict[str, Any]:
    """The response in ``status``: ``output`` from a run's result, ``error`` for a failure."""
    body = dict(base)
    body["status"] = status
    body["output"] = [] if result is None else output_items(base["id"].removeprefix(PREFIX), result)
    body["error"] = None if error is None else {"code": str(error.get("code")), "message": str(error.get("message"))}
    body["completed_at"] = int(completed_at) if status == "completed" and completed_at is not None else None
    return body


def is_response(record: RunRecord) -> bool:
    """Whether a run record is a response's (a run from ``/api/runs`` is not)."""
    try:
        base = json.loads(record.accepted)
    except ValueError:
        return False
    return isinstance(base, dict) and base.get("object") == "response" and base.get("id") == response_id(record.run_id)


def from_record(record: RunRecord) -> dict[str, Any]:
    """The response a run record stands for, as it is now."""
    result = None if record.result is None else json.loads(record.result)
    error = record.error.to_json() if record.status == rr.FAILED and record.error is not None else None
    return render(
        json.loads(record.accepted), STATUS[record.status], result=result, error=error, completed_at=record.finished_at
    )


def text_of(value: Any) -> str:
    """A workflow output that is not a message, as text (JSON unless it is a string)."""
    return value if isinstance(value, str) else strict_json.dumps(value).decode()


def message_item(item_id: str, text: str, *, done: bool = True) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if done else []
    status = "completed" if done else "in_progress"
    return {"type": "message", "id": item_id, "role": "assistant", "status": status, "content": content}


def call_item(request: dict[str, Any], *, done: bool = True) -> dict[str, Any]:
    """A pending request as a function call: answer it with a ``function_call_output``."""
    arguments = {"data": request.get("data"), "response_type": request.get("response_type")}
    return {
        "type": "function_call",
        "id": f"fc_{request['request_id']}",
        "call_id": request["request_id"],
        "name": REQUEST_INFO,
        "arguments": strict_json.dumps(arguments).decode() if done else "",
        "status": "completed" if done else "in_progress",
    }


def output_items(run_id: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    """A run's result as output items: its messages, other outputs, then pending requests."""
    texts = [str(m.get("content", "")) for m in result.get("messages", [])]
    texts += [text_of(value) for value in result.get("outputs", [])]
    items = [message_item(f"msg_{run_id}_{index}", text) for index, text in enumerate(texts)]
    return items + [call_item(request) for request in result.get("pending_requests", [])]


def input_items(record: RunRecord) -> list[dict[str, Any]]:
    """What the response was created with, from the run's body (oldest first)."""
    body = json.loads(record.body)
    items: list[dict[str, Any]] = []
    for index, message in enumerate(body.get("messages") or []):
        items.append(
            {
                "type": "message",
                "id": f"msg_{record.run_id}_in{index}",
                "role": message["role"],
                "status": "completed",
                "content": [{"type": "input_text", "text": message["content"]}],
            }
        )
    for index, (call_id, output) in enumerate((body.get("responses") or {}).items()):
        items.append(
            {
                "type": "function_call_output",
                "id": f"fco_{record.run_id}_{index}",
                "call_id": call_id,
                "output": output,
                "status": "completed",
            }
        )
    return items


def items_page(items: list[dict[str, Any]], *, order: str, after: str | None, limit: int) -> dict[str, Any]:
    """One page of a list, OpenAI's way: ``order`` (``asc`` or ``desc``), after an item's ID."""
    if order != "asc":
        items = items[::-1]
    ids = [item["id"] for item in items]
    if after is not None and after not in ids:
        raise with_param(InvalidRequest("'after' is not an item of this list."), "after")
    start = 0 if after is None else ids.index(after) + 1
    page = items[start : start + limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": start + limit < len(items),
    }


def _error_type(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    return "server_error" if status >= 500 else "invalid_request_error"


def openai_error(error: ResumeError) -> Response:
    """Our error in OpenAI's shape, ``{"error": {"message", "type", "code", "param"}}``.

    ``x-should-retry`` tells the SDK whether its automatic retries may send the request
    again: only for errors that say when (Retry-After: a busy thread, an outage).
    """
    status, headers = status_of(error), headers_of(error)
    headers["x-should-retry"] = "true" if "Retry-After" in headers else "false"
    details = dict(error.details or {})
    param = details.pop("param", None)
    body: dict[str, Any] = {"message": error.message, "type": _error_type(status), "code": error.code, "param": param}
    if details:
        body["details"] = details
    return json_response({"error": body}, status, headers)
