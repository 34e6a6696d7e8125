"""A2A's push-notification config methods, over a task's completion callback.

A task is a background run, and its push config is that run's one completion callback
(``push_format``): set by a ``SendMessage`` whose ``configuration`` carries one, or by
``CreateTaskPushNotificationConfig`` on a task that has not finished; read by ``Get`` and
``List``; removed by ``Delete``. One config per task, since a run has one callback: a
second ``Create`` replaces the first (the SDK calls it "set or update"), as a request's own
``callback_url`` replaces the deployment's ``CALLBACK_URL``. Every method reads the run's
record as its owner (``authorized_run``: the origin recorded at the accept, and the
thread authorizer), so another origin's task is refused as ``GetTask`` refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from functions_adapter.a2a import jsonrpc, push_format
from functions_adapter.a2a.jsonrpc import Call, RpcError
from functions_adapter.background_submit import authorized_run, check_callback, run_control
from functions_adapter.callers import caller_origin
from functions_adapter.wiring import load_settings
from resumable.background import Callback, RunRecord
from resumable.base.errors import RunFinished
from resumable.storage.record_store import Stored
from resumable.threads.ownership import Caller

# The routes the thread authorizer is told: reading a run, and adding to one (as a POST of a
# run with a callback would).
_READ, _WRITE = "runs/{run_id}", "threads/{thread_id}/runs"


def _text(params: Mapping[str, Any], name: str, *, required: bool = True) -> str | None:
    value = params.get(name)
    if (value is None or value == "") and not required:
        return None
    if not isinstance(value, str) or not value:
        raise RpcError(jsonrpc.INVALID_PARAMS, f"'{name}' must be a non-empty string.")
    return value


async def _owned(headers: Mapping[str, str], task_id: str, route: str) -> Stored[RunRecord]:
    caller = Caller(caller_origin(headers))
    return await authorized_run(load_settings(), task_id, caller, headers, route)


def _config(record: RunRecord) -> dict[str, Any] | None:
    """The task's push config (None: its run has no callback, or one that is not A2A's)."""
    if record.callback_format != push_format.FORMAT or record.callback_url is None:
        return None
    return push_format.config_json(record.run_id, record.callback_url, record.callback_params)


def _finished(exc: RunFinished) -> RpcError:
    error = jsonrpc.from_resume_error(exc)
    message = "The task has finished: its push notification was sent (or is being retried) and cannot change."
    return RpcError(jsonrpc.UNSUPPORTED_OPERATION, message, error.data)


async def create(call: Call, headers: Mapping[str, str], workflow: str) -> dict[str, Any]:
    """Set the task's push config: its callback, address-checked as every callback is."""
    task_id = _text(call.params, "taskId") or ""
    url, params = push_format.parse_config(call.params)
    found = await _owned(headers, task_id, _WRITE)
    checked = await check_callback(url, load_settings(), push_format.FORMAT, params)
    try:
        record = await run_control(load_settings()).change_callback(found, lambda _now: checked)
    except RunFinished as exc:
        raise _finished(exc) from None
    return _config(record) or {}


async def get(call: Call, headers: Mapping[str, str], workflow: str) -> dict[str, Any]:
    task_id = _text(call.params, "taskId") or ""
    wanted = _text(call.params, "id", required=False)
    config = _config((await _owned(headers, task_id, _READ)).value)
    if config is None or (wanted is not None and config["id"] != wanted):
        raise RpcError(jsonrpc.INVALID_PARAMS, f"Task {task_id!r} has no push notification config {wanted or ''!r}.")
    return config


async def list_configs(call: Call, headers: Mapping[str, str], workflow: str) -> dict[str, Any]:
    """Every config of the task: none or one (``pageSize`` and ``pageToken`` change nothing)."""
    config = _config((await _owned(headers, _text(call.params, "taskId") or "", _READ)).value)
    return {"configs": [] if config is None else [config]}


async def delete(call: Call, headers: Mapping[str, str], workflow: str) -> None:
    """Remove the config; one that is not there is already removed (no error)."""
    task_id = _text(call.params, "taskId") or ""
    wanted = _text(call.params, "id") or ""
    found = await _owned(headers, task_id, _WRITE)
    if (config := _config(found.value)) is None or config["id"] != wanted:
        return None

    def removed(now: Callback | None) -> Callback | None:  # judged again on the record as written
        if (
            now is not None
            and now.format == push_format.FORMAT
            and push_format.config_id(task_id, now.params) == wanted
        ):
            return None
        return now

    try:
        await run_control(load_settings()).change_callback(found, removed)
    except RunFinished as exc:
        raise _finished(exc) from None
    return None


METHODS = {
    "CreateTaskPushNotificationConfig": create,
    "GetTaskPushNotificationConfig": get,
    "ListTaskPushNotificationConfigs": list_configs,
    "DeleteTaskPushNotificationConfig": delete,
}
