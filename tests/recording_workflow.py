"""A test workflow whose executors record every call, to prove what did or did not run.

A chain of three executors (three supersteps). Message text controls behaviour:
``fail`` raises in the last executor; ``wait`` makes the last executor wait for
``RELEASE`` so a test can observe the stream while the run is still going.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agent_framework import Executor, Message, Workflow, WorkflowBuilder, WorkflowContext, handler

from workflows import WorkflowSpec

CALLS: list[tuple[str, str]] = []
RELEASE = asyncio.Event()
WAITING = asyncio.Event()
GAVE_UP: list[str] = []
# Called by the tail executor when set: lets a test break things mid-run.
ON_TAIL: list[Callable[[], None]] = []
NAME = "recording"


class Head(Executor):
    def __init__(self) -> None:
        super().__init__(id="head")
        self.seen = 0

    @handler
    async def on_messages(self, messages: list[Message], ctx: WorkflowContext[str]) -> None:
        text = " ".join(m.text for m in messages)
        CALLS.append((self.id, text))
        self.seen += 1
        await ctx.send_message(text)

    async def on_checkpoint_save(self) -> dict[str, Any]:
        return {"seen": self.seen}

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        self.seen = int(state["seen"])


class Middle(Executor):
    def __init__(self) -> None:
        super().__init__(id="middle")

    @handler
    async def on_text(self, text: str, ctx: WorkflowContext[str, str]) -> None:
        CALLS.append((self.id, text))
        await ctx.yield_output(f"middle saw {text}")
        await ctx.send_message(text)


class Tail(Executor):
    def __init__(self) -> None:
        super().__init__(id="tail")

    @handler
    async def on_text(self, text: str, ctx: WorkflowContext[None, Message]) -> None:
        CALLS.append((self.id, text))
        for hook in ON_TAIL:
            hook()
        if "wait" in text:
            WAITING.set()
            try:
                await asyncio.wait_for(RELEASE.wait(), timeout=10)
            except TimeoutError:
                GAVE_UP.append(text)
                raise
        if "fail" in text:
            raise RuntimeError("secret internal detail /home/app/x.py")
        await ctx.yield_output(Message(role="assistant", contents=[f"tail done: {text}"]))


def build(name: str = NAME) -> Workflow:
    head, middle, tail = Head(), Middle(), Tail()
    return WorkflowBuilder(name=name, start_executor=head).add_edge(head, middle).add_edge(middle, tail).build()


SPEC = WorkflowSpec(build=build)
