"""A one-executor test workflow whose outputs JSON has no plain spelling for.

The message text picks the output: ``nan`` yields NaN and the infinities, ``surrogate``
yields a string holding a lone surrogate.
"""

from __future__ import annotations

from agent_framework import Executor, Message, Workflow, WorkflowBuilder, WorkflowContext, handler

from workflows import WorkflowSpec


class OddOutputs(Executor):
    def __init__(self) -> None:
        super().__init__(id="odd")

    @handler
    async def on_messages(self, messages: list[Message], ctx: WorkflowContext[None, object]) -> None:
        text = " ".join(m.text for m in messages)
        if "nan" in text:
            await ctx.yield_output({"nan": float("nan"), "inf": float("inf"), "neg": float("-inf"), "ok": 1.5})
        if "surrogate" in text:
            await ctx.yield_output("half a pair: \ud800 end")


def build() -> Workflow:
    return WorkflowBuilder(name="odd-outputs", start_executor=OddOutputs()).build()


SPEC = WorkflowSpec(build=build)
