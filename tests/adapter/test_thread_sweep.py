"""The orphan sweep against turns that commit while it runs: it may delete only what no thread reaches."""

from __future__ import annotations

import asyncio

import pytest

from devtools.function_host import FunctionHost
from functions_adapter import wiring as composition
from functions_adapter.settings import Settings
from resumable.base.errors import CheckpointNotFound, ThreadBusy
from resumable.threads.sweep import sweep_orphans

THREADS = 40
TURNS_EACH = 6


async def turn(host: FunctionHost, thread_id: str, text: str) -> tuple[int, dict]:
    body = {"messages": text, "multitask": "enqueue"}
    response = await host.request("POST", f"/api/threads/{thread_id}/runs", json_body=body)
    return response.status, await response.json()


async def test_turns_racing_the_sweep_lose_no_checkpoint_a_thread_reaches(host: FunctionHost) -> None:
    """Every checkpoint is old enough to sweep (cutoff 0); only reachability may protect it."""
    service = composition.build_service(Settings.from_env())
    thread_ids = [f"race-{i}" for i in range(THREADS)]
    for thread_id in thread_ids:  # give every thread history before the sweeps start
        assert (await turn(host, thread_id, "first"))[0] == 200

    done = asyncio.Event()
    sweeps: list[int] = []

    async def keep_sweeping() -> None:
        while not done.is_set():
            sweeps.append(len(await sweep_orphans(service.pointers, service.store, older_than_seconds=0)))

    async def converse(thread_id: str) -> list[int]:
        return [(await turn(host, thread_id, f"turn {n}"))[0] for n in range(TURNS_EACH)]

    sweeper = asyncio.create_task(keep_sweeping())
    try:
        statuses = await asyncio.gather(*(converse(t) for t in thread_ids))
    finally:
        done.set()
        await sweeper

    lost: list[str] = []
    for thread_id in thread_ids:
        response = await host.request("GET", f"/api/threads/{thread_id}")
        if response.status != 200:
            lost.append(f"{thread_id}: GET {response.status}")
            continue
        head = await response.json()
        listed = set(head["recent_checkpoint_ids"])
        checkpoint_id = head["checkpoint_id"]
        walked = 0
        while checkpoint_id:
            listed.discard(checkpoint_id)
            try:
                checkpoint = await service.store.load(checkpoint_id)
            except CheckpointNotFound:
                lost.append(checkpoint_id)
                break
            walked += 1
            checkpoint_id = checkpoint.previous_checkpoint_id
        for checkpoint_id in listed:  # anything GET lists must load, even past a gap
            try:
                await service.store.load(checkpoint_id)
            except CheckpointNotFound:
                lost.append(checkpoint_id)
        if not lost and walked != head["turns"]:
            lost.append(f"{thread_id}: lineage {walked} of {head['turns']} turns")
    failed = sum(1 for per_thread in statuses for status in per_thread if status != 200)
    print(
        f"\n[sweep race] {THREADS} threads x {TURNS_EACH + 1} turns, {len(sweeps)} sweeps deleted "
        f"{sum(sweeps)} orphans; lost {len(lost)}, failed turns {failed}"
    )
    assert lost == []
    assert failed == 0
    assert len(sweeps) >= 2, "the sweep must have run while turns committed"


async def in_flight_turn(service, thread_id: str):
    """A turn caught between saving its checkpoint and moving the pointer: the head it read, its checkpoint."""
    head = await service.pointers.read(thread_id)
    checkpoint = await service.store.load(head.checkpoint_id) if head.checkpoint_id else None
    if checkpoint is None:
        other = await service.pointers.read("donor")
        checkpoint = await service.store.load(other.checkpoint_id)
        checkpoint.previous_checkpoint_id = None
    checkpoint.checkpoint_id = f"in-flight-{thread_id}"
    if head.checkpoint_id:
        checkpoint.previous_checkpoint_id = head.checkpoint_id
    await service.store.save(checkpoint, thread_id=thread_id)
    return head, checkpoint.checkpoint_id


async def test_a_turn_in_flight_during_the_sweep_cannot_commit_a_checkpoint_the_sweep_deleted(
    host: FunctionHost,
) -> None:
    """With no age cutoff, an uncommitted checkpoint looks like an orphan: the sweep fences the
    pointer before deleting, so the turn's compare-and-swap fails instead of naming a deleted head."""
    service = composition.build_service(Settings.from_env())
    assert (await turn(host, "live", "one"))[0] == 200
    assert (await turn(host, "donor", "one"))[0] == 200
    live_head, live_checkpoint = await in_flight_turn(service, "live")
    new_head, new_checkpoint = await in_flight_turn(service, "brand-new")  # a thread's first turn

    deleted = await sweep_orphans(service.pointers, service.store, older_than_seconds=0)
    assert sorted(deleted) == sorted([live_checkpoint, new_checkpoint])

    for head, checkpoint_id in ((live_head, live_checkpoint), (new_head, new_checkpoint)):
        with pytest.raises(ThreadBusy):
            await service.pointers.advance(head, checkpoint_id)
    # The live thread still points at its intact head; the new one was never created.
    assert (await service.pointers.read("live")).checkpoint_id == live_head.checkpoint_id
    await service.store.load(live_head.checkpoint_id)
    missing = await host.request("GET", "/api/threads/brand-new")
    assert missing.status == 404
    assert (await turn(host, "brand-new", "hello"))[0] == 200
    assert (await turn(host, "live", "two"))[0] == 200
