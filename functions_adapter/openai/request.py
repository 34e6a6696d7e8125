"""Parse ``POST /api/responses`` into a turn: the body ``POST /api/runs`` (or a thread's
runs route) would take, so the one turn factory runs it, synchronously or from the queue.

Strict, as the runs routes are: an unknown field, or one this endpoint does not do
(``tools``, ``temperature``...), is a 400 naming it (OpenAI's ``param``), not silently
ignored. The workflow owns the model, its instructions and its tools. The one leniency is
for values that ask for nothing (``NO_OP``), which SDKs send on every call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from functions_adapter.openai.objects import run_id_of, with_param
from functions_adapter.params import flag, json_object, mapped
from functions_adapter.settings import InputLimits
from resumable.base import InvalidRequest, ResumeError, strict_json, validate_id

FIELDS = frozenset(
    {"input", "model", "previous_response_id", "conversation", "stream", "background", "store", "metadata"}
)
# Fields OpenAI's clients send with a value that asks for nothing (the OpenAI Agents SDK sends
# "include": [] and "tools": [] on every call): the listed values, and null ("not set"), are
# accepted and ignored. Any other value asks for something the workflow does not do (its
# model, instructions and tools are its own) and is refused, as an unknown field is.
NO_OP: dict[str, tuple[Any, ...]] = {
    "include": ([],),
    "tools": ([],),
    "tool_choice": ("auto",),
    "parallel_tool_calls": (True,),
    "truncation": ("disabled",),
    "text": (
        {},
        {"format": {"type": "text"}},
        {"verbosity": "medium"},
        {"format": {"type": "text"}, "verbosity": "medium"},
    ),
    **dict.fromkeys(("instructions", "temperature", "top_p", "max_output_tokens", "reasoning", "top_logprobs"), ()),
}
# "developer" is OpenAI's newer name for a system message.
_ROLES = {"user": "user", "system": "system", "developer": "system"}
_MESSAGE_KEYS = frozenset({"type", "role", "content", "id", "status"})
_OUTPUT_KEYS = frozenset({"type", "call_id", "output", "id", "status"})
MAX_METADATA = 16


class UnknownParameter(InvalidRequest):
    code = "unknown_parameter"


class ModelNotFound(InvalidRequest):
    code = "model_not_found"


def bad(message: str, param: str, error: type[ResumeError] = InvalidRequest) -> ResumeError:
    return with_param(error(message), param)


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """A parsed create request: new messages or answers, and where the turn runs."""

    messages: list[dict[str, str]] | None
    answers: dict[str, str] | None
    model: str
    # The workflow ``model`` named (None: no model sent, so the turn's default applies).
    workflow: str | None
    previous_response_id: str | None
    previous_run_id: str | None
    conversation: str | None
    stream: bool
    background: bool
    store: bool
    metadata: dict[str, str]

    def runs_body(self, checkpoint_id: str | None) -> bytes:
        """The turn as ``POST /api/runs`` (``checkpoint_id``) or a thread's runs route takes it."""
        body: dict[str, Any] = {} if checkpoint_id is None else {"checkpoint_id": checkpoint_id}
        if self.workflow is not None:
            body["workflow"] = self.workflow
        if self.messages is not None:
            body["messages"] = self.messages
        else:
            body["responses"] = self.answers
        if self.stream:
            body["stream"] = True
        return strict_json.dumps(body)


def parse_create(
    body: bytes, *, model: str, limits: InputLimits, hosted: Callable[[str], bool] | None = None
) -> CreateRequest:
    """Validate a create body; ``InvalidRequest`` (400) or ``ResponseNotFound`` (404).

    ``model`` names the workflow (``name`` or ``name@version``); ``hosted`` says whether one
    is (None: only ``model``, the default, is)."""
    data = json_object(body)
    for name, value in data.items():
        if name not in FIELDS and not _no_op(name, value):
            raise bad(f"Unsupported parameter '{name}': {_unsupported(name)}.", name, UnknownParameter)
    sent = data.get("model")
    if sent is not None and sent != model and not (isinstance(sent, str) and hosted is not None and hosted(sent)):
        raise bad(
            f"'model' names the workflow (name or name@version); this app hosts none named {sent!r}. "
            f"Send 'model': '{model}' (the default), another hosted workflow, or no model.",
            "model",
            ModelNotFound,
        )
    stream, background, store = (
        flag(data.get("stream"), "stream", default=False),
        flag(data.get("background"), "background", default=False),
        flag(data.get("store"), "store", default=True),
    )
    if background and not store:
        raise bad("A background response is stored: 'background' needs 'store' true.", "background")
    previous, conversation = data.get("previous_response_id"), data.get("conversation")
    if previous is not None and conversation is not None:
        raise bad("Send either 'previous_response_id' or 'conversation', not both.", "conversation")
    thread_id = None if conversation is None else _conversation(conversation)
    messages, answers = _input(data.get("input"), limits)
    if answers is not None and previous is None and thread_id is None:
        raise bad("A 'function_call_output' answers a response: send its 'previous_response_id'.", "input")
    return CreateRequest(
        messages=messages,
        answers=answers,
        model=sent if isinstance(sent, str) else model,
        workflow=sent if isinstance(sent, str) else None,
        previous_response_id=previous,
        previous_run_id=None if previous is None else run_id_of(previous, param="previous_response_id"),
        conversation=thread_id,
        stream=stream,
        background=background,
        store=store,
        metadata=_metadata(data.get("metadata")),
    )


