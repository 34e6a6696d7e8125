"""The atomic resume as a library call: one run, validation before execution, lineage."""

from __future__ import annotations

import pytest
from agent_framework import InMemoryCheckpointStorage, Message, WorkflowCheckpoint
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from resumable.base.errors import (
    CheckpointHasInFlightWork,
    CheckpointIncompatible,
    InvalidRequest,
    PendingRequestsOutstanding,
    WorkflowFailed,
)
from resumable.base.tracing import is_workflow_run_span
from resumable.core.resume import TurnInput, prepare_run
from tests import recording_workflow
from workflows import default_conversation


def user(text: str) -> list[Message]:
    return [Message(role="user", contents=[text])]


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    recording_workflow.CALLS.clear()


async def run_turn(checkpoint: WorkflowCheckpoint | None, text: str, *, stream: bool = True):
    run = await prepare_run(recording_workflow.build(), checkpoint, TurnInput(messages=user(text)), stream=stream)
    events = [e async for e in run.events()]
    return events, await run.final_checkpoint()


async def test_resume_with_input_is_one_run_with_one_started_event_and_one_span(
    spans: InMemorySpanExporter,
) -> None:
    _, first = await run_turn(None, "one")
    spans.clear()
    events, second = await run_turn(first, "two")

    types = [e.type for e in events]
    assert types[0] == "started", "hydration must not emit anything before the run starts"
    assert types.count("started") == 1
    run_spans = [s for s in spans.get_finished_spans() if is_workflow_run_span(s.name)]
    assert len(run_spans) == 1
    assert recording_workflow.CALLS[-3:] == [("head", "two"), ("middle", "two"), ("tail", "two")]
    assert second.previous_checkpoint_id == first.checkpoint_id
    assert second.state["_executor_state"]["head"] == {"seen": 2}


async def test_non_streaming_takes_the_same_path_and_result() -> None:
    _, first = await run_turn(None, "one", stream=False)
    events, second = await run_turn(first, "two", stream=False)
    outputs = [e.data for e in events if e.type == "output"]
    assert outputs[0] == "middle saw two"
    assert outputs[1].text == "tail done: two"
    assert second.previous_checkpoint_id == first.checkpoint_id


async def test_fresh_run_has_no_parent() -> None:
    _, checkpoint = await run_turn(None, "one")
    assert checkpoint.previous_checkpoint_id is None
    assert not any(checkpoint.messages.values())


async def _checkpoint() -> WorkflowCheckpoint:
    _, checkpoint = await run_turn(None, "setup")
    recording_workflow.CALLS.clear()
    return checkpoint


@pytest.mark.parametrize(
    ("tamper", "error"),
    [
        (lambda cp: setattr(cp, "workflow_name", "someone-else"), CheckpointIncompatible),
        (lambda cp: setattr(cp, "graph_signature_hash", "f" * 64), CheckpointIncompatible),
        (lambda cp: cp.state["_executor_state"].__setitem__("head", "not a dict"), CheckpointIncompatible),
    ],
    ids=["other-workflow", "graph-changed", "restore-fails"],
)
async def test_a_rejected_checkpoint_never_runs_the_input(tamper, error) -> None:
    checkpoint = await _checkpoint()
    tamper(checkpoint)
    with pytest.raises(error):
        await prepare_run(recording_workflow.build(), checkpoint, TurnInput(messages=user("new input")))
    assert recording_workflow.CALLS == []


async def test_a_mid_run_checkpoint_is_refused_for_new_messages() -> None:
    storage = InMemoryCheckpointStorage()
    workflow = recording_workflow.build()
    await workflow.run(user("one"), checkpoint_storage=storage)
    checkpoints = await storage.list_checkpoints(workflow_name=recording_workflow.NAME)
    mid_run = next(cp for cp in checkpoints if any(cp.messages.values()))
    recording_workflow.CALLS.clear()
    with pytest.raises(CheckpointHasInFlightWork):
        await prepare_run(recording_workflow.build(), mid_run, TurnInput(messages=user("new")))
    assert recording_workflow.CALLS == []

    # Without new input the same checkpoint continues its own pending work.
    run = await prepare_run(recording_workflow.build(), mid_run, TurnInput())
    [e async for e in run.events()]
    assert ("tail", "one") in recording_workflow.CALLS


async def pending_checkpoint() -> tuple[WorkflowCheckpoint, str]:
    run = await prepare_run(default_conversation.build_workflow(), None, TurnInput(messages=user("needs approval")))
    events = [e async for e in run.events()]
    request_id = next(e.request_id for e in events if e.type == "request_info")
    return await run.final_checkpoint(), request_id


async def test_messages_while_requests_are_pending_are_refused_with_their_ids() -> None:
    checkpoint, request_id = await pending_checkpoint()
    with pytest.raises(PendingRequestsOutstanding) as caught:
        await prepare_run(default_conversation.build_workflow(), checkpoint, TurnInput(messages=user("hi")))
    assert caught.value.details == {"pending_request_ids": [request_id]}


async def test_responses_finish_the_paused_turn() -> None:
    checkpoint, request_id = await pending_checkpoint()
    run = await prepare_run(
        default_conversation.build_workflow(), checkpoint, TurnInput(responses={request_id: "granted"})
    )
    events = [e async for e in run.events()]
    replies = [e.data.text for e in events if e.type == "output"]
    assert len(replies) == 1
    assert 'Approval answer: "granted"' in replies[0]
    assert "turn 1" in replies[0]
    final = await run.final_checkpoint()
    assert final.pending_request_info_events == {}
    assert final.previous_checkpoint_id == checkpoint.checkpoint_id


@pytest.mark.parametrize(
    "responses",
    [{"unknown-id": "yes"}, "WRONG_TYPE"],
    ids=["unknown-request", "wrong-type"],
)
async def test_bad_responses_are_refused_before_running(responses) -> None:
    checkpoint, request_id = await pending_checkpoint()
    if responses == "WRONG_TYPE":
        responses = {request_id: {"an": "object"}}
    with pytest.raises(InvalidRequest):
        await prepare_run(default_conversation.build_workflow(), checkpoint, TurnInput(responses=responses))


async def test_fresh_run_needs_messages() -> None:
    with pytest.raises(InvalidRequest):
        await prepare_run(recording_workflow.build(), None, TurnInput())


async def test_a_failing_run_raises_workflow_failed_and_yields_no_checkpoint() -> None:
    checkpoint = await _checkpoint()
    run = await prepare_run(recording_workflow.build(), checkpoint, TurnInput(messages=user("please fail")))
    with pytest.raises(WorkflowFailed):
        [e async for e in run.events()]
    with pytest.raises(WorkflowFailed):
        await run.final_checkpoint()


async def test_a_cancelled_stream_yields_no_checkpoint() -> None:
    checkpoint = await _checkpoint()
    run = await prepare_run(recording_workflow.build(), checkpoint, TurnInput(messages=user("two")))
    events = run.events()
    async for event in events:
        if event.type == "output":
            break
    await events.aclose()
    with pytest.raises(WorkflowFailed):
        await run.final_checkpoint()
