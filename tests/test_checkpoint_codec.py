"""Decoding bytes from storage: restricted types, malformed data, size caps."""

from __future__ import annotations

import base64
import json
import pickle

import pytest
from agent_framework import InMemoryCheckpointStorage, Message, WorkflowCheckpoint

from resumable.checkpoint_codec import CheckpointCodec
from resumable.errors import CheckpointTooLarge, CheckpointUnreadable
from tests import recording_workflow

SENTINEL: list[str] = []


def _record(value: str) -> None:
    SENTINEL.append(value)


class Payload:
    """Would call ``_record`` (standing in for ``os.system``) when unpickled."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (_record, ("executed",))


class AppState:
    def __init__(self, value: int) -> None:
        self.value = value


async def a_checkpoint() -> WorkflowCheckpoint:
    storage = InMemoryCheckpointStorage()
    workflow = recording_workflow.build()
    await workflow.run([Message(role="user", contents=["hi"])], checkpoint_storage=storage)
    return await storage.load(workflow.get_last_checkpoint_id())


async def test_round_trip_keeps_every_field() -> None:
    checkpoint = await a_checkpoint()
    codec = CheckpointCodec()
    decoded = codec.decode(codec.encode(checkpoint), expected_id=checkpoint.checkpoint_id)
    assert decoded.to_dict() == checkpoint.to_dict()


async def test_saved_checkpoint_of_json_state_has_no_pickles() -> None:
    data = CheckpointCodec().encode(await a_checkpoint())
    assert b"__pickled__" not in data


def _with_pickle(data: bytes, value: object, type_key: str) -> bytes:
    raw = json.loads(data)
    raw["state"]["injected"] = {"__pickled__": base64.b64encode(pickle.dumps(value)).decode(), "__type__": type_key}
    return json.dumps(raw).encode()


@pytest.mark.parametrize(
    "payload",
    [Payload(), pickle.loads(pickle.dumps(AppState(1)))],
    ids=["code-execution", "unlisted-class"],
)
async def test_non_allowlisted_pickles_are_refused_without_running(payload: object) -> None:
    SENTINEL.clear()
    data = _with_pickle(CheckpointCodec().encode(await a_checkpoint()), payload, "builtins:int")
    with pytest.raises(CheckpointUnreadable):
        CheckpointCodec().decode(data)
    assert SENTINEL == []


async def test_os_system_is_refused() -> None:
    import os

    class Shell:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, ("touch /tmp/should-not-exist-resumable",))

    data = _with_pickle(CheckpointCodec().encode(await a_checkpoint()), Shell(), "builtins:int")
    with pytest.raises(CheckpointUnreadable):
        CheckpointCodec().decode(data)
    assert not os.path.exists("/tmp/should-not-exist-resumable")


async def test_allowlisted_application_types_decode() -> None:
    key = f"{AppState.__module__}:{AppState.__qualname__}"
    data = _with_pickle(CheckpointCodec().encode(await a_checkpoint()), AppState(7), key)
    decoded = CheckpointCodec(allowed_types=[key]).decode(data)
    assert decoded.state["injected"].value == 7


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b[: len(b) // 2],
        lambda b: b"\xff\xfe" + b,
        lambda b: b"[]",
        lambda b: json.dumps({**json.loads(b), "extra": 1}).encode(),
        lambda b: json.dumps({k: v for k, v in json.loads(b).items() if k != "graph_signature_hash"}).encode(),
        lambda b: json.dumps({**json.loads(b), "iteration_count": "2"}).encode(),
        lambda b: json.dumps({**json.loads(b), "state": {"x": {"__pickled__": "!!", "__type__": "a:b"}}}).encode(),
        lambda b: b"[" * 100_000,
    ],
    ids=[
        "truncated",
        "not-utf8",
        "not-an-object",
        "extra-field",
        "missing-required-field",
        "wrong-type",
        "bad-base64",
        "deep-nesting",
    ],
)
async def test_garbled_data_is_unreadable(mutate) -> None:
    data = CheckpointCodec().encode(await a_checkpoint())
    with pytest.raises(CheckpointUnreadable):
        CheckpointCodec().decode(mutate(data))


async def test_a_blob_under_another_id_is_refused() -> None:
    data = CheckpointCodec().encode(await a_checkpoint())
    with pytest.raises(CheckpointUnreadable):
        CheckpointCodec().decode(data, expected_id="some-other-id")


async def test_size_caps_apply_on_encode_and_decode() -> None:
    checkpoint = await a_checkpoint()
    data = CheckpointCodec().encode(checkpoint)
    small = CheckpointCodec(max_bytes=len(data) - 1)
    with pytest.raises(CheckpointTooLarge):
        small.encode(checkpoint)
    with pytest.raises(CheckpointUnreadable):
        small.decode(data)


async def test_a_blob_missing_an_optional_field_still_loads() -> None:
    """Blobs written before a framework upgrade added a field (with a default) stay readable."""
    checkpoint = await a_checkpoint()
    raw = json.loads(CheckpointCodec().encode(checkpoint))
    del raw["metadata"]
    decoded = CheckpointCodec().decode(json.dumps(raw).encode())
    assert decoded.metadata == {}
    assert decoded.state == checkpoint.state
