"""``/api/a2a/{workflow}``: the agent card and the JSON-RPC endpoint (A2A v1.0 method names,
as the ``a2a-sdk`` 1.3 client sends them: SendMessage, SendStreamingMessage, GetTask,
CancelTask, SubscribeToTask, and the push-notification config methods of ``push``).

A JSON-RPC call always answers 200 with a JSON-RPC body (errors included), except a body
over the size limit or a wrong content type, refused as on every route before it is parsed.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from fastapi import Request, Response
from fastapi.responses import StreamingResponse

from functions_adapter.a2a import jsonrpc, push, tasks, turn_call
from functions_adapter.a2a.card import agent_card
from functions_adapter.a2a.jsonrpc import Call, RpcError
from functions_adapter.body import read_body, require_json, verify_signature
from functions_adapter.callers import caller_origin
from functions_adapter.http_responses import json_response
from functions_adapter.request_trace import traced
from functions_adapter.sse import KEEPALIVE, MEDIA_TYPE
from functions_adapter.wiring import build_service, load_settings
from resumable.base import strict_json
from resumable.base.errors import ResumeError
from resumable.base.strict_json import StrictJsonError
from resumable.core.catalog import WorkflowRef

logger = logging.getLogger(__name__)
ROUTE = "a2a/{workflow}"
CARD_ROUTE = "a2a/{workflow}/.well-known/agent-card.json"
WAIT_SECONDS = 20  # one long poll of the run; a blocking send waits up to BLOCKING_POLLS of them
BLOCKING_POLLS = 9  # 180 s: under the Azure front end's 230 s cut
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def handle_card(request: Request, workflow: str) -> Response:
    return await traced(request, CARD_ROUTE, lambda: _card(request, workflow))


async def _card(request: Request, workflow: str) -> Response:
    settings = load_settings()
    build_service(settings).catalog.check(WorkflowRef.parse(workflow))
    endpoint = str(request.url).split("?")[0].removesuffix("/.well-known/agent-card.json")
    return json_response(agent_card(workflow, endpoint))


async def handle_rpc(request: Request, workflow: str) -> Response:
    return await traced(request, ROUTE, lambda: _rpc(request, workflow))


async def _rpc(request: Request, workflow: str) -> Response:
    settings = load_settings()
    body = await read_body(request, settings.max_request_bytes)
    verify_signature(request.headers, body, settings)
    require_json(request.headers.get("content-type"))
    call_id = None
    try:
        try:
            payload = strict_json.loads(body)
        except StrictJsonError as exc:
            raise RpcError(jsonrpc.PARSE_ERROR, str(exc)) from None
        call_id = payload.get("id") if isinstance(payload, dict) else None
        call = jsonrpc.parse_call(payload)
        build_service(settings).catalog.check(WorkflowRef.parse(workflow))
        headers = dict(request.headers)
        if call.method in ("SendStreamingMessage", "SubscribeToTask"):
            events = await _open_stream(call, headers, workflow)
            return StreamingResponse(_frames(call.id, events), media_type=MEDIA_TYPE, headers=_SSE_HEADERS)
        handler = _METHODS.get(call.method)
        if handler is None:
            raise RpcError(jsonrpc.METHOD_NOT_FOUND, f"No method {call.method!r}.")
        return json_response(jsonrpc.result(call.id, await handler(call, headers, workflow)))
    except ResumeError as exc:
        return json_response(jsonrpc.error(call_id, jsonrpc.from_resume_error(exc)))
    except RpcError as exc:
        return json_response(jsonrpc.error(call_id, exc))


def _string(params: Mapping[str, Any], name: str, *, required: bool = True) -> str | None:
    value = params.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise RpcError(jsonrpc.INVALID_PARAMS, f"'{name}' must be a non-empty string.")
    return value


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


async def _start(call: Call, headers: Mapping[str, str], workflow: str) -> dict[str, Any]:
    """Queue the turn a SendMessage stands for: the context (or the task's thread) continued,
    a new thread when neither is given; the messageId its idempotency key."""
    message = call.params.get("message")
    if not isinstance(message, dict):
        raise RpcError(jsonrpc.INVALID_PARAMS, "'message' must be an object.")
    message_id = _string(message, "messageId")
    if message.get("role", "ROLE_USER") not in ("ROLE_USER", "user"):
        raise RpcError(jsonrpc.INVALID_PARAMS, "'message.role' must be ROLE_USER.")
    text, responses = _content(message)
    context_id = _string(message, "contextId", required=False)
    task_id = _string(message, "taskId", required=False)
    if task_id is not None:  # an answer on an earlier task: its thread, checked as its owner's
        thread = (await turn_call.run_status(headers, task_id))["thread_id"]
        if context_id is not None and context_id != thread:
            raise RpcError(jsonrpc.INVALID_PARAMS, "'taskId' belongs to another context.")
        context_id = thread
    if context_id is None:
        context_id = new_context_id(caller_origin(headers), message_id)
    return await turn_call.start_turn(
        headers,
        thread_id=context_id,
        workflow=workflow,
        message=text,
        responses=responses,
        key=message_id,
        push=push.requested(call.params),
    )


def new_context_id(origin: str, message_id: str) -> str:
    """The thread a message without a context starts: derived from the caller's origin and the
    messageId, so a retry of that first message finds the same thread (and its idempotency
    record), another caller's equal messageId a thread of its own, and any messageId a valid ID."""
    return "a2a-" + hashlib.sha256(f"{origin}\0{message_id}".encode()).hexdigest()[:32]


async def _send(call: Call, headers: Mapping[str, str], workflow: str) -> dict[str, Any]:
    accepted = await _start(call, headers, workflow)
    configuration = call.params.get("configuration") or {}
    if not isinstance(configuration, dict):
        raise RpcError(jsonrpc.INVALID_PARAMS, "'configuration' must be an object.")
    polls = 0 if configuration.get("returnImmediately") else BLOCKING_POLLS
    run = await turn_call.run_status(headers, accepted["run_id"])
    while polls and tasks.state_of(run) not in tasks.FINAL:
        run = await turn_call.run_status(headers, accepted["run_id"], wait_seconds=WAIT_SECONDS)
        polls -= 1
    return {"task": tasks.task_of(run)}


async def _get(call: Call, headers: Mapping[str, str], workflow: str) -> dict[str, Any]:
    return tasks.task_of(await turn_call.run_status(headers, _string(call.params, "id") or ""))


async def _cancel(call: Call, headers: Mapping[str, str], workflow: str) -> dict[str, Any]:
    return tasks.task_of(await turn_call.cancel_run(headers, _string(call.params, "id") or ""))


_METHODS = {"SendMessage": _send, "GetTask": _get, "CancelTask": _cancel, **push.METHODS}

Event = dict[str, Any] | None  # None: a keep-alive while the run works


async def _open_stream(call: Call, headers: Mapping[str, str], workflow: str) -> AsyncIterator[Event]:
    """Refusals raise here, before the stream starts; the events follow the run to its end."""
    if call.method == "SendStreamingMessage":
        run_id = (await _start(call, headers, workflow))["run_id"]
    else:
        run_id = _string(call.params, "id") or ""
    first = await turn_call.run_status(headers, run_id)
    return _follow(headers, first)


async def _follow(headers: Mapping[str, str], run: dict[str, Any]) -> AsyncIterator[Event]:
    """The task now, then a status update at each change, the reply artifact, the final status."""
    yield {"task": tasks.task_of(run)}
    state = tasks.state_of(run)
    while state not in tasks.FINAL:
        run = await turn_call.run_status(headers, run["run_id"], wait_seconds=WAIT_SECONDS)
        if tasks.state_of(run) == state:
            yield None
            continue
        state = tasks.state_of(run)
        if state in tasks.FINAL:
            for artifact in tasks.artifacts_of(run):
                update = {"taskId": run["run_id"], "contextId": run["thread_id"], "artifact": artifact}
                yield {"artifactUpdate": {**update, "lastChunk": True}}
        yield {"statusUpdate": {"taskId": run["run_id"], "contextId": run["thread_id"], "status": tasks.status_of(run)}}


async def _frames(call_id: str | int | None, events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
    try:
        async for event in events:
            if event is None:
                yield KEEPALIVE
            else:
                yield _frame(jsonrpc.result(call_id, event))
    except ResumeError as exc:
        yield _frame(jsonrpc.error(call_id, jsonrpc.from_resume_error(exc)))
    except Exception:
        logger.exception("A2A stream failed")
        yield _frame(jsonrpc.error(call_id, RpcError(jsonrpc.INTERNAL_ERROR, "An internal error occurred.")))


def _frame(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body).encode() + b"\n\n"
