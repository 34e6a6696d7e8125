"""A chain of N executors with a state payload of S bytes: the benchmark's workflow.

Configure with ``configure(supersteps, state_bytes, shape)`` before building. The first
executor keeps ``state_bytes`` of JSON-native state in its checkpoint, so the checkpoint
size is set without pickles; each executor runs in its own superstep. The ``text`` shape is
one string (cheap to copy: Python shares it); ``conversation`` is a list of small message
dicts, what a chat's state looks like, which every deep copy walks item by item.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from agent_framework import Executor, Message, Workflow, WorkflowBuilder, WorkflowContext, handler

from workflows import WorkflowSpec

NAME = "bench-chain"


@dataclass
class Config:
    supersteps: int = 5
    state_bytes: int = 20_000
    shape: str = "text"


CONFIG = Config()


SHAPES = ("text", "conversation")
_ITEM_TEXT = 400  # a conversation item: about 440 bytes of JSON


def configure(supersteps: int, state_bytes: int, shape: str = "text") -> None:
    if shape not in SHAPES:
        raise ValueError(f"shape is one of {SHAPES}")
    CONFIG.supersteps = supersteps
    CONFIG.state_bytes = state_bytes
    CONFIG.shape = shape


@functools.cache
def _payload(state_bytes: int, shape: str) -> str | list[dict[str, str]]:
    """One shared payload: a resume replaces it with the restored state anyway, and a fresh
    megabyte per build would be the benchmark's own allocation, not the app's."""
    if shape == "text":
        return "x" * state_bytes
    item = "y" * _ITEM_TEXT
    return [{"role": "user", "id": f"m{i}", "text": item} for i in range(max(1, state_bytes // (_ITEM_TEXT + 40)))]


class Head(Executor):
    def __init__(self, state_bytes: int) -> None:
        super().__init__(id="step-0")
        self.payload = _payload(state_bytes, CONFIG.shape)
        self.turns = 0

    @handler
    async def on_messages(self, messages: list[Message], ctx: WorkflowContext[str, Message]) -> None:
        self.turns += 1
        text = messages[-1].text
        if CONFIG.supersteps == 1:
            await ctx.yield_output(Message(role="assistant", contents=[f"turn {self.turns}: {text}"]))
        else:
            await ctx.send_message(f"turn {self.turns}: {text}")

    async def on_checkpoint_save(self) -> dict[str, Any]:
        return {"payload": self.payload, "turns": self.turns}

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        self.payload = state["payload"]
        self.turns = state["turns"]


class Step(Executor):
    def __init__(self, index: int, last: bool) -> None:
        super().__init__(id=f"step-{index}")
        self.last = last

    @handler
    async def on_text(self, text: str, ctx: WorkflowContext[str, Message]) -> None:
        if self.last:
            await ctx.yield_output(Message(role="assistant", contents=[text]))
        else:
            await ctx.send_message(text)


def build_workflow() -> Workflow:
    head = Head(CONFIG.state_bytes)
    steps = [Step(i, last=i == CONFIG.supersteps - 1) for i in range(1, CONFIG.supersteps)]
    builder = WorkflowBuilder(name=NAME, start_executor=head)
    previous: Executor = head
    for step in steps:
        builder.add_edge(previous, step)
        previous = step
    return builder.build()


SPEC = WorkflowSpec(build=build_workflow)
