"""Contract tests for the private Agent Framework behaviour ``resumable.checkpoints.af_internals`` uses.

If one of these fails after an upgrade, read resumable/checkpoints/af_internals.py: the atomic
resume depends on exactly what these tests pin, and each message says what changed.
"""

from __future__ import annotations

import base64
import gc
import importlib.metadata
import inspect
import pickle
import weakref

import pytest
from agent_framework import InMemoryCheckpointStorage, Message, WorkflowCheckpoint
from agent_framework.exceptions import WorkflowCheckpointException

from resumable.checkpoints import af_internals, pickle_guard
from resumable.checkpoints.codec import FRAMEWORK_TYPE_KEYS
from resumable.checkpoints.pickle_guard import PickleLimits
from tests import recording_workflow
from tests.pickle_gadgets import Call
from workflows import default_conversation


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
    """Our decoder reads the framework's envelope: both markers, base64, a pickle."""
    value = {"plain": [1, "a", None], "tuple": (1, 2)}
    encoded = af_internals.encode_checkpoint_value(value)
    assert encoded["plain"] == [1, "a", None]
    assert set(encoded["tuple"]) == {"__pickled__", "__type__"}, "the pickle envelope format changed"
    assert encoded["tuple"]["__type__"] == "builtins:tuple", "the envelope's type key format changed"
    pickled = base64.b64decode(encoded["tuple"]["__pickled__"])
    allowlist = pickle_guard.Allowlist.of(())
    pickle_guard.scan(pickled, allowlist, pickle_guard.ScanBudget.for_checkpoint(len(pickled), PickleLimits()))
    assert pickle_guard.restricted_loads(pickled, allowlist) == (1, 2)


def test_framework_unpickler_still_admits_builtins_type() -> None:
    """Pinned so an upgrade that changes it is noticed. 1.23.0's restricted unpickler
    lets a pickle call ``type(...)`` (and any ``agent_framework.*`` class): enough to
    run code through a pydantic base. That is why the app decodes with
    ``resumable/checkpoints/pickle_guard.py`` and not with the framework's decoder. If this fails,
    upstream changed its allowlist: keep our scan, but re-read docs/security.md (Checkpoints)
    and the comment on ``af_internals.CHECKPOINT_DATA_TYPES``."""
    from agent_framework._workflows._checkpoint_encoding import decode_checkpoint_value

    made = pickle.dumps(Call(type, "Made", (), {}))
    decoded = decode_checkpoint_value(
        {"__pickled__": base64.b64encode(made).decode(), "__type__": "builtins:type"}, allowed_types=frozenset()
    )
    assert isinstance(decoded, type) and decoded.__name__ == "Made", (
        "the framework's restricted unpickler no longer calls builtins:type; see this test's docstring"
    )


class _Recorder:
    """Stands in for an allowlist: admits everything, remembers what was named."""

    def __init__(self) -> None:
        self.named: set[str] = set()

    def may_call(self, key: str) -> bool:
        self.named.add(key)
        return True

    def may_reference(self, key: str) -> bool:
        return self.may_call(key)


def _record_pickles(value: object, recorder: _Recorder) -> None:
    if isinstance(value, dict):
        if "__pickled__" in value:
            pickled = base64.b64decode(value["__pickled__"])
            budget = pickle_guard.ScanBudget.for_checkpoint(len(pickled), PickleLimits())
            pickle_guard.scan(pickled, recorder, budget)  # type: ignore[arg-type]
            return
        for item in value.values():
            _record_pickles(item, recorder)
    elif isinstance(value, list):
        for item in value:
            _record_pickles(item, recorder)


async def test_checkpoint_data_types_cover_what_real_checkpoints_pickle() -> None:
    """Every framework class a shipped workflow's checkpoints pickle (mid-run ones, pending
    requests and their answers included) is in ``af_internals.CHECKPOINT_DATA_TYPES``.
    If this fails after an upgrade, the framework pickles a new class: check that it is
    a plain data class, then add it there. (chat-agents is covered in test_chat_agents.)"""
    from workflows import default_conversation

    storage = InMemoryCheckpointStorage()
    recording = recording_workflow.build()
    await recording.run([Message(role="user", contents=["one"])], checkpoint_storage=storage)
    first = default_conversation.build_workflow()
    paused = await first.run([Message(role="user", contents=["needs approval"])], checkpoint_storage=storage)
    [request] = paused.get_request_info_events()
    answered = default_conversation.build_workflow()
    await answered.run(responses={request.request_id: "yes"}, checkpoint_id=first.get_last_checkpoint_id(),
                       checkpoint_storage=storage)  # fmt: skip
    recorder = _Recorder()
    for name in (recording.name, first.name):
        for checkpoint in await storage.list_checkpoints(workflow_name=name):
            _record_pickles(af_internals.encode_checkpoint_value(checkpoint.to_dict()), recorder)
    framework = {key for key in recorder.named if key.startswith("agent_framework")}
    assert framework, "no framework class was pickled at all: the encoding changed"
    assert framework <= FRAMEWORK_TYPE_KEYS, f"new framework classes in checkpoints: {framework - FRAMEWORK_TYPE_KEYS}"


