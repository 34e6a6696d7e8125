"""A message as SendMessage and SendStreamingMessage carry it, read from the JSON-RPC params
(refusals as invalid params), and the thread a message that names no context starts."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from functions_adapter.a2a import jsonrpc
from functions_adapter.a2a.jsonrpc import Call, RpcError
from functions_adapter.authorizers import principal_of, thread_prefix
from functions_adapter.callers import trusted_headers
from resumable.base.ids import MAX_ID_LENGTH


@dataclass(frozen=True, slots=True)
class Sent:
    """A message as SendMessage and SendStreamingMessage take it."""

    message_id: str
    text: str | None
    responses: dict[str, Any] | None
    context_id: str | None
    task_id: str | None

    @property
    def new_context(self) -> bool:
        """It names no context and no task: it starts a thread."""
        return self.context_id is None and self.task_id is None


def _string(params: Mapping[str, Any], name: str, *, required: bool = True) -> str | None:
    value = params.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise RpcError(jsonrpc.INVALID_PARAMS, f"'{name}' must be a non-empty string.")
    return value


def task_id_param(params: Mapping[str, Any]) -> str:
    return _string(params, "id") or ""


def _content(message: Mapping[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """The message's text parts (joined) and the ``responses`` object of a data part."""
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise RpcError(jsonrpc.INVALID_PARAMS, "'message.parts' must be a non-empty array.")
    texts: list[str] = []
    responses: dict[str, Any] | None = None
    for part in parts:
        if not isinstance(part, dict):
            raise RpcError(jsonrpc.INVALID_PARAMS, "Each part must be an object.")
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part.get("data"), dict) and isinstance(part["data"].get("responses"), dict):
            responses = part["data"]["responses"]
        else:
            raise RpcError(jsonrpc.INVALID_PARAMS, "A part must be text, or data holding {'responses': {...}}.")
    return ("\n".join(texts) if texts else None), responses


def sent_of(call: Call) -> Sent:
    message = call.params.get("message")
    if not isinstance(message, dict):
        raise RpcError(jsonrpc.INVALID_PARAMS, "'message' must be an object.")
    message_id = _string(message, "messageId") or ""
    if message.get("role", "ROLE_USER") not in ("ROLE_USER", "user"):
        raise RpcError(jsonrpc.INVALID_PARAMS, "'message.role' must be ROLE_USER.")
    text, responses = _content(message)
    context_id = _string(message, "contextId", required=False)
    return Sent(message_id, text, responses, context_id, _string(message, "taskId", required=False))


def configuration_of(call: Call) -> dict[str, Any]:
    """The message's ``configuration`` (absent: none), its flag checked: a wrong type is
    refused, never read as its truthiness (``[]`` as no configuration, ``"false"`` as true)."""
    configuration = call.params.get("configuration")
    if configuration is None:
        return {}
    if not isinstance(configuration, dict):
        raise RpcError(jsonrpc.INVALID_PARAMS, "'configuration' must be an object.")
    jsonrpc.flag(configuration, "returnImmediately")
    return configuration


def new_context_id(headers: Mapping[str, str]) -> str:
    """A new thread for a message without a context: ``a2a-`` and 32 random hex digits, so no
    other caller can name it in advance and make it first (a retry of the message finds its
    first answer by its key, ``turn_call.NEW_CONTEXT``, not by its thread). A caller with a
    principal gets it under its thread prefix (``authorizers.thread_prefix``), so the ready
    authorizer, which allows a caller only the threads under its prefix, allows it."""
    drawn = "a2a-" + uuid.uuid4().hex
    principal = principal_of(trusted_headers(headers))
    prefixed = drawn if not principal else thread_prefix(principal) + drawn
    return prefixed if len(prefixed) <= MAX_ID_LENGTH else drawn
