"""Our run documents and committed turns as A2A v1.0 objects (protobuf JSON: camelCase
fields, enum names).

A task is one turn, and the turns that answer its requests (``task_ids``): a background
task is rendered from its run's document, a synchronous one from its latest turn (the
turn's answer, or its checkpoint read back). Run states map to task states; a turn that
ended waiting on the head's pending requests is ``input-required``, its requests in the
status message as a data part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from resumable.threads.transcript import transcript

_STATES = {
    "queued": "TASK_STATE_SUBMITTED",
    "running": "TASK_STATE_WORKING",
    "failed": "TASK_STATE_FAILED",
    "cancelled": "TASK_STATE_CANCELED",
}
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
COMPLETED = "TASK_STATE_COMPLETED"
WORKING = "TASK_STATE_WORKING"
FAILED = "TASK_STATE_FAILED"
FINAL = {COMPLETED, INPUT_REQUIRED, FAILED, "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
ASK = "Answer with a data part {'responses': {request_id: answer}} on this task."


def state_of(run: dict[str, Any]) -> str:
    if run["status"] == "succeeded":
        return INPUT_REQUIRED if (run.get("result") or {}).get("pending_requests") else COMPLETED
    return _STATES.get(run["status"], WORKING)


def agent_message(task_id: str, context_id: str, parts: list[dict[str, Any]], about: str) -> dict[str, Any]:
    """The agent's status message; its ID names the turn it is ``about`` (a checkpoint or run
    ID), so a task read twice says the same."""
    return {
        "messageId": f"{about}-status",
        "role": "ROLE_AGENT",
        "taskId": task_id,
        "contextId": context_id,
        "parts": parts,
    }


def _asking(task_id: str, context_id: str, pending: Any, about: str) -> dict[str, Any]:
    parts = [{"text": ASK}, {"data": {"pending_requests": pending}, "mediaType": "application/json"}]
    return {"state": INPUT_REQUIRED, "message": agent_message(task_id, context_id, parts, about)}


def failed_status(
    task_id: str, context_id: str, error: Mapping[str, Any], about: str, state: str = FAILED
) -> dict[str, Any]:
    """A task that did not end as asked (``state``), our error code and message saying why."""
    text = f"{error.get('code')}: {error.get('message')}"
    return {"state": state, "message": agent_message(task_id, context_id, [{"text": text}], about)}


def status_of(run: dict[str, Any]) -> dict[str, Any]:
    """The task's ``TaskStatus``: its state, and why when it is not plainly working or done."""
    state = state_of(run)
    if state == INPUT_REQUIRED:
        pending = (run.get("result") or {}).get("pending_requests")
        return _asking(run["run_id"], run["thread_id"], pending, run["run_id"])
    if run.get("error"):
        return failed_status(run["run_id"], run["thread_id"], run["error"], run["run_id"], state)
    return {"state": state}


def _reply(artifact_id: str, texts: Sequence[Any]) -> list[dict[str, Any]]:
    parts = [{"text": text} for text in texts if isinstance(text, str) and text]
    return [{"artifactId": artifact_id, "name": "reply", "parts": parts}] if parts else []


def artifacts_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The turn's assistant messages as one text artifact (none before it finished)."""
    if run["status"] != "succeeded":
        return []
    result = run.get("result") or {}
    texts = [m.get("content") for m in result.get("messages", []) if m.get("role") == "assistant"]
    return _reply(f"{run['run_id']}-reply", texts)


def task_of(run: dict[str, Any]) -> dict[str, Any]:
    """The A2A ``Task`` for a run document."""
    task: dict[str, Any] = {"id": run["run_id"], "contextId": run["thread_id"], "status": status_of(run)}
    artifacts = artifacts_of(run)
    if artifacts:
        task["artifacts"] = artifacts
    metadata = {k: (run.get("result") or {}).get(k) for k in ("checkpoint_id", "turns")}
    task["metadata"] = {k: v for k, v in metadata.items() if v is not None}
    return task


def turn_task(task_id: str, context_id: str, turn: int, turn_json: Mapping[str, Any]) -> dict[str, Any]:
    """The A2A ``Task`` whose latest turn is ``turn_json``: what the turn answered (``out``,
    ``{"role", "content"}`` items, as a turn's transcript records them) and the requests it
    left pending (``results.turn_json``'s shape); ``turn`` counts the task's turns."""
    pending = turn_json.get("pending_requests") or []
    about = f"{task_id}.{turn}"
    status = _asking(task_id, context_id, pending, about) if pending else {"state": COMPLETED}
    task: dict[str, Any] = {"id": task_id, "contextId": context_id, "status": status}
    texts = [m.get("content") for m in turn_json.get("out", []) if m.get("role") == "assistant"]
    artifacts = _reply(f"{task_id}-reply", texts)
    if artifacts:
        task["artifacts"] = artifacts
    checkpoint_id = turn_json.get("checkpoint_id")
    task["metadata"] = {"turn": turn, **({"checkpoint_id": checkpoint_id} if checkpoint_id else {})}
    return task


def answered_json(body: Mapping[str, Any]) -> dict[str, Any]:
    """A turn's answer (the runs routes' result body) in ``results.turn_json``'s shape, its
    reply read as the turn's transcript records it, so a task answered now and the same task
    read back later say the same."""
    return {
        "out": transcript([], body)["out"],
        "pending_requests": body.get("pending_requests") or [],
        "checkpoint_id": body.get("checkpoint_id"),
    }
