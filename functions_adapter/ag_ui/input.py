"""``RunAgentInput`` → what one turn applies, decided without storage.

A frontend sends its whole conversation on every run. Only the input messages (user,
system, developer) after its last message of any other role can be new: everything before
a reply the thread gave is in the thread already. Which of those the thread's last turn
recorded is decided inside the turn, on the checkpoint it resumes from
(``resumable.core.resume.unseen_input``). ``state``, ``tools``, ``context``
and ``protocolVersion`` are accepted and not used; of ``forwardedProps``, only ``workflow``
is read (the workflow a new thread runs, as the runs routes' ``workflow``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ag_ui.core import RunAgentInput
from agent_framework import Message
from pydantic import ValidationError

from functions_adapter.params import json_object
from functions_adapter.settings import InputLimits
from resumable.base import InvalidRequest, strict_json

_INPUT_ROLES = {"user": "user", "system": "system", "developer": "system"}
MAX_ID_CHARS = 256


@dataclass(frozen=True, slots=True)
class AgUiRun:
    thread_id: str
    run_id: str
    # The input messages after the conversation's last reply, each with the client's ID.
    candidates: tuple[Message, ...]
    # ``resume`` entries with ``status: resolved``: interrupt ID → payload (our ``responses``).
    answers: dict[str, Any]
    # Whether the run carried ``resume`` at all (all cancelled: nothing is answered).
    resumed: bool
    # ``forwardedProps.workflow``: the workflow a new thread runs (checked in ``turns``).
    workflow: str | None = None

    def runs_body(self) -> bytes:
        """The turn as ``POST /api/threads/{id}/runs`` takes it (so its parser bounds it)."""
        if self.answers:
            body: dict[str, Any] = {"responses": self.answers}
        else:
            body = {"messages": [{"role": str(m.role), "content": m.text} for m in self.candidates]}
        if self.workflow is not None:
            body["workflow"] = self.workflow
        return strict_json.dumps({**body, "stream": True})


def parse_input(body: bytes, limits: InputLimits) -> AgUiRun:
    """400 (``InvalidRequest``) for a body that is not a ``RunAgentInput``; never more."""
    data = json_object(body)
    try:
        parsed = RunAgentInput.model_validate(data)
    except ValidationError as exc:
        where = ", ".join(".".join(str(p) for p in e["loc"]) for e in exc.errors()[:5])
        raise InvalidRequest(f"The body is not an AG-UI RunAgentInput (at {where}).") from None
    for name, value in (("threadId", parsed.thread_id), ("runId", parsed.run_id)):
        if not value or len(value) > MAX_ID_CHARS:
            raise InvalidRequest(f"'{name}' must be a non-empty string of at most {MAX_ID_CHARS} characters.")
    if len(parsed.messages) > limits.max_messages * 10:  # a whole conversation, bounded by the body size too
        raise InvalidRequest(f"'messages' holds at most {limits.max_messages * 10} messages.")
    if any(not m.id or len(m.id) > MAX_ID_CHARS for m in parsed.messages):
        raise InvalidRequest(f"A message's 'id' must be a non-empty string of at most {MAX_ID_CHARS} characters.")
    resume = parsed.resume or []
    if len(resume) > limits.max_responses:
        raise InvalidRequest(f"'resume' holds at most {limits.max_responses} entries.")
    return AgUiRun(
        thread_id=parsed.thread_id,
        run_id=parsed.run_id,
        candidates=tuple(_candidates(parsed.messages)),
        answers={e.interrupt_id: e.payload for e in resume if e.status == "resolved"},
        resumed=bool(resume),
        workflow=_workflow(parsed.forwarded_props),
    )


def _workflow(forwarded: Any) -> str | None:
    value = forwarded.get("workflow") if isinstance(forwarded, dict) else None
    if value is not None and not isinstance(value, str):
        raise InvalidRequest("'forwardedProps.workflow' must be a workflow's name, or 'name@version'.")
    return value


def _candidates(messages: list[Any]) -> list[Message]:
    last_reply = max((i for i, m in enumerate(messages) if _role(m) not in _INPUT_ROLES), default=-1)
    found = []
    for message in messages[last_reply + 1 :]:
        found.append(Message(role=_INPUT_ROLES[_role(message)], contents=[_text(message)], message_id=message.id))
    return found


def _role(message: Any) -> str:
    return str(getattr(message, "role", ""))


def _text(message: Any) -> str:
    """A message's text: a string, or the text parts of a multimodal user message."""
    content = message.content
    if isinstance(content, str):
        return content
    texts = [getattr(part, "text", None) for part in content]
    if not texts or any(not isinstance(t, str) for t in texts):
        raise InvalidRequest(f"Message '{message.id}': only text content is supported.")
    return "\n".join(texts)
