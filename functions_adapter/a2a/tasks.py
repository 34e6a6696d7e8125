"""Our run documents as A2A v1.0 objects (protobuf JSON: camelCase fields, enum names).

A task is one turn: its ID is the background run's ID, its ``contextId`` the thread's ID.
Run states map to task states; a turn that ended waiting on the head's pending requests is
``input-required``, its requests in the status message as a data part.
"""

from __future__ import annotations

import uuid
from typing import Any

_STATES = {
    "queued": "TASK_STATE_SUBMITTED",
    "running": "TASK_STATE_WORKING",
    "failed": "TASK_STATE_FAILED",
    "cancelled": "TASK_STATE_CANCELED",
}
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
COMPLETED = "TASK_STATE_COMPLETED"
FINAL = {COMPLETED, INPUT_REQUIRED, "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}


def state_of(run: dict[str, Any]) -> str:
    if run["status"] == "succeeded":
        return INPUT_REQUIRED if (run.get("result") or {}).get("pending_requests") else COMPLETED
    return _STATES.get(run["status"], "TASK_STATE_WORKING")


def _agent_message(task_id: str, context_id: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_AGENT",
        "taskId": task_id,
        "contextId": context_id,
        "parts": parts,
    }


def status_of(run: dict[str, Any]) -> dict[str, Any]:
    """The task's ``TaskStatus``: its state, and why when it is not plainly working or done."""
    state = state_of(run)
    status: dict[str, Any] = {"state": state}
    result = run.get("result") or {}
    if state == INPUT_REQUIRED:
        pending = result.get("pending_requests")
        ask = "Answer with a data part {'responses': {request_id: answer}} on this task."
        parts = [{"text": ask}, {"data": {"pending_requests": pending}, "mediaType": "application/json"}]
        status["message"] = _agent_message(run["run_id"], run["thread_id"], parts)
    elif run.get("error"):
        error = run["error"]
        text = f"{error.get('code')}: {error.get('message')}"
        status["message"] = _agent_message(run["run_id"], run["thread_id"], [{"text": text}])
    return status


def artifacts_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The turn's assistant messages as one text artifact (none before it finished)."""
    result = run.get("result") or {}
    texts = [m["content"] for m in result.get("messages", []) if m.get("role") == "assistant" and m.get("content")]
    if run["status"] != "succeeded" or not texts:
        return []
    parts = [{"text": text} for text in texts if isinstance(text, str)]
    return [{"artifactId": f"{run['run_id']}-reply", "name": "reply", "parts": parts}]


def task_of(run: dict[str, Any]) -> dict[str, Any]:
    """The A2A ``Task`` for a run document."""
    task: dict[str, Any] = {"id": run["run_id"], "contextId": run["thread_id"], "status": status_of(run)}
    artifacts = artifacts_of(run)
    if artifacts:
        task["artifacts"] = artifacts
    metadata = {k: (run.get("result") or {}).get(k) for k in ("checkpoint_id", "turns")}
    task["metadata"] = {k: v for k, v in metadata.items() if v is not None}
    return task
