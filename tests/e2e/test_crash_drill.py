"""The crash drill, short (issue 41): a 20-superstep ``superstep`` background turn whose worker
process is killed by SIGKILL, then taken over by another process. The turn commits once, its
result equals an uninterrupted run's, and at most one step runs twice. The long drill, with
random kill points from outside too, is ``python -m bench.crash_drill``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import workflows
from bench import crash_drill
from devtools.function_host import FunctionHost
from functions_adapter import wiring

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def drill_host(host: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FunctionHost]:
    monkeypatch.setitem(workflows.REGISTRY, "loop", crash_drill.WORKFLOW_ENTRY)
    monkeypatch.setenv("WORKFLOW", "loop")
    wiring.workflow_spec.cache_clear()
    yield host
    wiring.workflow_spec.cache_clear()


@pytest.mark.parametrize("kill_at", [1, 7, 20])
async def test_a_worker_killed_inside_a_step_is_taken_over_and_commits_once(
    drill_host: FunctionHost, tmp_path: Path, kill_at: int
) -> None:
    outcome = await crash_drill.crash_round(drill_host, dict(os.environ), tmp_path, kill_at=kill_at)
    assert outcome.killed  # a real process, really killed
    assert outcome.steps_before_kill == kill_at
    assert outcome.status == "succeeded"
    assert outcome.commits == 1
    assert outcome.same_result
    assert outcome.redone == 1  # the step it died in, and nothing before it
    assert outcome.one_stream  # each output once across both workers: none lost with the process
    assert outcome.progress_left == 0


@pytest.mark.parametrize(
    ("kill_in", "before", "redone"),
    [
        ("progress:5", 4, 0),  # the 5th progress write (after step 4) landed, its answer never used
        ("checkpoint", 20, 1),  # the turn's checkpoint saved, the thread's pointer not moved
        ("outcome", 20, 0),  # the pointer moved (committed), the run's outcome not written
        ("removal", 20, 0),  # the outcome written, the run's progress not removed yet
    ],
)
async def test_a_worker_killed_inside_the_protocol_is_taken_over_and_commits_once(
    drill_host: FunctionHost, tmp_path: Path, kill_in: str, before: int, redone: int
) -> None:
    outcome = await crash_drill.crash_round(drill_host, dict(os.environ), tmp_path, kill_in=kill_in)
    assert outcome.killed
    assert outcome.steps_before_kill == before
    assert (outcome.status, outcome.commits, outcome.same_result, outcome.one_stream) == ("succeeded", 1, True, True)
    assert outcome.redone <= redone
    assert outcome.progress_left == 0


async def test_the_worker_that_takes_over_dies_too_before_saving_anything(
    drill_host: FunctionHost, tmp_path: Path
) -> None:
    """Two crashes in a row, the second before its first progress write: the third worker goes on
    from the first one's progress, and the stream still shows each output once."""
    outcome = await crash_drill.crash_round(drill_host, dict(os.environ), tmp_path, kill_at=7, then_kill_at=7)
    assert outcome.killed
    assert (outcome.status, outcome.commits, outcome.same_result, outcome.one_stream) == ("succeeded", 1, True, True)
    assert outcome.redone == 2  # step 7, once per crash
    assert outcome.progress_left == 0