async def test_validate_responses_is_the_runs_own_check() -> None:
    """The pre-run check converts and refuses answers as ``run(responses=...)`` does;
    pinned with a non-str response type (int) and a computer-use call."""
    from agent_framework import Message
    from agent_framework.exceptions import AgentInvalidResponseException

    from tests import computer_call_workflow

    counter = computer_call_workflow.build_counter()
    [request] = (await counter.run("how many?")).get_request_info_events()
    assert await af_internals.validate_responses(counter, {request.request_id: 3}) == {request.request_id: 3}
    with pytest.raises((ValueError, TypeError)):
        await af_internals.validate_responses(counter, {request.request_id: {"not": "an int"}})
    with pytest.raises(ValueError):
        await af_internals.validate_responses(counter, {"unknown": 3})

    computer = computer_call_workflow.build()
    [call] = (await computer.run([Message(role="user", contents=["use it"])])).get_request_info_events()
    wrong_call = {"type": "computer_tool_result", "call_id": "another", "acknowledged_safety_checks": []}
    with pytest.raises(AgentInvalidResponseException):
        await af_internals.validate_responses(computer, {call.request_id: wrong_call})


def test_checkpoint_dataclass_fields_are_the_ones_the_codec_checks() -> None:
    from dataclasses import fields

    from resumable.checkpoints.codec import _FIELD_TYPES

    assert {f.name for f in fields(WorkflowCheckpoint)} == set(_FIELD_TYPES), (
        "WorkflowCheckpoint's fields changed; update checkpoint_codec._FIELD_TYPES."
    )


def test_runner_context_reports_in_flight_messages() -> None:
    context = recording_workflow.build()._runner.context
    assert inspect.iscoroutinefunction(getattr(context, "has_messages", None)), (
        "RunnerContext.has_messages is gone: af_internals.has_in_flight_messages needs another way "
        "to see undelivered messages after a restore."
    )


def test_executors_keep_their_own_bound_methods_in_their_handler_tables() -> None:
    """``unlink_handlers`` replaces exactly these: if the tables move or hold something
    else, executors may again be freed only by the cycle collector (issue 30)."""
    workflow = default_conversation.build_workflow()
    responder = workflow.executors["responder"]
    handlers = getattr(responder, "_handlers", None)
    response_handlers = getattr(responder, "_response_handlers", None)
    assert isinstance(handlers, dict) and isinstance(response_handlers, dict), "Executor handler tables moved."
    for table in (handlers, response_handlers):
        assert table and all(getattr(h, "__self__", None) is responder for h in table.values()), (
            "An executor's handler table no longer holds its own bound methods: re-check unlink_handlers."
        )


async def test_unlinked_handlers_still_run_and_the_executors_die_with_the_workflow() -> None:
    workflow = default_conversation.build_workflow()
    af_internals.unlink_handlers(workflow)
    assert all(getattr(h, "__self__", None) is None for e in workflow.executors.values() for h in e._handlers.values())
    events = [e async for e in workflow.run([Message(role="user", contents=["approval please"])], stream=True)]
    assert any(e.type == "request_info" for e in events), "the response handler's executor did not run"
    answer = {e.request_id: "yes" for e in events if e.type == "request_info"}
    outputs = [e async for e in workflow.run(responses=answer, stream=True) if e.type == "output"]
    assert "Approval answer" in outputs[0].data.text, "the unlinked response handler did not run"
    executors = [weakref.ref(e) for e in workflow.executors.values()]
    gc.disable()
    try:
        del workflow, events, outputs
        assert [ref() for ref in executors] == [None, None], "an executor outlived its workflow: a new cycle"
    finally:
        gc.enable()
