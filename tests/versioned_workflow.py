"""Versions of the sample workflow, and a second workflow, for the version tests.

``v1`` is ``workflows.default_conversation`` itself. ``v2`` renames the ``memory`` executor
to ``history``, adds a ``tagger`` between it and the responder (a new executor and a
changed edge) and prefixes replies with ``[v2]``; its migration moves the state. ``v3``
keeps v2's graph with a ``[v3]`` responder and records that it migrated. ``BROKEN_V2``'s
migration raises. ``NOTES`` is another workflow whose state holds a ``Note`` (a class on its
allowlist only).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Any

from agent_framework import (
    Executor,
    Message,
    Workflow,
    WorkflowBuilder,
    WorkflowCheckpoint,
    WorkflowContext,
    handler,
    response_handler,
)

from resumable.core.catalog import executor_states
from workflows import WorkflowSpec
from workflows.default_conversation import (
    WORKFLOW_NAME,
    ApprovalRequest,
    ConversationMemory,
    Responder,
    TurnDraft,
    compose_reply,
)


class History(ConversationMemory):
    """v2's memory: the same state, under another executor ID."""

    def __init__(self) -> None:
        Executor.__init__(self, id="history")
        self.user_texts: list[str] = []
        self.turn = 0


class Tagger(Executor):
    """New in v2: counts the drafts it passes on."""

    def __init__(self) -> None:
        super().__init__(id="tagger")
        self.tagged = 0

    @handler
    async def on_draft(self, draft: TurnDraft, ctx: WorkflowContext[TurnDraft]) -> None:
        self.tagged += 1
        await ctx.send_message(draft)

    async def on_checkpoint_save(self) -> dict[str, Any]:
        return {"tagged": self.tagged}

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        self.tagged = int(state.get("tagged", 0))


class ResponderV2(Responder):
    """Replies as v1 does, prefixed ``[v2]`` (the sample's compose_reply is reused)."""

    PREFIX = "[v2]"

    @handler
    async def on_draft(self, draft: TurnDraft, ctx: WorkflowContext[None, Message]) -> None:
        if "approval" in draft.text.lower():
            await ctx.request_info(ApprovalRequest(draft.turn, draft.text, draft.earlier), str)
            return
        reply = compose_reply(draft.turn, draft.text, draft.earlier)
        await ctx.yield_output(Message(role="assistant", contents=[f"{self.PREFIX} {reply}"]))

    @response_handler
    async def on_approval(self, request: ApprovalRequest, answer: str, ctx: WorkflowContext[None, Message]) -> None:
        reply = compose_reply(request.turn, request.text, request.earlier, answer)
        await ctx.yield_output(Message(role="assistant", contents=[f"{self.PREFIX} {reply}"]))


class ResponderV3(ResponderV2):
    PREFIX = "[v3]"


def _graph(responder: Responder) -> Workflow:
    history, tagger = History(), Tagger()
    return (
        WorkflowBuilder(name=WORKFLOW_NAME, start_executor=history)
        .add_edge(history, tagger)
        .add_edge(tagger, responder)
        .build()
    )


def to_v2(checkpoint: WorkflowCheckpoint) -> None:
    states = executor_states(checkpoint)
    states["history"] = states.pop("memory", {})
    states["tagger"] = {"tagged": 0}


def to_v3(checkpoint: WorkflowCheckpoint) -> None:
    executor_states(checkpoint)["tagger"]["v3"] = True


def broken(checkpoint: WorkflowCheckpoint) -> None:
    raise RuntimeError("this migration has a bug")


SPEC_V2 = WorkflowSpec(build=lambda: _graph(ResponderV2()), checkpoint_types=(ApprovalRequest,), migrate=to_v2)
SPEC_V3 = WorkflowSpec(build=lambda: _graph(ResponderV3()), checkpoint_types=(ApprovalRequest,), migrate=to_v3)
BROKEN_V2 = WorkflowSpec(build=lambda: _graph(ResponderV2()), checkpoint_types=(ApprovalRequest,), migrate=broken)


@dataclass
class Note:
    """Kept pickled in the notes workflow's state: on its allowlist, not on the default's."""

    text: str


class NoteKeeper(Executor):
    def __init__(self) -> None:
        super().__init__(id="notes")
        self.notes: list[Note] = []

    @handler
    async def on_messages(self, messages: list[Message], ctx: WorkflowContext[None, Message]) -> None:
        self.notes.extend(Note(m.text) for m in messages if m.text)
        await ctx.yield_output(Message(role="assistant", contents=[f"notes: {[n.text for n in self.notes]}"]))

    async def on_checkpoint_save(self) -> dict[str, Any]:
        return {"notes": list(self.notes)}

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        self.notes = list(state.get("notes", []))


NOTES = WorkflowSpec(
    build=lambda: WorkflowBuilder(name="notes", start_executor=NoteKeeper()).build(), checkpoint_types=(Note,)
)


def returns_garbage(checkpoint: WorkflowCheckpoint) -> Any:
    return "not a checkpoint"


def spoils_then_raises(checkpoint: WorkflowCheckpoint) -> None:
    executor_states(checkpoint).pop("memory", None)  # edits its input, then fails
    raise RuntimeError("half done")


GARBAGE_V2 = WorkflowSpec(
    build=lambda: _graph(ResponderV2()), checkpoint_types=(ApprovalRequest,), migrate=returns_garbage
)
SPOILING_V2 = WorkflowSpec(
    build=lambda: _graph(ResponderV2()), checkpoint_types=(ApprovalRequest,), migrate=spoils_then_raises
)


def rebuilds(checkpoint: WorkflowCheckpoint) -> WorkflowCheckpoint:
    """Returns a new checkpoint (another ID) holding the migrated state."""
    fresh = dataclasses.replace(checkpoint, checkpoint_id=uuid.uuid4().hex, metadata=dict(checkpoint.metadata))
    to_v2(fresh)
    return fresh


REBUILDING_V2 = WorkflowSpec(build=lambda: _graph(ResponderV2()), checkpoint_types=(ApprovalRequest,), migrate=rebuilds)
