"""JSON-RPC 2.0 envelopes and A2A's error codes, hand-written: importing ``a2a-sdk`` would
load protobuf and google-api-core on a cold start for a few dozen lines of JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from functions_adapter.status_map import headers_of, status_of
from resumable.base.errors import ResumeError

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
UNSUPPORTED_OPERATION = -32004

# Our error codes that mean "no such task" or "not a task you can cancel" in A2A's terms.
_BY_CODE = {"run_not_found": TASK_NOT_FOUND, "run_finished": TASK_NOT_CANCELABLE}


class RpcError(Exception):
    """A JSON-RPC error to answer with."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@dataclass(frozen=True, slots=True)
class Call:
    id: str | int | None
    method: str
    params: dict[str, Any]


def readable_id(payload: Any) -> str | int | None:
    """The request's ``id`` if it is one JSON-RPC allows (a string or an integer), else None:
    an error answers an ID it could not read as null, never echoing what the caller sent."""
    call_id = payload.get("id") if isinstance(payload, dict) else None
    if isinstance(call_id, bool) or not isinstance(call_id, (str, int)):
        return None
    return call_id


def parse_call(payload: Any) -> Call:
    """A JSON-RPC 2.0 request object, or ``RpcError(INVALID_REQUEST)``. Batches are not served."""
    if not isinstance(payload, dict) or payload.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, "Expected a JSON-RPC 2.0 request object.")
    call_id = readable_id(payload)
    if call_id is None and payload.get("id") is not None:
        raise RpcError(INVALID_REQUEST, "'id' must be a string or an integer.")
    method = payload.get("method")
    if not isinstance(method, str):
        raise RpcError(INVALID_REQUEST, "'method' must be a string.")
    params = payload.get("params", {})
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "'params' must be an object.")
    return Call(call_id, method, params)


def flag(params: Mapping[str, Any], name: str) -> bool:
    """A boolean param (absent: false). Any other JSON value is refused, not judged by its
    truthiness: ``"false"`` would otherwise mean true."""
    value = params.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise RpcError(INVALID_PARAMS, f"'{name}' must be true or false.")
    return value


def from_resume_error(error: ResumeError) -> RpcError:
    """Our refusal as a JSON-RPC error: A2A's code where one fits, else invalid params for a
    client error and internal error for an outage; ``data`` keeps our error body and the
    HTTP status (and ``retry_after``) the same refusal has on the HTTP routes."""
    status = status_of(error)
    code = _BY_CODE.get(error.code) or (INVALID_PARAMS if status < 500 else INTERNAL_ERROR)
    data: dict[str, Any] = {**error.to_body(), "status": status}
    retry = headers_of(error).get("Retry-After")
    if retry is not None:
        data["retry_after"] = int(retry)
    return RpcError(code, error.message, data)


def result(call_id: str | int | None, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "result": value}


def error(call_id: str | int | None, exc: RpcError) -> dict[str, Any]:
    body: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        body["data"] = exc.data
    return {"jsonrpc": "2.0", "id": call_id, "error": body}
