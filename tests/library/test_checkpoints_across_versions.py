"""Checkpoints written under the oldest supported Agent Framework continue under the installed one.

``checkpoints_from_1_23_0/`` holds two blobs of the default workflow, as this app stores them,
written under agent-framework-core 1.23.0 (two turns, ``idle.json``; then a turn that waits on an
approval, ``pending.json``, whose pending request is pickled). Each is decoded by the app's codec
and resumed with the atomic resume on whatever version is installed: CI runs this on both ends of
the supported range, so an upgrade that changes the graph signature, the checkpoint encoding or
what a restore does to a 1.23.0 checkpoint fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_framework import Message, WorkflowCheckpoint

from resumable.checkpoints.codec import CheckpointCodec
from resumable.core.resume import TurnInput, prepare_run
from workflows import default_conversation

WRITTEN = Path(__file__).with_name("checkpoints_from_1_23_0")


def _decoded(name: str) -> WorkflowCheckpoint:
    codec = CheckpointCodec(allowed_types=default_conversation.SPEC.allowed_type_keys)
    return codec.decode((WRITTEN / name).read_bytes())


async def _texts(checkpoint: WorkflowCheckpoint, turn: TurnInput) -> tuple[list[str], WorkflowCheckpoint]:
    run = await prepare_run(default_conversation.build_workflow(), checkpoint, turn)
    outputs = [e.data.text for e in [e async for e in run.events()] if e.type == "output"]
    return outputs, await run.final_checkpoint()


@pytest.mark.parametrize("name", ["idle.json", "pending.json"])
def test_the_graph_signature_is_the_same_on_this_version(name: str) -> None:
    checkpoint = _decoded(name)
    assert checkpoint.graph_signature_hash == default_conversation.build_workflow().graph_signature_hash


async def test_a_new_message_continues_a_1_23_0_checkpoint() -> None:
    checkpoint = _decoded("idle.json")
    outputs, after = await _texts(checkpoint, TurnInput(messages=[Message(role="user", contents=["third"])]))
    assert outputs == ['turn 3: you said "third". Earlier you said: "hello", "how are you"']
    assert after.previous_checkpoint_id == checkpoint.checkpoint_id
    assert after.state["_executor_state"]["memory"] == {"user_texts": ["hello", "how are you", "third"], "turn": 3}


async def test_an_answer_continues_a_1_23_0_checkpoint_waiting_on_a_request() -> None:
    checkpoint = _decoded("pending.json")
    [request_id] = checkpoint.pending_request_info_events
    outputs, after = await _texts(checkpoint, TurnInput(responses={request_id: "yes"}))
    assert outputs == [
        'turn 3: you said "needs approval". Approval answer: "yes". Earlier you said: "hello", "how are you"'
    ]
    assert after.pending_request_info_events == {}
