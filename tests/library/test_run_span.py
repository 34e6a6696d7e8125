"""The workflow run span, found on every supported framework version: by the tests, by the demo's
run count, and by the KQL in docs/observability.md (1.26.0 renamed it from ``workflow.run`` to
``invoke_workflow <name>``). CI runs this file on both ends of the supported range."""

from __future__ import annotations

import re
from pathlib import Path

from agent_framework import InMemoryCheckpointStorage, Message
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from examples.three_turns import count_runs
from resumable.base.tracing import WORKFLOW_RUN_SPAN, is_workflow_run_span
from resumable.core.resume import TurnInput, prepare_run
from tests import recording_workflow

DOCS = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def _user(text: str) -> list[Message]:
    return [Message(role="user", contents=[text])]


async def _resume_once() -> None:
    """A first turn, then one atomic resume: the spans of the resume alone are left to read."""
    first = await prepare_run(recording_workflow.build(), None, TurnInput(messages=_user("one")))
    [e async for e in first.events()]
    checkpoint = await first.final_checkpoint()
    resumed = await prepare_run(recording_workflow.build(), checkpoint, TurnInput(messages=_user("two")))
    [e async for e in resumed.events()]


async def test_the_demo_counts_one_run_for_an_atomic_resume(spans: InMemorySpanExporter) -> None:
    await _resume_once()
    assert count_runs(spans.get_finished_spans()) == 2  # the first turn and the resume
    spans.clear()
    await _resume_once()
    finished = spans.get_finished_spans()
    assert count_runs(finished) == 2
    assert sum(1 for s in finished if is_workflow_run_span(s.name)) == 2
    assert not any(is_workflow_run_span(s.name) for s in finished if s.name.startswith("executor."))


async def test_the_demo_counts_two_runs_for_the_two_step_pattern(spans: InMemorySpanExporter) -> None:
    storage = InMemoryCheckpointStorage()
    first = recording_workflow.build()
    await first.run(_user("one"), checkpoint_storage=storage)
    checkpoint_id = first.get_last_checkpoint_id()
    spans.clear()
    second = recording_workflow.build()
    await second.run(checkpoint_id=checkpoint_id, checkpoint_storage=storage)
    await second.run(_user("two"), checkpoint_storage=storage)
    assert count_runs(spans.get_finished_spans()) == 2


def _kql_run_span_predicate() -> tuple[list[str], list[str]]:
    """The names the docs' query compares a span name with: (equal to, starts with)."""
    [line] = [line for line in DOCS.read_text().splitlines() if line.startswith("let is_run_span")]
    return re.findall(r'== "([^"]+)"', line), re.findall(r'startswith "([^"]+)"', line)


def _kql_matches(name: str) -> bool:
    equal, prefixes = _kql_run_span_predicate()
    return name in equal or any(name.startswith(prefix) for prefix in prefixes)


async def test_the_docs_query_finds_the_run_span_this_version_emits(spans: InMemorySpanExporter) -> None:
    """The run span's name, under a named workflow and a builder-generated one, and every other
    span of a run: the query counts exactly the run spans."""
    await _resume_once()
    finished = spans.get_finished_spans()
    run_names = {s.name for s in finished if is_workflow_run_span(s.name)}
    assert run_names, f"no span named {WORKFLOW_RUN_SPAN!r} (alone or followed by the workflow's name)"
    assert all(_kql_matches(name) for name in run_names), (
        f"docs/observability.md's query misses {run_names}: add this version's name to is_run_span"
    )
    others = {s.name for s in finished} - run_names
    assert others and not any(_kql_matches(name) for name in others)


def test_the_docs_query_names_both_ends_of_the_range() -> None:
    equal, prefixes = _kql_run_span_predicate()
    assert "workflow.run" in equal and "invoke_workflow" in prefixes
