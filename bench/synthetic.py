"""A chain of N executors with a state payload of S bytes: the benchmark's workflow.

Configure with ``configure(supersteps, state_bytes)`` before building. The first
executor keeps ``state_bytes`` of JSON-native text in its checkpointed state, so the
checkpoint size is set without pickles; each executor runs in its own superstep.
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


CONFIG = Config()


def configure(supersteps: int, state_bytes: int) -> None:
    CONFIG.supersteps = supersteps
    CONFIG.state_bytes = state_bytes


@functools.cache
def _payload(state_bytes: int) -> str:
    """One shared string: a resume replaces it with the restored state anyway, and a fresh
    megabyte per build would be the benchmark's own allocation, not the app's."""
    return "x" * state_bytes


class Head(Executor):
    def __init__(self, state_bytes: int) -> None:
        super().__init__(id="step-0")
        self.payload = _payload(state_bytes)
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
