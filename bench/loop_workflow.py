"""A workflow of many supersteps for the durability tests and drills: ``loop N`` runs one start
superstep, then N steps of one executor that sends to itself, each yielding an output
(``loop N ask``: the last step asks for an answer instead, a human-in-the-loop pause). Every
step is recorded in ``CALLS``, so a test can count what ran twice after a crash; ``ON_STEP``
hooks run inside a step (to stop the run there), ``STEP_SECONDS`` makes each step take that long.

For a drill in another process (``bench/crash_drill.py``): ``LOOP_CALLS_FILE`` appends each
step's number to a file (so the count survives the process), and ``LOOP_KILL_AT=k`` kills
the process with SIGKILL inside step k.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from agent_framework import Executor, Message, Workflow, WorkflowBuilder, WorkflowContext, handler, response_handler

from workflows import WorkflowSpec

CALLS: list[int] = []
ON_STEP: list[Callable[[int], Awaitable[None]]] = []
STEP_SECONDS = [float(os.environ.get("LOOP_STEP_SECONDS", "0"))]
NAME = "loop"


class Start(Executor):
    """Parses ``loop N``; keeps every user text of the thread, as the default workflow does (so
    storage audits can tell an input applied twice)."""

    def __init__(self) -> None:
        super().__init__(id="start")
        self.user_texts: list[str] = []

    @handler
    async def on_messages(self, messages: list[Message], ctx: WorkflowContext[list[int]]) -> None:
        self.user_texts.extend(m.text for m in messages)
        words = " ".join(m.text for m in messages).split()
        total = int(words[1]) if len(words) > 1 and words[1].isdigit() else 3
        if total > 0:  # ``loop 0``: this superstep is the whole run
            await ctx.send_message([1, total, int("ask" in words[2:])])

    async def on_checkpoint_save(self) -> dict[str, Any]:
        return {"user_texts": list(self.user_texts)}

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        self.user_texts = [str(text) for text in state.get("user_texts", [])]


class Step(Executor):
    def __init__(self) -> None:
        super().__init__(id="step")
        self.done = 0

    @handler
    async def on_step(self, position: list[int], ctx: WorkflowContext[list[int], str]) -> None:
        step, total, ask = position
        CALLS.append(step)
        _record_in_file(step)
        for hook in ON_STEP:
            await hook(step)
        if STEP_SECONDS[0]:
            await asyncio.sleep(STEP_SECONDS[0])
        if os.environ.get("LOOP_KILL_AT") == str(step):  # inside the step, once its time passed
            os.kill(os.getpid(), signal.SIGKILL)
        self.done += 1
        if step == total and ask:
            await ctx.request_info(f"approve {total} steps?", str)
            return
        await ctx.yield_output(f"step {step} of {total} (done {self.done})")
        if step < total:
            await ctx.send_message([step + 1, total, ask])

    @response_handler
    async def on_answer(self, question: str, answer: str, ctx: WorkflowContext[list[int], str]) -> None:
        await ctx.yield_output(f"{question} {answer}")

    async def on_checkpoint_save(self) -> dict[str, Any]:
        return {"done": self.done}

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        self.done = int(state["done"])


def _record_in_file(step: int) -> None:
    path = os.environ.get("LOOP_CALLS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as calls:
            calls.write(f"{step}\n")


def build() -> Workflow:
    start, step = Start(), Step()
    return (
        WorkflowBuilder(name=NAME, start_executor=start, max_iterations=500)
        .add_edge(start, step)
        .add_edge(step, step)
        .build()
    )


SPEC = WorkflowSpec(build=build)
SUPERSTEP_SPEC = WorkflowSpec(build=build, durability="superstep")
