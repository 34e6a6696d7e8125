"""The timer's housekeeping pass across invocations, on a small container with tiny pages:
each invocation goes on from the continuation record, a lost answer on the record still
counts, a rival's progress wins, and a lost filter or damaged record only restarts the pass.
Whatever happens, orphans go and everything a thread reaches stays."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from devtools.record_faults import lose_answers, race_writes
from functions_adapter import wiring
from resumable.storage import layout
from resumable.storage.record_store import RecordStore
from resumable.threads import housekeeping
from resumable.threads.housekeeping import PassState, Report, run_housekeeping


async def _turn(host: FunctionHost, thread: str, text: str, **extra: Any) -> str:
    response = await host.request("POST", f"/api/threads/{thread}/runs", json_body={"messages": text, **extra})
    assert response.status == 200
    return (await response.json())["checkpoint_id"]


@pytest.fixture
async def service(host: FunctionHost) -> Any:
    return wiring.build_service(wiring.load_settings())


@pytest.fixture
async def world(host: FunctionHost, service: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[set[str], set[str]]:
    """Three threads (one forked) and three orphans; pages of two names. Returns the
    checkpoints that must stay and the orphans that must go."""
    monkeypatch.setattr(housekeeping, "CHECKPOINT_PAGE", 2)
    monkeypatch.setattr(housekeeping, "THREAD_PAGE", 1)
    for thread in ("a", "b", "c"):
        for n in range(3):
            await _turn(host, thread, f"{thread} {n}")
    first = (await service.pointers.read("a")).recent[-1]
    await _turn(host, "a", "fork", from_checkpoint_id=first)
    orphans = set()
    for thread in ("a", "b", "c"):
        orphan = await service.store.load((await service.pointers.read(thread)).checkpoint_id)
        orphan.checkpoint_id = f"orphan-of-{thread}"
        await service.store.save(orphan, thread_id=thread)
        orphans.add(orphan.checkpoint_id)
    return await _checkpoints(service) - orphans, orphans


async def _checkpoints(service: Any) -> set[str]:
    return {info.checkpoint_id for info in await service.store.list_all_infos()}


async def _blobs(service: Any, prefix: str) -> list[str]:
    return [blob.name async for blob in service.store.container.list_blobs(name_starts_with=prefix)]


async def _invoke(service: Any, budget: float = 1e-6) -> Report:
    return await run_housekeeping(
        service.store.container, service.pointers, service.store, budget_seconds=budget, orphan_min_age_seconds=-1
    )


async def _state(service: Any) -> PassState | None:
    stored = await RecordStore(service.store.container, layout.MAINTENANCE, PassState).get(housekeeping.STATE)
    return None if stored is None else stored.value


async def test_each_invocation_goes_on_from_the_record_one_page_at_a_time(
    service: Any, world: tuple[set[str], set[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    kept, orphans = world
    positions: list[tuple[str, str | None]] = []
    deleted: list[str] = []
    while True:
        report = await _invoke(service)
        assert report.pages == 1, "an invocation past its budget still does one page, and only one"
        deleted += report.deleted
        state = await _state(service)
        assert state is not None
        assert (state.phase, state.token) not in positions, "an invocation did not move the pass on"
        positions.append((state.phase, state.token))
        if report.pass_finished:
            break
        assert len(positions) < 100
    assert sorted(deleted) == sorted(orphans)
    assert await _checkpoints(service) == kept
    assert await _blobs(service, layout.MAINTENANCE) == ["maintenance/state.json"]  # no filter left behind
    assert (await _invoke(service)).pages == 0, "a finished pass starts again only a day later"
    monkeypatch.setattr(housekeeping, "PASS_INTERVAL_SECONDS", 0)
    again = await _invoke(service)
    assert (again.pages, again.phase) == (1, "mark")


async def test_a_lost_answer_on_the_record_still_counts(
    service: Any, world: tuple[set[str], set[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    await _invoke(service)
    before = await _state(service)
    with lose_answers(monkeypatch, layout.MAINTENANCE, name=housekeeping.STATE, error="outage") as hits:
        await _invoke(service)
    assert hits.writes
    after = await _state(service)
    assert after is not None and before is not None and after.token != before.token
    filters = [name for name in await _blobs(service, layout.MAINTENANCE) if "references-" in name]
    assert filters == [after.references]


async def test_a_rival_invocation_s_progress_wins_and_this_one_leaves_nothing_behind(
    service: Any, world: tuple[set[str], set[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    await _invoke(service)
    ours = await _state(service)
    assert ours is not None

    def rival(current: PassState) -> PassState:
        return PassState("touch", None, current.started_at)

    with race_writes(monkeypatch, layout.MAINTENANCE, rival, name=housekeeping.STATE):
        await _invoke(service)
    state = await _state(service)
    assert state is not None and (state.phase, state.token) == ("touch", None)
    # The rival's record names no filter: the filter this invocation saved is gone again.
    assert [name for name in await _blobs(service, layout.MAINTENANCE) if "references-" in name] == [ours.references]


async def test_a_lost_filter_or_a_damaged_record_restarts_the_pass_and_stays_safe(
    service: Any, world: tuple[set[str], set[str]]
) -> None:
    kept, orphans = world
    for _ in range(3):
        await _invoke(service)
    state = await _state(service)
    assert state is not None and state.references is not None
    await service.store.container.delete_blob(state.references)
    restarted = await _invoke(service)
    assert restarted.phase == "mark" and (await _state(service)).token != state.token  # type: ignore[union-attr]
    await service.store.container.upload_blob("maintenance/state.json", b"{not json", overwrite=True)
    report = await _invoke(service, budget=60)
    assert report.pass_finished
    assert sorted(report.deleted) == sorted(orphans)
    assert await _checkpoints(service) == kept


async def test_concurrent_invocations_delete_each_orphan_once_and_keep_every_head(
    service: Any, world: tuple[set[str], set[str]]
) -> None:
    kept, orphans = world
    reports = await asyncio.gather(*(_invoke(service, budget=60) for _ in range(3)))
    assert all(report.pass_finished for report in reports)
    assert sorted(cid for report in reports for cid in report.deleted) == sorted(orphans)
    assert await _checkpoints(service) == kept
    assert await _blobs(service, layout.MAINTENANCE) == ["maintenance/state.json"]


def test_the_reference_filter_never_forgets_an_id_and_round_trips() -> None:
    """No false negatives (a linked checkpoint must never look like a leaf), a few false
    positives at most, growth past the first slice, and only its own bytes parse."""
    from resumable.threads.reference_filter import FIRST_CAPACITY, ReferenceFilter

    linked = [f"linked-{n}" for n in range(FIRST_CAPACITY * 2)]
    built = ReferenceFilter.empty()
    for checkpoint_id in linked:
        built.add(checkpoint_id)
    restored = ReferenceFilter.from_bytes(built.to_bytes())
    assert len(restored) == len(linked)
    assert all(checkpoint_id in restored for checkpoint_id in linked)
    strangers = sum(f"leaf-{n}" in restored for n in range(20_000))
    assert strangers < 20_000 * 0.02
    data = built.to_bytes()
    for damaged in (b"", data[:-1], data + b"x", b"RFv2" + data[4:]):
        with pytest.raises(ValueError):
            ReferenceFilter.from_bytes(damaged)
