"""Shape workflow events and the saved checkpoint into the documented JSON body.

The same collector feeds the JSON response and the SSE stream, so the stream's
final ``done`` payload is exactly the JSON body a non-streaming call returns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from agent_framework import AgentResponse, AgentResponseUpdate, Message, WorkflowCheckpoint, WorkflowEvent

from ..checkpoints.info import checkpoint_status
from ..threads.transcript import recorded
from .lifecycle import LifecycleClock


def to_json(value: Any) -> Any:  # noqa: PLR0911 - one branch per kind of value
    """A JSON-safe view of an output or request payload, for callers, not for restore."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Message):
        return message_json(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json(v) for v in value]
    for method in ("model_dump", "to_dict"):
        dump = getattr(value, method, None)
        if callable(dump):
            return to_json(dump())
    return str(value)


def message_json(message: Message) -> dict[str, str]:
    return {"role": str(message.role), "content": message.text}


def request_json(event: WorkflowEvent) -> dict[str, Any]:
    """A pending human-in-the-loop request as callers see it."""
    response_type = event.response_type
    return {
        "request_id": event.request_id,
        "data": to_json(event.data),
        "response_type": getattr(response_type, "__name__", str(response_type)),
    }


# Where a checkpoint's metadata records that its turn ran from edited state (``checkpoint_state``).
EDITED = "edited"


def turn_json(checkpoint: WorkflowCheckpoint) -> dict[str, Any]:
    """What a checkpoint's turn was sent and answered (its transcript), and the requests it
    left pending, rendered as a run's answer renders them; ``edited`` when its turn ran from
    an edited state."""
    edited = checkpoint.metadata.get(EDITED)
    return {
        **recorded(checkpoint.metadata),
        "pending_requests": [request_json(e) for e in checkpoint.pending_request_info_events.values()],
        **({EDITED: edited} if edited else {}),
    }


class ResultCollector:
    """Accumulates what a run produced, event by event."""

    def __init__(self, *, lifecycle: bool = False) -> None:
        """``lifecycle``: also render each superstep and executor invocation (``"events": "all"``)."""
        self._lifecycle = LifecycleClock(to_json) if lifecycle else None
        self.messages: list[dict[str, str]] = []
        self.outputs: list[Any] = []
        # Streamed agent tokens, joined into one assistant message per executor.
        self._deltas: dict[str, list[str]] = {}

    def include_lifecycle(self) -> None:
        """Render each superstep and executor invocation from now on (``"events": "all"``); a
        collector carried across a continuation keeps what it had already produced."""
        if self._lifecycle is None:
            self._lifecycle = LifecycleClock(to_json)

    def add(self, event: WorkflowEvent) -> tuple[str, dict[str, Any]] | None:
        """Record ``event``; return the SSE (name, data) it becomes, if callers see it."""
        if event.type == "output":
            data = event.data
            executor_id = str(event.executor_id)
            if isinstance(data, AgentResponseUpdate):
                self._deltas.setdefault(executor_id, []).append(data.text)
                return "output", {"executor_id": executor_id, "delta": data.text}
            if isinstance(data, AgentResponse):
                items = [message_json(m) for m in data.messages if m.text]
                self.messages.extend(items)
                return "output", {"executor_id": executor_id, "messages": items}
            if isinstance(data, Message):
                item = message_json(data)
                self.messages.append(item)
                return "output", {"executor_id": executor_id, "message": item}
            value = to_json(data)
            self.outputs.append(value)
            return "output", {"executor_id": executor_id, "output": value}
        if event.type == "request_info":
            return "request_info", request_json(event)
        return None if self._lifecycle is None else self._lifecycle.render(event)

    def snapshot(self) -> dict[str, Any]:
        """What was collected so far, JSON-native (a progress checkpoint carries it)."""
        return {
            "messages": list(self.messages),
            "outputs": list(self.outputs),
            "deltas": {k: list(v) for k, v in self._deltas.items()},
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Go on from a ``snapshot`` (a run continued from its progress checkpoint)."""
        self.messages = [dict(m) for m in snapshot.get("messages", [])]
        self.outputs = list(snapshot.get("outputs", []))
        self._deltas = {str(k): [str(t) for t in v] for k, v in dict(snapshot.get("deltas", {})).items()}

    def body(self, saved: WorkflowCheckpoint) -> dict[str, Any]:
        """The final response body, described from the checkpoint that was saved."""
        for parts in self._deltas.values():
            self.messages.append({"role": "assistant", "content": "".join(parts)})
        self._deltas.clear()
        return {
            "checkpoint_id": saved.checkpoint_id,
            "previous_checkpoint_id": saved.previous_checkpoint_id,
            "status": checkpoint_status(saved),
            "messages": self.messages,
            "outputs": self.outputs,
            "pending_requests": [request_json(e) for e in saved.pending_request_info_events.values()],
        }
