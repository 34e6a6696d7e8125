"""A ten-step pipeline to watch in the console's debugger: offline, deterministic.

Ten executors in a chain, one superstep each. ``step-1`` counts the turns and keeps the
user's messages (plain JSON state: the console can edit it and fork a turn from the edit);
steps 2 to 9 each add their number to the text; ``step-10`` answers and keeps the last turn
as a ``Stamp`` dataclass, which a checkpoint can only pickle (the console shows that state
but refuses to edit it). A message containing the word "slowly" makes each step pause
``SLOW_STEP_SECONDS``, so each executor can be seen running.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

from agent_framework import Executor, Message, Workflow, WorkflowBuilder, WorkflowContext, handler

from . import WorkflowSpec

WORKFLOW_NAME = "step-pipeline"
STEPS = 10
SLOW_STEP_SECONDS = 0.3
_SLOWLY = re.compile(r"\bslowly\b", re.IGNORECASE)


@dataclass(frozen=True)
class Stamp:
    """The last turn ``step-10`` answered: a dataclass, so its checkpoint pickles it."""

    turn: int
    text: str


@dataclass(frozen=True)
class Carried:
    """What passes from step to step (in flight only, never saved)."""

    turn: int
    text: str
    path: tuple[int, ...]
    slow: bool


async def _pause(carried: Carried) -> None:
    if carried.slow:
        await asyncio.sleep(SLOW_STEP_SECONDS)


class Counter(Executor):
    """Step 1: counts turns and keeps the user's messages, as plain JSON."""

    def __init__(self) -> None:
        super().__init__(id="step-1")
        self.turn = 0
        self.texts: list[str] = []

    @handler
    async def on_messages(self, messages: list[Message], ctx: WorkflowContext[Carried]) -> None:
        text = " / ".join(m.text for m in messages if m.role == "user" and m.text)
        self.turn += 1
        self.texts.append(text)
        carried = Carried(self.turn, text, (1,), bool(_SLOWLY.search(text)))
        await _pause(carried)
        await ctx.send_message(carried)

    async def on_checkpoint_save(self) -> dict[str, Any]:
        return {"turn": self.turn, "texts": list(self.texts)}

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        self.turn = int(state.get("turn", 0))
        self.texts = [str(t) for t in state.get("texts", [])]


class Step(Executor):
    """Steps 2 to 9: add their number to the path."""

    def __init__(self, number: int) -> None:
        super().__init__(id=f"step-{number}")
        self.number = number

    @handler
    async def on_carried(self, carried: Carried, ctx: WorkflowContext[Carried]) -> None:
        await _pause(carried)
        await ctx.send_message(Carried(carried.turn, carried.text, (*carried.path, self.number), carried.slow))


class Answer(Executor):
    """Step 10: answers, and keeps the turn it answered as a ``Stamp``."""

    def __init__(self) -> None:
        super().__init__(id=f"step-{STEPS}")
        self.last: Stamp | None = None

    @handler
    async def on_carried(self, carried: Carried, ctx: WorkflowContext[None, Message]) -> None:
        await _pause(carried)
        path = " ".join(str(n) for n in (*carried.path, STEPS))
        self.last = Stamp(carried.turn, carried.text)
        reply = f'turn {carried.turn}: "{carried.text}" went through steps {path}'
        await ctx.yield_output(Message(role="assistant", contents=[reply]))

    async def on_checkpoint_save(self) -> dict[str, Any]:
        return {"last": self.last}

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        last = state.get("last")
        self.last = last if isinstance(last, Stamp) else None


def build_workflow() -> Workflow:
    """A fresh instance per call: workflow instances do not run concurrently."""
    first, last = Counter(), Answer()
    builder = WorkflowBuilder(name=WORKFLOW_NAME, start_executor=first)
    previous: Executor = first
    for number in range(2, STEPS):
        step = Step(number)
        builder.add_edge(previous, step)
        previous = step
    return builder.add_edge(previous, last).build()


SPEC = WorkflowSpec(build=build_workflow, checkpoint_types=(Stamp,))
