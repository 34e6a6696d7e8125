"""A run's checkpoints share its executors' state (``af_internals.share_executor_states``).

Agent Framework 1.23.0's runner deep-copies the map of every executor's state twice per
executor before each checkpoint, and once more to export it: on a 1 MB conversation that
was most of a resume's time on the event loop. The first test pins that framework behaviour
(when an upgrade fixes it, it fails: re-check the override); the others hold what the
override must keep: the final checkpoint is the framework's own, a restore continues the
same state, and no reference cycle.
"""

from __future__ import annotations

import gc
import itertools
import weakref
from typing import Any

from agent_framework import Executor, Message, Workflow, WorkflowBuilder, WorkflowCheckpoint, WorkflowContext, handler

from resumable.checkpoints import af_internals
from resumable.core.resume import RunCheckpoints

EXECUTORS = 3


class Counted:
    """Counts its deep copies (one per copy of the state map that holds it)."""

    copies = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> Counted:
        Counted.copies += 1
        return Counted()


class Step(Executor):
    """Appends to its list in place and returns the live list from its save hook: only the
    framework's export stands between later appends and an earlier checkpoint."""

    def __init__(self, index: int) -> None:
        super().__init__(id=f"step-{index}")
        self.last = index == EXECUTORS - 1
        self.seen: list[str] = []

    @handler
    async def on_text(self, text: str, ctx: WorkflowContext[str, str]) -> None:
        self.seen.append(text)
        if self.last:
            await ctx.yield_output(f"{text} ({len(self.seen)} seen)")
        else:
            await ctx.send_message(text)

    async def on_checkpoint_save(self) -> dict[str, Any]:
        return {"seen": self.seen, "counted": Counted()}

    async def on_checkpoint_restore(self, state: dict[str, Any]) -> None:
        self.seen = state["seen"]


def build(lean: bool) -> Workflow:
    steps = [Step(i) for i in range(EXECUTORS)]
    builder = WorkflowBuilder(name="copies", start_executor=steps[0])
    for a, b in itertools.pairwise(steps):
        builder.add_edge(a, b)
    workflow = builder.build()
    if lean:
        af_internals.share_executor_states(workflow)
    return workflow


async def run(workflow: Workflow, text: str) -> list[WorkflowCheckpoint]:
    storage = RunCheckpoints()
    await workflow.run(text, checkpoint_storage=storage)
    return await storage.list_checkpoints(workflow_name="copies")


def states(checkpoints: list[WorkflowCheckpoint]) -> list[dict[str, Any]]:
    """Each checkpoint's executor states, without the counters (fresh objects each copy)."""
    return [
        {k: v["seen"] for k, v in c.state.get("_executor_state", {}).items()} | {"iteration": c.iteration_count}
        for c in checkpoints
    ]


async def copies_per_checkpoint(lean: bool) -> float:
    Counted.copies = 0
    checkpoints = await run(build(lean), "one")
    return Counted.copies / (EXECUTORS * len(checkpoints))


async def test_the_framework_copies_every_executor_state_many_times_per_checkpoint() -> None:
    """Contract: the runner saves executor states through ``State.get``/``State.set`` on one
    key and exports them with ``State.export_state``, deep-copying the whole map each time.
    If this fails, re-read the runner's ``_save_executor_states``: ``share_executor_states``
    may no longer be needed."""
    assert await copies_per_checkpoint(lean=False) > 2 * EXECUTORS - 1


async def test_a_resume_makes_no_deep_copy_of_the_executor_states() -> None:
    assert await copies_per_checkpoint(lean=True) == 0
    [*_, last] = await run(build(True), "one")
    Counted.copies = 0
    resumed = build(True)
    await af_internals.hydrate(resumed, last)  # the restore takes the checkpoint over
    await run(resumed, "two")
    assert Counted.copies == 0


async def test_the_final_checkpoint_is_the_frameworks_own() -> None:
    """Each executor changes its state in place and hands out the live list: the final
    checkpoint, read once the run ended, is what the framework's copies would have saved."""
    plain, lean = await run(build(False), "one"), await run(build(True), "one")
    assert len(lean) == len(plain) > 2
    assert states(lean)[-1] == states(plain)[-1]
    assert states(lean)[-1] == {f"step-{i}": ["one"] for i in range(EXECUTORS)} | {"iteration": EXECUTORS}


async def test_a_restored_workflow_continues_the_same_state() -> None:
    plain, lean = build(False), build(True)
    [*_, plain_last] = await run(plain, "one")
    [*_, lean_last] = await run(lean, "one")
    plain_next, lean_next = build(False), build(True)
    await af_internals.hydrate(plain_next, plain_last)
    await af_internals.hydrate(lean_next, lean_last)
    plain_final, lean_final = await run(plain_next, "two"), await run(lean_next, "two")
    assert states(lean_final)[-1] == states(plain_final)[-1]
    assert states(lean_final)[-1] == {f"step-{i}": ["one", "two"] for i in range(EXECUTORS)} | {"iteration": EXECUTORS}


async def test_the_state_dies_with_its_workflow_without_the_cycle_collector() -> None:
    workflow = build(True)
    await run(workflow, "one")
    state = weakref.ref(workflow._runner._state)
    gc.disable()
    try:
        del workflow
        assert state() is None, "the workflow's State outlived it: a reference cycle"
    finally:
        gc.enable()


def test_other_state_keys_keep_the_frameworks_copies() -> None:
    """Only the executor-state key is copied shallowly: other keys keep deep copies."""
    workflow = build(True)
    state = workflow._runner._state
    value = {"nested": [Message(role="user", contents=["x"])]}
    state.set("shared", value)
    value["nested"].append("later")
    assert len(state.get("shared")["nested"]) == 1
