"""The timer's housekeeping at scale: over 20,000 blobs in Azurite with a small budget, each
invocation stops at its budget and goes on where the last one stopped, and one pass
deletes exactly the old orphans, keeping everything a thread reaches.

The budget is judged on a clock that moves by a fixed step per storage request (the
housekeeping module's monotonic clock, nothing else), so what is asserted is the rule
(start no page that could end past the budget, but always do one), the same however
loaded the machine is; the wall-clock time of each invocation is printed, never asserted."""

from __future__ import annotations

import asyncio
import json
import random
import time
import types
import uuid
from datetime import UTC, datetime, timedelta

import aiohttp
import pytest
from azure.storage.blob import ContainerSasPermissions, generate_container_sas
from azure.storage.blob.aio import ContainerClient

from devtools.azurite import Azurite
from functions_adapter import housekeeping as timer
from functions_adapter import wiring
from resumable.storage import clients as storage_client
from resumable.storage import layout
from resumable.threads import housekeeping

THREADS = 400  # forty checkpoints each: most of their history is outside the recent list
LONG_THREADS = 5  # a hundred each, with a fork: forty of them reachable only through its link
OLD_ORPHANS = 40  # lost races' leftovers, older than the sweep's cutoff: to delete
YOUNG_ORPHANS = 20  # as young as a turn still in flight: to keep
RUN_CHECKPOINTS = 3_500  # /api/runs checkpoints, not part of any thread: to keep
BUDGET = 2.0
# What one storage request costs on the budget's clock: a touch page (25 threads, up to
# eleven reads each) then takes about half a second of it, a listing page a few milliseconds.
REQUEST_STEP = 0.002
# Beyond its pages, an invocation reads and writes its record and its reference filter.
RECORD_REQUESTS = 8

OLD = (datetime.now(UTC) - timedelta(hours=2)).isoformat()


def checkpoint_blob(thread_id: str | None, previous: str | None, *, replaced: str | None = None, ts: str = OLD):
    """A checkpoint's name and the metadata the sweep reads (the body is never read)."""
    metadata = {"workflow_name": "default", "timestamp": ts, "status": "idle"}
    for key, value in (("thread_id", thread_id), ("previous_checkpoint_id", previous), ("replaced_head_id", replaced)):
        if value:
            metadata[key] = value
    return str(uuid.uuid4()), metadata


class Fixture:
    def __init__(self) -> None:
        self.checkpoints: dict[str, dict[str, str]] = {}
        self.pointers: dict[str, dict[str, object]] = {}
        self.orphans: set[str] = set()

    def chain(self, thread_id: str, length: int, start: str | None = None, replaced: str | None = None) -> list[str]:
        ids: list[str] = []
        previous = start
        for n in range(length):
            cid, metadata = checkpoint_blob(thread_id, previous, replaced=replaced if n == 0 else None)
            self.checkpoints[cid] = metadata
            ids.append(cid)
            previous = cid
        return ids

    def thread(self, thread_id: str, lineage: list[str], turns: int) -> None:
        recent = lineage[::-1][:10]
        self.pointers[thread_id] = {
            "thread_id": thread_id,
            "checkpoint_id": lineage[-1],
            "turns": turns,
            "recent_checkpoint_ids": recent,
            "updated_at": time.time(),
        }

    def orphan(self, thread_id: str, parent: str, *, ts: str = OLD) -> str:
        cid, metadata = checkpoint_blob(thread_id, parent, ts=ts)
        self.checkpoints[cid] = metadata
        return cid


def build() -> Fixture:
    rng = random.Random(7)
    fx = Fixture()
    lineages: list[list[str]] = []
    for n in range(THREADS):
        lineage = fx.chain(f"thread-{n}", 40)
        fx.thread(f"thread-{n}", lineage, 40)
        lineages.append(lineage)
    for n in range(LONG_THREADS):
        thread_id = f"long-{n}"
        # 60 turns, then a fork from the 20th: the 40 after it stay reachable only
        # through the fork's link to the head it replaced.
        first = fx.chain(thread_id, 60)
        branch = fx.chain(thread_id, 40, start=first[19], replaced=first[-1])
        fx.thread(thread_id, first[:20] + branch, 100)
        lineages.append(first + branch)
        fx.orphans.add(fx.orphan(thread_id, first[40]))  # a walk through the fork's link
    for _ in range(OLD_ORPHANS - LONG_THREADS):
        lineage = lineages[rng.randrange(THREADS)]
        fx.orphans.add(fx.orphan(fx.checkpoints[lineage[0]]["thread_id"], lineage[rng.randrange(len(lineage))]))
    for _ in range(YOUNG_ORPHANS):
        lineage = lineages[rng.randrange(len(lineages))]
        fx.orphan(fx.checkpoints[lineage[0]]["thread_id"], lineage[-1], ts=datetime.now(UTC).isoformat())
    for _ in range(RUN_CHECKPOINTS):
        cid, metadata = checkpoint_blob(None, None)
        fx.checkpoints[cid] = metadata
    return fx


