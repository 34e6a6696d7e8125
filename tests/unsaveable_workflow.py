"""A test workflow whose state can hold a class that is not on the checkpoint allowlist.

One executor. A message containing ``poison`` makes it keep a ``Souvenir`` (a plain
class its spec does not list in ``checkpoint_types``) in its checkpoint state; a message
containing ``unpicklable`` makes it keep a lambda, which cannot be pickled at all. Any
other message keeps JSON-native state only.
"""

from __future__ import annotations

from typing import Any

from agent_framework import Executor, Message, Workflow, WorkflowBuilder, WorkflowContext, handler

from workflows import WorkflowSpec

NAME = "unsaveable"


class Souvenir:
    """Deliberately missing from the spec's ``checkpoint_types``."""

    def __init__(self, text: str) -> None:
        self.text = text


class Keeper(Executor):
    def __init__(self) -> None:
        super().__init__(id="keeper")
        self.texts: list[str] = []
        self.extra: Any = None

    @handler
    async def on_messages(self, messages: list[Message], ctx: WorkflowContext[None, Message]) -> None:
        text = " ".join(m.text for m in messages)
        self.texts.append(text)
        if "poison" in text:
            self.extra = Souvenir(text)
        elif "unpicklable" in text:
            self.extra = lambda: None  # copies fine (the framework copies state), never pickles
        await ctx.yield_output(Message(role="assistant", contents=[f"kept {len(self.texts)}: {text}"]))

    async def on_checkpoint_save(self) -> dict[str, Any]:
        state: dict[str, Any] = {"texts": list(self.texts)}
        if self.extra is not None:
            state["extra"] = self.extra
        return state

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        self.texts = [str(t) for t in state.get("texts", [])]


def build() -> Workflow:
    return WorkflowBuilder(name=NAME, start_executor=Keeper()).build()


SPEC = WorkflowSpec(build=build)