def _no_op(name: str, value: Any) -> bool:
    """Whether ``value`` of field ``name`` asks for nothing (``NO_OP``). Compared as JSON, so
    ``1`` is not ``true``."""
    if name not in NO_OP:
        return False
    sent = json.dumps(value, sort_keys=True)
    return value is None or any(sent == json.dumps(allowed, sort_keys=True) for allowed in NO_OP[name])


def _unsupported(name: str) -> str:
    """Why field ``name`` is refused with the value it was sent."""
    if name == "instructions":
        return "the workflow has its own instructions; send a system message in 'input'"
    if name in NO_OP:
        allowed = [json.dumps(value) for value in NO_OP[name]] + ["null"]
        return f"the workflow owns its model and tools; this endpoint takes only {' or '.join(allowed)} here"
    return f"this endpoint takes only {', '.join(sorted(FIELDS))}"


def _conversation(value: Any) -> str:
    """A thread ID, given as a string or as ``{"id": ...}``."""
    if isinstance(value, dict) and set(value) == {"id"}:
        value = value["id"]
    try:
        return validate_id(value, kind="conversation")
    except InvalidRequest as exc:
        raise with_param(exc, "conversation") from None


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > MAX_METADATA:
        raise bad(f"'metadata' must be an object of at most {MAX_METADATA} strings.", "metadata")
    for key, text in value.items():
        if len(key) > 64 or not isinstance(text, str) or len(text) > 512:
            raise bad("'metadata' keys are at most 64 characters; values are strings of at most 512.", "metadata")
    return dict(value)


def _text(value: Any, where: str, limits: InputLimits) -> str:
    """A string, or a list of ``input_text`` parts (joined by newlines)."""
    if isinstance(value, list):
        if not all(
            isinstance(p, dict) and p.get("type") == "input_text" and isinstance(p.get("text"), str) for p in value
        ):
            raise bad(f"{where} parts must be {{'type': 'input_text', 'text': ...}}.", where)
        value = "\n".join(part["text"] for part in value)
    if not isinstance(value, str) or not value.strip():
        raise bad(f"{where} must be a non-empty string or a list of input_text parts.", where)
    if len(value) > limits.max_message_chars:
        raise bad(f"{where} is longer than {limits.max_message_chars} characters.", where)
    return value


def _input(value: Any, limits: InputLimits) -> tuple[list[dict[str, str]] | None, dict[str, str] | None]:
    """New messages, or answers to pending requests (``function_call_output``), never both."""
    if isinstance(value, str):
        value = [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise bad("'input' must be a non-empty string or a non-empty list of items.", "input")
    messages: list[dict[str, str]] = []
    answers: dict[str, str] = {}
    for index, item in enumerate(value):
        where = f"input[{index}]"
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "message" and set(item) <= _MESSAGE_KEYS and "role" in item:
            why = "earlier replies are in the saved state: continue with 'previous_response_id' or 'conversation'"
            role = mapped(item["role"], f"{where}.role", _ROLES, why)
            messages.append({"role": role, "content": _text(item.get("content"), f"{where}.content", limits)})
        elif kind == "function_call_output" and set(item) <= _OUTPUT_KEYS:
            try:
                call_id = validate_id(item.get("call_id"), kind="call_id")
            except InvalidRequest as exc:
                raise with_param(exc, f"{where}.call_id") from None
            if call_id in answers:
                raise bad(f"{where} answers '{call_id}' a second time.", f"{where}.call_id")
            answers[call_id] = _text(item.get("output"), f"{where}.output", limits)
        else:
            raise bad(f"{where} must be a message or a function_call_output item.", where)
    if messages and answers:
        raise bad("Send either messages or function_call_output items, not both.", "input")
    if len(messages) > limits.max_messages or len(answers) > limits.max_responses:
        raise bad(f"'input' holds at most {limits.max_messages} messages or {limits.max_responses} outputs.", "input")
    if messages and not any(m["role"] == "user" for m in messages):
        raise bad("'input' must include at least one user message.", "input")
    return (messages, None) if messages else (None, answers)
