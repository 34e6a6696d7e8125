"""``/api/a2a/{workflow}``: the agent card and the JSON-RPC endpoint (A2A v1.0 method names,
as the ``a2a-sdk`` 1.3 client sends them: SendMessage, SendStreamingMessage, GetTask,
ListTasks, CancelTask, SubscribeToTask, and the push-notification config methods of ``push``).

A JSON-RPC call always answers 200 with a JSON-RPC body (errors included), except a body
over the size limit or a wrong content type, refused as on every route before it is parsed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from fastapi import Request, Response
from fastapi.responses import StreamingResponse

from functions_adapter.a2a import jsonrpc, messages, push_format, task_list, task_reads, tasks, turn_call
from functions_adapter.a2a.jsonrpc import Call, RpcError
from functions_adapter.a2a.push_format import Push
from functions_adapter.a2a.sent import Sent, configuration_of, sent_of, task_id_param
from functions_adapter.body import read_body, require_json, verify_signature
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
BLOCKING_POLLS = 9  # a blocking send with a push config follows its run for up to 180 s (under 230 s)
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


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
        call_id = jsonrpc.readable_id(payload)
        call = jsonrpc.parse_call(payload)
        build_service(settings).catalog.check(WorkflowRef.parse(workflow))
        # As every other route reads them (``callers.trusted_headers``): a repeated header's
        # last value. ``dict(request.headers)`` would take the first, so a principal header a
        # client sent before the gateway's would name the caller here and nowhere else.
        headers = dict(request.headers.items())
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


async def _send(call: Call, headers: Mapping[str, str], workflow: str) -> dict[str, Any]:
    sent = sent_of(call)
    configuration = configuration_of(call)
    push = push_format.requested(configuration)  # a push config is a background run's callback
    if jsonrpc.flag(configuration, "returnImmediately"):
        return {"task": await _send_background(sent, headers, workflow, polls=0, push=push)}
    if push is not None:
        return {"task": await _send_background(sent, headers, workflow, polls=BLOCKING_POLLS, push=push)}
    return {"task": await messages.send(sent, headers, workflow)}


async def _send_background(
    sent: Sent, headers: Mapping[str, str], workflow: str, *, polls: int, push: Push | None
) -> Any:
    """Queue the turn as a background run, then follow it for up to ``polls`` long polls."""
    accepted = await messages.start_background(sent, headers, workflow, push=push)
    run = await turn_call.run_status(headers, accepted["run_id"])
    while polls and tasks.state_of(run) not in tasks.FINAL:
        run = await turn_call.run_status(headers, accepted["run_id"], wait_seconds=task_reads.WAIT_SECONDS)
        polls -= 1
    return tasks.task_of(run)


async def _get(call: Call, headers: Mapping[str, str], workflow: str) -> dict[str, Any]:
    return await task_reads.get_task(task_id_param(call.params), headers)


async def _cancel(call: Call, headers: Mapping[str, str], workflow: str) -> dict[str, Any]:
    return await task_reads.cancel_task(task_id_param(call.params), headers)


async def _list(call: Call, headers: Mapping[str, str], workflow: str) -> dict[str, Any]:
    return await task_list.list_tasks(call.params, headers)


async def _push_method(call: Call, headers: Mapping[str, str], workflow: str) -> dict[str, Any]:
    """A push-config method (``push``: it loads the background-run modules, so on first use)."""
    from functions_adapter.a2a import push  # noqa: PLC0415

    return await push.METHODS[call.method](call, headers, workflow)


_PUSH_METHODS = (
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
)
_METHODS = {
    "SendMessage": _send,
    "GetTask": _get,
    "CancelTask": _cancel,
    "ListTasks": _list,
    **dict.fromkeys(_PUSH_METHODS, _push_method),
}


async def _open_stream(call: Call, headers: Mapping[str, str], workflow: str) -> AsyncIterator[messages.Event]:
    """Refusals raise here, before the stream starts."""
    if call.method == "SendStreamingMessage":
        sent = sent_of(call)
        push = push_format.requested(configuration_of(call))
        if push is None:
            return await messages.open_stream(sent, headers, workflow)
        accepted = await messages.start_background(sent, headers, workflow, push=push)  # followed as it runs
        return await task_reads.subscribe(accepted["run_id"], headers)
    return await task_reads.subscribe(task_id_param(call.params), headers)


async def _frames(call_id: str | int | None, events: AsyncIterator[messages.Event]) -> AsyncIterator[bytes]:
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
