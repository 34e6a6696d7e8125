"""Contract tests for the private Agent Framework behaviour ``resumable.af_internals`` uses.

If one of these fails after an upgrade, read resumable/af_internals.py: the atomic
resume depends on exactly what these tests pin, and each message says what changed.
"""

from __future__ import annotations

import base64
import importlib.metadata
import inspect
import pickle

import pytest
from agent_framework import InMemoryCheckpointStorage, Message, WorkflowCheckpoint
from agent_framework.exceptions import WorkflowCheckpointException

from resumable import af_internals
from tests import recording_workflow


def test_pinned_framework_version_is_installed() -> None:
    installed = importlib.metadata.version("agent-framework-core")
    assert installed == af_internals.AGENT_FRAMEWORK_VERSION, (
        f"agent-framework-core {installed} is installed but af_internals was checked against "
        f"{af_internals.AGENT_FRAMEWORK_VERSION}; re-read the private calls it makes, then update the pin."
    )


def test_runner_restore_checkpoint_is_an_async_method_taking_a_checkpoint() -> None:
    workflow = recording_workflow.build()
    restore = getattr(getattr(workflow, "_runner", None), "restore_checkpoint", None)
    assert restore is not None, "Workflow._runner.restore_checkpoint is gone: the atomic resume cannot hydrate."
    assert inspect.iscoroutinefunction(restore), "restore_checkpoint is no longer async."
    assert list(inspect.signature(restore).parameters) == ["checkpoint"], "restore_checkpoint's parameters changed."


def test_run_still_refuses_message_with_checkpoint_id() -> None:
    """When upstream #7863 lands, this fails: switch to the public single-call API."""
    workflow = recording_workflow.build()
    with pytest.raises(ValueError, match="Cannot provide both 'message' and 'checkpoint_id'"):
        workflow.run([Message(role="user", contents=["x"])], checkpoint_id="abc")


async def test_hydrate_then_fresh_message_runs_once_and_continues_state() -> None:
    storage = InMemoryCheckpointStorage()
    first = recording_workflow.build()
    await first.run([Message(role="user", contents=["one"])], checkpoint_storage=storage)
    checkpoint = await storage.load(first.get_last_checkpoint_id())

    second = recording_workflow.build()
    await af_internals.hydrate(second, checkpoint)
    assert second.get_start_executor().seen == 1, "restore_checkpoint no longer restores executor state."
    events = [e async for e in second.run([Message(role="user", contents=["two"])], stream=True)]
    assert [e.type for e in events].count("started") == 1
    assert second.get_start_executor().seen == 2


async def test_hydrate_rejects_a_changed_graph() -> None:
    storage = InMemoryCheckpointStorage()
    workflow = recording_workflow.build()
    await workflow.run([Message(role="user", contents=["one"])], checkpoint_storage=storage)
    checkpoint = await storage.load(workflow.get_last_checkpoint_id())
    checkpoint.graph_signature_hash = "0" * 64
    with pytest.raises(WorkflowCheckpointException):
        await af_internals.hydrate(recording_workflow.build(), checkpoint)


def test_codec_round_trips_and_pickles_non_json_values() -> None:
    value = {"plain": [1, "a", None], "tuple": (1, 2)}
    encoded = af_internals.encode_checkpoint_value(value)
    assert encoded["plain"] == [1, "a", None]
    assert set(encoded["tuple"]) == {"__pickled__", "__type__"}, "the pickle envelope format changed"
    assert af_internals.decode_checkpoint_value(encoded, allowed_types=frozenset()) == value


class _Evil:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (eval, ("1",))


def test_decode_with_empty_allowlist_is_restricted() -> None:
    payload = {"__pickled__": base64.b64encode(pickle.dumps(_Evil())).decode(), "__type__": "builtins:int"}
    with pytest.raises(WorkflowCheckpointException):
        af_internals.decode_checkpoint_value(payload, allowed_types=frozenset())


def test_decode_refuses_none_allowlist() -> None:
    with pytest.raises(TypeError):
        af_internals.decode_checkpoint_value({}, allowed_types=None)  # type: ignore[arg-type]


def test_coerce_response_validates_against_the_request_type() -> None:
    assert af_internals.coerce_response("yes", str, "r1") == "yes"
    with pytest.raises(ValueError):
        af_internals.coerce_response({"not": "a string"}, str, "r1")


def test_checkpoint_dataclass_fields_are_the_ones_the_codec_checks() -> None:
    from dataclasses import fields

    from resumable.checkpoint_codec import _FIELD_TYPES

    assert {f.name for f in fields(WorkflowCheckpoint)} == set(_FIELD_TYPES), (
        "WorkflowCheckpoint's fields changed; update checkpoint_codec._FIELD_TYPES."
    )


def test_runner_context_reports_in_flight_messages() -> None:
    context = recording_workflow.build()._runner.context
    assert inspect.iscoroutinefunction(getattr(context, "has_messages", None)), (
        "RunnerContext.has_messages is gone: af_internals.has_in_flight_messages needs another way "
        "to see undelivered messages after a restore."
    )
