"""The default workflow: offline, deterministic, two executors. Replace it with yours.

It exists to make resumes visible. The reply to the n-th turn of a conversation says
``turn n`` and quotes the earlier user messages, so a reply shows exactly which
checkpoint it was resumed from. A message containing the word "approval" pauses the
turn on a human-in-the-loop request; answering it with ``responses`` finishes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agent_framework import Executor, Message, Workflow, WorkflowBuilder, WorkflowContext, handler, response_handler

from . import WorkflowSpec

WORKFLOW_NAME = "conversation-demo"
_APPROVAL = re.compile(r"\bapproval\b", re.IGNORECASE)


@dataclass(frozen=True)
class TurnDraft:
    """What the memory hands the responder for one turn (in flight only, never saved)."""

    turn: int
    text: str
    earlier: tuple[str, ...]


@dataclass(frozen=True)
class ApprovalRequest:
    """The pending question; stored in the checkpoint while the turn waits."""

    turn: int
    text: str
    earlier: tuple[str, ...]


def compose_reply(turn: int, text: str, earlier: tuple[str, ...], approval: str | None = None) -> str:
    history = ", ".join(f'"{t}"' for t in earlier) if earlier else "nothing yet"
    verdict = f' Approval answer: "{approval}".' if approval is not None else ""
    return f'turn {turn}: you said "{text}".{verdict} Earlier you said: {history}'


class ConversationMemory(Executor):
    """Keeps the user's messages and the turn count; its state is plain JSON."""

    def __init__(self) -> None:
        super().__init__(id="memory")
        self.user_texts: list[str] = []
        self.turn = 0

    @handler
    async def on_messages(self, messages: list[Message], ctx: WorkflowContext[TurnDraft]) -> None:
        texts = [m.text for m in messages if m.role == "user" and m.text]
        earlier = tuple(self.user_texts)
        self.turn += 1
        self.user_texts.extend(texts)
        await ctx.send_message(TurnDraft(turn=self.turn, text=" / ".join(texts), earlier=earlier))

    async def on_checkpoint_save(self) -> dict[str, Any]:
        return {"user_texts": list(self.user_texts), "turn": self.turn}

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        self.user_texts = [str(t) for t in state.get("user_texts", [])]
        self.turn = int(state.get("turn", 0))


class Responder(Executor):
    """Answers each turn, or asks for approval first when the user mentions it."""

    def __init__(self) -> None:
        super().__init__(id="responder")

    @handler
    async def on_draft(self, draft: TurnDraft, ctx: WorkflowContext[None, Message]) -> None:
        if _APPROVAL.search(draft.text):
            await ctx.request_info(ApprovalRequest(draft.turn, draft.text, draft.earlier), str)
            return
        await ctx.yield_output(_assistant(compose_reply(draft.turn, draft.text, draft.earlier)))

    @response_handler
    async def on_approval(self, request: ApprovalRequest, answer: str, ctx: WorkflowContext[None, Message]) -> None:
        await ctx.yield_output(_assistant(compose_reply(request.turn, request.text, request.earlier, answer)))


def _assistant(text: str) -> Message:
    return Message(role="assistant", contents=[text])


def build_workflow() -> Workflow:
    """A fresh instance per call: workflow instances do not run concurrently."""
    memory, responder = ConversationMemory(), Responder()
    return WorkflowBuilder(name=WORKFLOW_NAME, start_executor=memory).add_edge(memory, responder).build()


SPEC = WorkflowSpec(build=build_workflow, checkpoint_types=(ApprovalRequest,))
