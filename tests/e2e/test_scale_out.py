"""The scale-out drill, short: two ``devtools.serve`` processes on one Azurite, twenty threads of
three turns routed at random between them, with keys resent on purpose (after the answer, to
the other instance, and twice at once), background turns, a thread deleted right after a
background turn's 202, and storage faults injected on one process. Judged from storage alone
(``bench.scale_out_verify``): every thread holds exactly its turns in order, no checkpoint
missing from a lineage, nothing stuck, nothing left of the deleted thread. The full drill
(four processes, 1,000 threads x 5 turns) is ``python -m bench.scale_out``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from bench.scale_out import Drill, run_drill
from devtools.azurite import Azurite

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_two_processes_keep_every_turn_once_in_order_under_retries_background_deletes_and_faults(
    azurite: Azurite, tmp_path: Path
) -> None:
    drill = Drill(instances=2, threads=20, turns=3, concurrency=8, deletes=1, fault_rate=0.05, seed=11)
    result = run_drill(azurite.connection_string, f"so{uuid.uuid4().hex[:12]}", tmp_path, drill)

    assert result.violations == []
    # The drill did what it claims, so a clean verdict means something.
    assert len(result.outcome.deleted) == 1  # deleted (204) right after a background 202
    survivors = drill.threads - 1
    assert result.verdict.threads == survivors and result.verdict.turns == survivors * drill.turns
    assert result.outcome.replays > 0  # keyed resends answered with the first answer
    assert result.outcome.background_ms  # background turns ran and were seen finished
    assert sum(result.faults.values()) > 0  # the faulty process did inject faults
    assert result.verdict.blobs > 0  # every blob was read for the deleted thread
