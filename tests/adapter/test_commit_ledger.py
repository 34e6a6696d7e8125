""" "Did checkpoint X commit?" has one answer (``resumable/core/commit_ledger.py``), and every
path that asks gets it: an idempotent replay, a background run's commit check, a fork.

The case that matters is a thread turn that committed and was then built upon: it is no
longer the head, and once ``LINEAGE_KEPT`` turns came after it, no longer in the pointer's
recent list either, but it committed. The walk back along the lineage must not be cut
short by the timestamps the instances wrote: an instance whose clock runs an hour ahead
stamps its checkpoint "later" than the turns that came after it.
"""

from __future__ import annotations

import pytest

from devtools.function_host import FunctionHost
from functions_adapter import wiring
from functions_adapter.settings import Settings
from resumable.background.commit_check import CommitCheck
from resumable.background.schema import RUNNING, CommitIntent, RunRecord
from resumable.storage.blob_records import BlobRecords
from resumable.threads.pointers import LINEAGE_KEPT
from tests.adapter.test_idempotency import fail_completed_writes, keyed
from tests.clocks import skew_clocks

THREAD = "built-on"
SKEWS = [pytest.param(0, id="same-clocks"), pytest.param(3600, id="committer-an-hour-ahead")]


async def _turn(host: FunctionHost, text: str, **extra: object) -> dict:
    response = await host.request("POST", f"/api/threads/{THREAD}/runs", json_body={"messages": text, **extra})
    assert response.status == 200, await response.body()
    return await response.json()


async def _build_on(host: FunctionHost) -> None:
    """Enough later turns that the first is neither the head nor in the recent list."""
    for n in range(LINEAGE_KEPT + 1):
        await _turn(host, f"later turn {n}")
    head = await (await host.request("GET", f"/api/threads/{THREAD}")).json()
    assert head["turns"] == LINEAGE_KEPT + 2


@pytest.mark.parametrize("skew", SKEWS)
async def test_a_replay_of_a_turn_that_others_built_on_gets_its_response(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, skew: float
) -> None:
    """The key's last write (``completed``) is lost: the record still says ``committing``.
    A retry after other turns built on the commit must replay it, not run it again (nor
    answer 409 for as long as the claim looks fresh)."""
    original_replace = fail_completed_writes(monkeypatch)
    url = f"/api/threads/{THREAD}/runs"
    with monkeypatch.context() as instance:
        skew_clocks(instance, skew)
        first = await keyed(host, "pay-once", {"messages": "pay the invoice"}, url=url)
    assert first.status == 200
    monkeypatch.setattr(BlobRecords, "replace", original_replace)
    await _build_on(host)
    retry = await keyed(host, "pay-once", {"messages": "pay the invoice"}, url=url)
    assert (retry.status, await retry.body()) == (200, await first.body())
    head = await (await host.request("GET", f"/api/threads/{THREAD}")).json()
    assert head["turns"] == LINEAGE_KEPT + 2  # nothing ran a second time


@pytest.mark.parametrize("skew", SKEWS)
async def test_the_background_commit_check_finds_a_turn_that_others_built_on(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, skew: float
) -> None:
    """A run whose intent names a committed turn is succeeded, whatever came after it:
    told otherwise, the next delivery would run the turn a second time."""
    with monkeypatch.context() as instance:
        skew_clocks(instance, skew)
        committed = (await _turn(host, "pay the invoice"))["checkpoint_id"]
    await _build_on(host)
    service = wiring.build_service(Settings.from_env())
    stamp = (await service.store.get_info(committed)).timestamp
    intent = CommitIntent("attempt-1", committed, stamp, b"the run's response", 0.0)
    record = RunRecord("run-1", b"{}", "f", b"{}", 0.0, status=RUNNING, thread_id=THREAD, commits=(intent,))
    assert await CommitCheck(service.ledger).committed(record) == b"the run's response"
    another_attempt = CommitIntent("attempt-2", committed, "2020-01-01T00:00:00+00:00", b"not this", 0.0)
    assert (
        await CommitCheck(service.ledger).committed(
            RunRecord("run-2", b"{}", "f", b"{}", 0.0, status=RUNNING, thread_id=THREAD, commits=(another_attempt,))
        )
        is None
    )  # the checkpoint under that ID is another attempt's save


@pytest.mark.parametrize("skew", SKEWS)
async def test_a_fork_from_a_turn_that_others_built_on_is_in_the_lineage(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, skew: float
) -> None:
    with monkeypatch.context() as instance:
        skew_clocks(instance, skew)
        committed = (await _turn(host, "first"))["checkpoint_id"]
    await _build_on(host)
    forked = await _turn(host, "again from the first", from_checkpoint_id=committed)
    assert forked["checkpoint_id"] != committed
