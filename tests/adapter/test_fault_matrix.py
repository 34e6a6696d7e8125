"""The fault matrix: every registered write site x every fault, judged from storage alone.

The rows come from ``resumable/storage/write_sites.py``; ``CELLS`` names, for each site, the
scenario that makes its write (a thread turn, sync and keyed; a background accept and its
execution; a thread DELETE; a callback delivery), run through the registered functions
in-process. ``devtools/write_faults.py`` injects the fault at the storage SDK boundary on
that site's first write in the scenario's faulted step:

* ``retry``: the write lands, its answer is lost, the SDK's retry meets it (409/412/404);
* ``lost``: the write lands, and every answer is lost (the caller sees an outage);
* ``outage``: nothing lands, every attempt fails;
* ``rival``: another app instance commits a turn on the same thread just before the write.

The client then retries as a client would (the same Idempotency-Key), the queue drains, and
``tests/matrix_support.py``'s ``audit`` checks no lost turn, no doubled turn, no stuck record, and nothing
left of a deleted thread. Every write request in every cell must map to a registered site
(the run-time half of the registry's test). A cell that finds a defect another branch of
issue 28 fixes is ``xfail(strict=True)`` and flips when that fix merges.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import workflows
from devtools import write_faults
from devtools.function_host import FunctionHost
from devtools.instances import Instance, separate_instances
from devtools.queue_runner import QueueRunner
from devtools.webhook_receiver import WebhookReceiver
from resumable.background import events as run_events
from resumable.background import executor as run_executor
from resumable.storage import clients as storage_client
from resumable.storage import run_queue
from resumable.storage.write_sites import BY_NAME
from tests.conftest import CALLBACK_SECRET
from tests.matrix_scenarios import SCENARIOS, Ctx
from tests.matrix_support import Client, audit

# Sites no turn, accept, delete or callback writes: the timer's housekeeping pass
# (tests/library/test_housekeeping.py covers a lost answer and a rival on its state record).
NOT_IN_MATRIX = {
    "maintenance.state.create",
    "maintenance.state.replace",
    "maintenance.state.delete",
    "maintenance.references.create",
    "maintenance.references.delete",
}

CELLS: list[tuple[str, str]] = [
    ("container.create", "first_turn"),
    ("checkpoint.save", "turn"),
    ("checkpoint.save", "keyed"),
    ("checkpoint.save", "background"),
    ("checkpoint.delete", "delete"),
    ("thread.pointer.create", "first_turn"),
    ("thread.pointer.replace", "turn"),
    ("thread.pointer.replace", "keyed"),
    ("thread.pointer.replace", "background"),
    ("thread.pointer.replace", "delete"),
    ("thread.pointer.delete", "delete"),
    ("thread.metadata.create", "metadata_first"),
    ("thread.metadata.replace", "metadata"),
    ("thread.metadata.delete", "delete"),
    ("idempotency.create", "keyed"),
    ("idempotency.replace", "keyed"),
    ("idempotency.create", "background"),
    ("idempotency.delete", "delete"),
    ("run.record.create", "background"),
    ("run.record.replace", "background"),
    ("run.record.delete", "delete"),
    ("run.order.create", "background"),
    ("run.order.replace", "background"),
    ("run.order.delete", "background"),
    ("run.events.create", "background"),
    ("run.events.append", "background"),
    ("run.events.delete", "delete"),
    ("run.progress.create", "durable"),
    ("run.progress.replace", "durable"),
    ("run.progress.delete", "durable"),
    ("callback.create", "callback"),
    ("callback.replace", "callback"),
    ("callback.delete", "delete"),
    ("queue.create", "background"),
    ("queue.send", "background"),
    ("queue.send", "callback"),
]

# (site, scenario, fault) → why it fails on main today; strict, so each flips when fixed.
# Items 1 and 5 of issue 28 were here until the thread records moved onto RecordStore.
KNOWN: dict[tuple[str, str, str], str] = {}


@pytest.fixture
async def ctx(host: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Ctx]:
    monkeypatch.setenv("CALLBACK_SECRET", CALLBACK_SECRET)
    monkeypatch.setenv("CALLBACK_ALLOW_LOCAL_HTTP", "true")
    monkeypatch.setenv("CALLBACK_RETRY_SCHEDULE", "0")
    # The ``durable`` scenario's workflow: many supersteps, so a progress checkpoint is replaced.
    monkeypatch.setitem(workflows.REGISTRY, "loop", "bench.loop_workflow:SPEC")
    # Flush a run's events at once, so even the default workflow's short runs write their log.
    monkeypatch.setattr(run_events, "FLUSH_SECONDS", 0.001)
    # A message whose record never landed waits this long per delivery: not at all, here.
    monkeypatch.setattr(run_executor, "RECORD_WAIT_SECONDS", 0.01)
    await storage_client.close_all()
    await run_queue.close_all()
    receiver = WebhookReceiver(CALLBACK_SECRET)
    await receiver.start()
    with write_faults.installed(monkeypatch) as faults, separate_instances(monkeypatch):
        yield Ctx(host, faults, QueueRunner(host), receiver, Instance())
        await storage_client.close_all()
        await run_queue.close_all()
    await receiver.stop()


def _cells() -> list[Any]:
    params = []
    for site, scenario in CELLS:
        for fault in write_faults.FAULTS:
            reason = KNOWN.get((site, scenario, fault))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(pytest.param(site, scenario, fault, marks=marks, id=f"{site}-{scenario}-{fault}"))
    return params


async def test_each_scenario_without_faults_writes_only_registered_sites(ctx: Ctx) -> None:
    """The run-time registry check, and the matrix's baseline: every scenario holds with no
    fault, and every write request it makes maps to a registered site."""
    seen: dict[str, set[str]] = {}
    for name, scenario in SCENARIOS.items():
        client = Client(ctx.host)
        before = dict(ctx.faults.sites)
        await scenario(client, ctx, lambda: None)
        seen[name] = {site for site, n in ctx.faults.sites.items() if n > before.get(site, 0)}
        assert not await audit(client), (name, await audit(client))
    assert not ctx.faults.unregistered, ctx.faults.unregistered
    for site, scenario in CELLS:  # each cell's scenario really makes its site's write
        assert site in seen[scenario], (site, scenario, "; ".join(f"{k}: {sorted(v)}" for k, v in seen.items()))
    registered = set(BY_NAME) - NOT_IN_MATRIX
    assert registered == {site for site, _ in CELLS}, registered ^ {site for site, _ in CELLS}


@pytest.mark.parametrize(("site", "scenario", "fault"), _cells())
async def test_fault_at_write_site(ctx: Ctx, site: str, scenario: str, fault: str) -> None:
    client = Client(ctx.host)
    armed: list[Any] = []

    async def rival() -> None:  # another instance: a turn on the thread, or the same metadata PUT
        with ctx.other.active():
            if scenario.startswith("metadata"):
                await ctx.host.request("PUT", f"/api/threads/{client.thread}/metadata", json_body={"by": "rival"})
                if fault == "retry_rival":  # it lands after this client's write: it may hold
                    client.later_metadata.append({"by": "rival"})
            else:
                await client.turn(f"rival-{len(armed)}")

    def arm() -> None:
        armed.append(ctx.faults.arm(site, fault, rival=rival))

    await SCENARIOS[scenario](client, ctx, arm)
    ctx.faults.disarm()
    assert armed and armed[0].hits, f"{scenario} never wrote {site}: the cell tests nothing"
    assert not ctx.faults.unregistered, ctx.faults.unregistered
    broken = await audit(client)
    assert not broken, f"{site} x {fault} in {scenario} (answers {client.answers}):\n" + "\n".join(broken)


# -- DELETE as the rival: a thread deleted just before each write of its background run ------

RUN_WRITES = [
    "checkpoint.save",
    "thread.pointer.replace",
    "run.record.replace",
    "run.events.create",
    "run.events.append",
    "run.order.delete",
    "callback.create",
]


@pytest.mark.parametrize("site", RUN_WRITES)
async def test_a_delete_just_before_each_write_of_a_background_run_leaves_nothing(ctx: Ctx, site: str) -> None:
    """Another instance DELETEs the thread just before the run's write: once the DELETE answered
    204 and the queue drained, nothing of the thread may be left (its text is erased)."""
    client = Client(ctx.host)
    await client.turn("seed")
    statuses: list[int] = []

    async def delete() -> None:
        with ctx.other.active():
            statuses.append((await ctx.host.request("DELETE", f"/api/threads/{client.thread}")).status)

    armed = ctx.faults.arm(site, "rival", rival=delete)
    await client.accept("in-1", callback_url=ctx.receiver.url)
    await client.settle_runs(ctx.runner)
    ctx.faults.disarm()
    assert armed.hits, f"the run never wrote {site}"
    assert statuses == [204], statuses
    client.deleted = True
    client.accepted.clear()  # a run whose thread was deleted under it need not succeed
    broken = await audit(client)
    assert not broken, f"DELETE before {site} (answers {client.answers}):\n" + "\n".join(broken)