async def upload(azurite: Azurite, container: ContainerClient, fx: Fixture) -> None:
    """Plain PUTs with a SAS: the SDK's per-request work would make the setup slower than
    the pass under test. The blobs are what the app writes: a body and the metadata."""
    await container.create_container()
    key = azurite.connection_string.split("AccountKey=")[1].split(";")[0]
    sas = generate_container_sas(
        container.account_name,
        container.container_name,
        account_key=key,
        permission=ContainerSasPermissions(write=True, create=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )
    gate = asyncio.Semaphore(64)
    async with aiohttp.ClientSession() as session:

        async def put(name: str, body: bytes, metadata: dict[str, str]) -> None:
            headers = {"x-ms-blob-type": "BlockBlob", "x-ms-version": "2021-08-06"}
            headers.update({f"x-ms-meta-{key}": value for key, value in metadata.items()})
            async with gate, session.put(f"{container.url}/{name}?{sas}", data=body, headers=headers) as response:
                assert response.status == 201, await response.text()

        await asyncio.gather(
            *(put(f"checkpoints/{cid}.json", b"{}", metadata) for cid, metadata in fx.checkpoints.items()),
            *(put(f"threads/{tid}.json", json.dumps(p).encode(), {}) for tid, p in fx.pointers.items()),
        )


class RequestClock:
    """A monotonic clock that moves ``REQUEST_STEP`` with each storage request sent."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self, request: object) -> None:  # the storage SDK's raw_request_hook
        self.now += REQUEST_STEP

    def monotonic(self) -> float:
        return self.now


async def _slowest_page(container: ContainerClient) -> float:
    """The pass's slowest page so far, as its continuation record holds it."""
    record = container.get_blob_client(f"{layout.MAINTENANCE}{housekeeping.STATE}.json")
    return float(json.loads(await (await record.download_blob()).readall())["slowest"])


async def test_housekeeping_over_20000_blobs_goes_on_from_its_record_within_each_budget(
    azurite: Azurite, storage_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = RequestClock()
    monkeypatch.setattr(storage_client, "request_hook", clock)
    monkeypatch.setattr(housekeeping, "time", types.SimpleNamespace(time=time.time, monotonic=clock.monotonic))
    fx = build()
    assert len(fx.checkpoints) >= 20_000
    container = wiring.container_for(wiring.load_settings())
    setup = time.perf_counter()
    await upload(azurite, container, fx)
    setup = time.perf_counter() - setup
    monkeypatch.setenv("MAINTENANCE_SECONDS", str(BUDGET))

    times: list[float] = []
    reports: list[housekeeping.Report] = []
    deleted: list[str] = []
    touched = 0
    while True:
        started = time.perf_counter()
        report = await timer.run()
        times.append(time.perf_counter() - started)
        reports.append(report)
        slowest = await _slowest_page(container)
        assert report.pages >= 1, "an invocation that does no page never moves the pass on"
        # It stops at its budget: past it by at most one page (the one it started in time) ...
        assert report.seconds <= BUDGET + slowest + RECORD_REQUESTS * REQUEST_STEP, (len(reports), report, slowest)
        if not report.pass_finished:
            # ... and not before it: one more page as slow as the slowest could end past it.
            assert report.seconds + slowest >= BUDGET, (len(reports), report, slowest)
        deleted += report.deleted
        touched += report.touched
        if report.pass_finished:
            break
        assert len(reports) < 200, "the pass does not end"
    print(
        f"\n[housekeeping] {len(fx.checkpoints) + len(fx.pointers)} blobs (uploaded in {setup:.1f} s), "
        f"budget {BUDGET} s on the request clock: {len(times)} invocations of "
        f"{min(r.pages for r in reports)}-{max(r.pages for r in reports)} pages, "
        f"{min(times):.2f}-{max(times):.2f} s each on the wall clock, {sum(times):.1f} s in all; "
        f"deleted {len(deleted)}, touched {touched}"
    )
    assert len(reports) >= 3, "one invocation did everything: the budget was not applied"
    assert any(r.pages > 1 for r in reports), "no invocation went on past its first page"
    # Each goes on where the last stopped: nothing done twice, nothing skipped.
    assert sorted(deleted) == sorted(fx.orphans)
    remaining = {b.name async for b in container.list_blobs(name_starts_with="checkpoints/")}
    assert remaining == {f"checkpoints/{cid}.json" for cid in fx.checkpoints.keys() - fx.orphans}
    assert touched == sum(len(p["recent_checkpoint_ids"]) for p in fx.pointers.values())
    # The pass is done: the next invocation within the day finds nothing due.
    idle = await timer.run()
    assert (idle.pages, idle.deleted, idle.touched) == (0, (), 0)
