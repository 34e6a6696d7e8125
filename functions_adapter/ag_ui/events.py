"""Our run's events → AG-UI events, and a thread's messages → a ``MESSAGES_SNAPSHOT``.

A reply's message ID is the one the thread's history gives it afterwards
(``msg_<checkpoint_id>_<n>``, ``resumable.threads.transcript``): the turn saves under a
checkpoint ID chosen before it runs, and ``n`` counts on from the messages it applied.
So a reply streamed now and the same reply in a later snapshot are one message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    Interrupt,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    SystemMessage,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    UserMessage,
)
from ag_ui.core.version import PROTOCOL_VERSION

from functions_adapter.status_map import RETRY_AFTER_SECONDS
from resumable.base import ResumeError, strict_json
from resumable.core.event_pump import IdleTick
from resumable.core.runs import Event
from resumable.threads import ThreadMessage

# The interrupt's reason: a workflow's human-in-the-loop request (Agent Framework's request_info).
INTERRUPT_REASON = "request_info"


def started(thread_id: str, run_id: str) -> RunStartedEvent:
    return RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION)


# Seconds to wait before trying again, by error code (``status_map``'s Retry-After table).
_RETRY_AFTER = {cls.code: seconds for cls, seconds in RETRY_AFTER_SECONDS.items()}


def failed(error: ResumeError) -> RunErrorEvent:
    return run_error(error.code, error.message)


def run_error(code: str | None, message: str) -> RunErrorEvent:
    """``RUN_ERROR`` with our code; a retryable one (``thread_busy``) says when, as
    ``metadata.retryAfterSeconds`` (the ``Retry-After`` of our HTTP answers)."""
    seconds = _RETRY_AFTER.get(code or "")
    metadata = None if seconds is None else {"retryAfterSeconds": seconds}
    return RunErrorEvent(message=message, code=code, metadata=metadata)


def finished(thread_id: str, run_id: str, pending: Iterable[Mapping[str, Any]]) -> RunFinishedEvent:
    """Success, or paused on the pending requests (each an interrupt, answered by its ID)."""
    interrupts = [_interrupt(request) for request in pending]
    outcome = RunFinishedInterruptOutcome(interrupts=interrupts) if interrupts else None
    return RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=outcome)


def _interrupt(request: Mapping[str, Any]) -> Interrupt:
    data = request.get("data")
    return Interrupt(
        id=str(request["request_id"]),
        reason=INTERRUPT_REASON,
        message=data if isinstance(data, str) else strict_json.dumps(data).decode(),
        metadata={"data": data, "response_type": request.get("response_type")},
    )


def snapshot(messages: Iterable[ThreadMessage]) -> MessagesSnapshotEvent:
    return MessagesSnapshotEvent(messages=[_message(m) for m in messages])


def _message(message: ThreadMessage) -> Any:
    """A sent message under the ID its client gave it, if it had one; a reply under the thread's."""
    message_id = message.client_id or message.message_id
    if message.role == "user":
        return UserMessage(id=message_id, content=message.content)
    if message.role == "system":
        return SystemMessage(id=message_id, content=message.content)
    return AssistantMessage(id=message_id, content=message.content)


class ReplyStream:
    """Turns one turn's ``(name, data)`` events into text messages and the run's end."""

    def __init__(self, thread_id: str, run_id: str, checkpoint_id: str, first_index: int) -> None:
        self._thread_id, self._run_id = thread_id, run_id
        self._prefix, self._next = f"msg_{checkpoint_id}_", first_index
        self._streaming: dict[str, str] = {}  # executor ID → the message its deltas go to

    def _new_id(self) -> str:
        message_id = f"{self._prefix}{self._next}"
        self._next += 1
        return message_id

    async def events(self, source: AsyncIterator[Event | IdleTick]) -> AsyncIterator[BaseEvent | IdleTick]:
        async for item in source:
            if isinstance(item, IdleTick):
                yield item
                continue
            name, data = item
            if name == "output":
                for event in self._output(data):
                    yield event
            elif name == "done":
                for message_id in self._streaming.values():
                    yield TextMessageEndEvent(message_id=message_id)
                self._streaming.clear()
                yield finished(self._thread_id, self._run_id, data.get("pending_requests", []))
            elif name == "error":
                error = data.get("error", {})
                yield run_error(error.get("code"), str(error.get("message", "")))

    def _output(self, data: Mapping[str, Any]) -> list[BaseEvent]:
        if "delta" in data:
            executor = str(data.get("executor_id"))
            events: list[BaseEvent] = []
            if executor not in self._streaming:
                self._streaming[executor] = self._new_id()
                events.append(TextMessageStartEvent(message_id=self._streaming[executor], role="assistant"))
            if data["delta"]:
                events.append(TextMessageContentEvent(message_id=self._streaming[executor], delta=data["delta"]))
            return events
        if "message" in data:
            texts = [data["message"].get("content", "")]
        elif "messages" in data:
            texts = [m.get("content", "") for m in data["messages"]]
        else:
            value = data.get("output")
            texts = [value if isinstance(value, str) else strict_json.dumps(value).decode()]
        return [event for text in texts for event in self._whole(str(text))]

    def _whole(self, text: str) -> list[BaseEvent]:
        message_id = self._new_id()
        content = [TextMessageContentEvent(message_id=message_id, delta=text)] if text else []
        return [
            TextMessageStartEvent(message_id=message_id, role="assistant"),
            *content,
            TextMessageEndEvent(message_id=message_id),
        ]
