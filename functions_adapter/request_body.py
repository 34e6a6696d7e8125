"""Parse and validate the body of ``POST /api/runs`` into a ``RunRequest``.

Strict on purpose: unknown fields, wrong types and empty values are 400s with a
message that names the field, because a webhook integration is easier to fix from a
clear error than from a run that silently ignored half its input.
"""

from __future__ import annotations

from typing import Any

from agent_framework import Message

from functions_adapter.params import flag, json_object, one_of
from functions_adapter.settings import InputLimits
from resumable import RunRequest, TurnInput, WorkflowRef
from resumable.base import InvalidRequest, validate_id
from resumable.core.lifecycle import LEVELS

_ROLES = ("user", "system")
_MULTITASK = ("reject", "enqueue")
_DURABILITY = ("turn", "superstep")
_RUN_FIELDS = frozenset(
    {
        "checkpoint_id",
        "messages",
        "responses",
        "stream",
        "background",
        "callback_url",
        "workflow",
        "events",
        "durability",
    }
)
# A thread run resumes from the thread's head, so it names no checkpoint.
_THREAD_FIELDS = frozenset(
    {
        "messages",
        "responses",
        "stream",
        "multitask",
        "background",
        "callback_url",
        "from_checkpoint_id",
        "workflow",
        "events",
        "durability",
    }
)


def wants_event_stream(accept: str | None) -> bool:
    """Whether an ``Accept`` header asks for server-sent events."""
    return bool(accept) and any(part.split(";")[0].strip() == "text/event-stream" for part in accept.split(","))


def parse_run_request(
    body: bytes,
    *,
    accept: str | None = None,
    limits: InputLimits = InputLimits(),  # noqa: B008 - immutable
    thread: bool = False,
) -> RunRequest:
    """Turn raw body bytes into a validated request, or raise ``InvalidRequest``.

    ``thread`` parses the body of ``POST /api/threads/{id}/runs``.
    """
    data = json_object(body)
    allowed = _THREAD_FIELDS if thread else _RUN_FIELDS
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise InvalidRequest(f"Unknown field(s): {', '.join(unknown)}.", details={"allowed": sorted(allowed)})

    checkpoint_id = _optional_id(data, "checkpoint_id")
    fork_from = _optional_id(data, "from_checkpoint_id")
    messages = _parse_messages(data["messages"], limits) if data.get("messages") is not None else None
    responses = _parse_responses(data["responses"], limits) if data.get("responses") is not None else None
    stream = flag(data.get("stream"), "stream", default=False)
    background = flag(data.get("background"), "background", default=False)
    callback_url = data.get("callback_url")
    # Empty is refused, not read as "none": it would silently mean no callback, or CALLBACK_URL.
    if callback_url is not None and (not isinstance(callback_url, str) or not callback_url.strip()):
        raise InvalidRequest("'callback_url' must be a non-empty URL string (leave it out for no callback).")
    workflow = _workflow(data.get("workflow"))
    multitask = one_of(data.get("multitask"), "multitask", _MULTITASK, default="reject")
    events = one_of(data.get("events"), "events", LEVELS, default="outputs")
    # Background turns only (a synchronous turn has nothing to resume); absent: the workflow's own.
    durability = None
    if data.get("durability") is not None:
        durability = one_of(data["durability"], "durability", _DURABILITY)
    if messages is not None and responses is not None:
        raise InvalidRequest("Send either 'messages' or 'responses', not both.")

    if not thread:
        if responses is not None and checkpoint_id is None:
            raise InvalidRequest("'responses' answers requests pending in a checkpoint, so it needs 'checkpoint_id'.")
        if messages is None and checkpoint_id is None:
            raise InvalidRequest("Nothing to do: send 'messages', a 'checkpoint_id', or both.")
    return RunRequest(
        checkpoint_id=checkpoint_id,
        turn=TurnInput(messages=messages, responses=responses),
        stream=stream or wants_event_stream(accept),
        multitask=multitask,
        background=background,
        callback_url=callback_url,
        fork_from=fork_from,
        workflow=workflow,
        events=events,
        durability=durability,
    )


def _workflow(value: Any) -> WorkflowRef | None:
    """``name`` or ``name@version``; whether it is hosted is the catalog's call (``turns``)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidRequest("'workflow' must be a workflow's name, or 'name@version'.")
    return WorkflowRef.parse(value)


def _optional_id(data: dict[str, Any], field: str) -> str | None:
    value = data.get(field)
    return None if value is None else validate_id(value, kind=field)


def _parse_messages(value: Any, limits: InputLimits) -> list[Message]:
    if isinstance(value, str):
        value = [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise InvalidRequest("'messages' must be a non-empty string or a non-empty list of messages.")
    if len(value) > limits.max_messages:
        raise InvalidRequest(f"'messages' holds at most {limits.max_messages} messages.")
    parsed: list[Message] = []
    for index, item in enumerate(value):
        where = f"messages[{index}]"
        if not isinstance(item, dict) or set(item) != {"role", "content"}:
            raise InvalidRequest(f"{where} must be an object with exactly 'role' and 'content'.")
        role, content = one_of(item["role"], f"{where}.role", _ROLES), item["content"]
        if not isinstance(content, str) or not content.strip():
            raise InvalidRequest(f"{where}.content must be a non-empty string.")
        if len(content) > limits.max_message_chars:
            raise InvalidRequest(f"{where}.content is longer than {limits.max_message_chars} characters.")
        parsed.append(Message(role=role, contents=[content]))
    if not any(m.role == "user" for m in parsed):
        raise InvalidRequest("'messages' must include at least one user message.")
    return parsed


def _parse_responses(value: Any, limits: InputLimits) -> dict[str, Any]:
    if not isinstance(value, dict) or not value:
        raise InvalidRequest("'responses' must be a non-empty object of {request_id: answer}.")
    if len(value) > limits.max_responses:
        raise InvalidRequest(f"'responses' holds at most {limits.max_responses} answers.")
    for request_id in value:
        validate_id(request_id, kind="request_id")
    return dict(value)
