"""The fault matrix's scenarios: what a client does around the one faulted step.

Each scenario runs unfaulted set-up, calls ``arm()`` where the fault is to take effect, then
makes the requests under test and retries as a client would. Problems only the scenario can
see (a metadata PUT's answer, a callback's deliveries) go in ``Client.problems``; storage is
judged after by ``matrix_support.audit``. Used by ``tests/adapter/test_fault_matrix.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from devtools.function_host import FunctionHost
from devtools.instances import Instance
from devtools.queue_runner import QueueRunner
from devtools.webhook_receiver import WebhookReceiver
from devtools.write_faults import WriteFaults
from resumable.storage import layout
from resumable.threads.event_sweep import sweep_event_logs
from tests.matrix_support import Client, container, read_json


@dataclass
class Ctx:
    host: FunctionHost
    faults: WriteFaults
    runner: QueueRunner
    receiver: WebhookReceiver
    other: Instance


Arm = Callable[[], None]
Scenario = Callable[[Client, Ctx, Arm], Awaitable[None]]


async def first_turn(c: Client, ctx: Ctx, arm: Arm) -> None:
    arm()
    await c.turn("in-1")


async def turn(c: Client, ctx: Ctx, arm: Arm) -> None:
    await c.turn("seed")
    arm()
    await c.turn("in-1")


async def keyed(c: Client, ctx: Ctx, arm: Arm) -> None:
    await c.turn("seed")
    arm()
    await c.keyed_turn("in-1")


async def background(c: Client, ctx: Ctx, arm: Arm) -> None:
    """Two accepts before the queue drains: the second one appends to the pending list."""
    await c.turn("seed")
    arm()
    await c.accept("in-1")
    await c.accept("in-2")
    await c.settle_runs(ctx.runner)


async def durable(c: Client, ctx: Ctx, arm: Arm) -> None:
    """A background turn with ``superstep`` durability on the loop workflow (four supersteps: a
    progress checkpoint created, then replaced twice, then removed), then the housekeeping
    pass's sweep, as the timer would run it: a run's progress must be gone after both."""
    await c.turn("seed", workflow="loop")
    arm()
    await c.accept("loop 3 in-1", durability="superstep")
    await c.settle_runs(ctx.runner)
    token = None
    while True:
        _, token = await sweep_event_logs(container(), token, 100)
        if token is None:
            break


async def callback(c: Client, ctx: Ctx, arm: Arm) -> None:
    arm()
    await c.accept("in-1", callback_url=ctx.receiver.url)
    await c.settle_runs(ctx.runner)
    ids = {d.headers.get("webhook-id") for d in ctx.receiver.deliveries}
    if c.accepted and len(ids) != 1:
        c.problems.append(f"callback: {len(ctx.receiver.deliveries)} deliveries with ids {ids}, not one id")


async def metadata_first(c: Client, ctx: Ctx, arm: Arm) -> None:
    arm()
    await _metadata(c, {"channel": "one"})


async def metadata(c: Client, ctx: Ctx, arm: Arm) -> None:
    await c.put_metadata({"channel": "one"})
    arm()
    await _metadata(c, {"channel": "two"})


async def _metadata(c: Client, values: dict[str, str]) -> None:
    status = await c.put_metadata(values)
    if status != 200:
        c.problems.append(f"metadata PUT without If-Match answered {status}")
    stored = await (await c.host.request("GET", f"/api/threads/{c.thread}")).json()
    if status == 200 and stored.get("metadata") not in (values, *c.later_metadata):
        c.problems.append(f"metadata PUT answered 200 but the thread holds {stored.get('metadata')}")


async def delete(c: Client, ctx: Ctx, arm: Arm) -> None:
    await c.keyed_turn("seed")
    await c.accept("bg", callback_url=ctx.receiver.url)
    await c.settle_runs(ctx.runner)
    await c.put_metadata({"channel": "one"})
    arm()
    status = await c.delete()
    if status != 204:
        c.problems.append(f"DELETE answered {status} after retries")
    await ctx.runner.run_until_idle(timeout=60)
    await _new_thread_after_delete(c)


async def _new_thread_after_delete(c: Client) -> None:
    """A rival's turn that ran once the pointer was gone starts a new thread of the same name:
    that thread is live, with only the rival's turn in it; everything else must be gone."""
    head = await read_json(layout.record_blob(layout.THREADS, c.thread))
    rival = next((t for t in c.told if head and t.checkpoint_id == head.get("checkpoint_id")), None)
    if rival is not None and rival.text.startswith("rival-") and head and head.get("turns") == 1:
        c.told, c.deleted = [rival], False


SCENARIOS: dict[str, Scenario] = {
    s.__name__: s for s in (first_turn, turn, keyed, background, durable, callback, metadata_first, metadata, delete)
}
