"""A test workflow that pauses on a computer-use tool call, as an agent with a computer tool does.

The framework checks a ``computer_tool_result`` answer against its call (same call ID,
every pending safety check acknowledged) inside the run; the app must check it before.
"""

from __future__ import annotations

import warnings

from agent_framework import (
    Content,
    Executor,
    Message,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    response_handler,
)

from workflows import WorkflowSpec

CALLS: list[str] = []


class ComputerUser(Executor):
    def __init__(self) -> None:
        super().__init__(id="computer")

    @handler
    async def on_messages(self, messages: list[Message], ctx: WorkflowContext[None, str]) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # computer use is marked experimental
            call = Content.from_computer_tool_call(
                id="cu-1",
                call_id="call-1",
                actions=[{"type": "click", "x": 1, "y": 2}],
                pending_safety_checks=[{"id": "check-1", "code": "malicious_instructions", "message": "m"}],
            )
        await ctx.request_info(call, Content)

    @response_handler
    async def on_result(self, request: Content, result: Content, ctx: WorkflowContext[None, str]) -> None:
        CALLS.append(str(result.call_id))
        await ctx.yield_output(f"used result of {result.call_id}")


class Counter(Executor):
    """Asks for a number: a response type other than ``str``."""

    def __init__(self) -> None:
        super().__init__(id="counter")

    @handler
    async def on_text(self, text: str, ctx: WorkflowContext[None, int]) -> None:
        await ctx.request_info(text, int)

    @response_handler
    async def on_count(self, question: str, count: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(count)


def build_counter() -> Workflow:
    return WorkflowBuilder(name="counter", start_executor=Counter()).build()


def build() -> Workflow:
    return WorkflowBuilder(name="computer-use", start_executor=ComputerUser()).build()


SPEC = WorkflowSpec(build=build)
