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
import re
import weakref
from pathlib import Path

import pytest
from agent_framework import InMemoryCheckpointStorage, Message, WorkflowCheckpoint
from agent_framework.exceptions import WorkflowCheckpointException

from resumable.checkpoints import af_internals, pickle_guard
from resumable.checkpoints.codec import FRAMEWORK_TYPE_KEYS
from resumable.checkpoints.pickle_guard import PickleLimits
from tests import recording_workflow
from tests.pickle_gadgets import Call, huge_range, nested_shared_references
from workflows import default_conversation

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = importlib.metadata.version("agent-framework-core")


def test_the_installed_framework_is_in_the_supported_range() -> None:
    assert af_internals.installed_framework_version() == INSTALLED
    assert af_internals.is_supported_framework(INSTALLED), (
        f"agent-framework-core {INSTALLED} is installed but af_internals was checked against "
        f"{af_internals.OLDEST_SUPPORTED} to {af_internals.NEWEST_SUPPORTED}; re-read the private calls "
        "it makes and run these tests on it, then move the range."
    )


def test_the_lock_pins_the_newest_supported_version() -> None:
    """The range's newest end is the lock's pin: moving one without the other fails here."""
    pins = re.findall(r"^agent-framework-core==(\S+)", (ROOT / "requirements.in").read_text(), re.MULTILINE)
    assert pins == [af_internals.NEWEST_SUPPORTED]


@pytest.mark.parametrize(
    ("version", "supported"),
    [("1.22.0", False), ("1.23.0", True), ("1.24.1", True), ("1.26.0", True), ("1.26.1", False),
     ("1.27.0rc1", False), ("2.0.0", False), ("1.26", True)],
)  # fmt: skip
def test_the_range_includes_both_ends_and_nothing_outside(version: str, supported: bool) -> None:
    """Checked against the range as declared today (1.23.0 to 1.26.0)."""
    assert (af_internals.OLDEST_SUPPORTED, af_internals.NEWEST_SUPPORTED) == ("1.23.0", "1.26.0")
    assert af_internals.is_supported_framework(version) is supported
    assert (af_internals.framework_version_problem(version) is None) is supported


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


async def test_one_public_call_takes_a_checkpoint_and_new_input() -> None:
    """Pins that no public call restores a checkpoint and applies new input in one run, which is
    why ``af_internals.hydrate`` exists. Tried the ways upstream has discussed (#7863: a message
    with ``checkpoint_id`` and storage; #8522: ``run(checkpoint=...)``), with a real checkpoint.
    When this fails, one of them works: follow "When the framework accepts a checkpoint" in
    ``resumable/checkpoints/af_internals.py``'s docstring."""
    storage = InMemoryCheckpointStorage()
    first = recording_workflow.build()
    await first.run([Message(role="user", contents=["one"])], checkpoint_storage=storage)
    checkpoint_id = first.get_last_checkpoint_id()
    checkpoint = await storage.load(checkpoint_id)
    attempts = {
        "run(message, checkpoint_id=..., checkpoint_storage=...)": {
            "checkpoint_id": checkpoint_id,
            "checkpoint_storage": storage,
        },
        "run(message, checkpoint=...)": {"checkpoint": checkpoint},
    }
    accepted = []
    for call, kwargs in attempts.items():
        workflow = recording_workflow.build()
        try:
            result = await workflow.run([Message(role="user", contents=["two"])], **kwargs)
        except (TypeError, ValueError):
            continue  # refused: an unknown keyword, or message and checkpoint together
        if workflow.get_start_executor().seen == 2 and [e.type for e in result].count("started") == 1:
            accepted.append(call)
    assert accepted == [], f"the framework now resumes and applies input in one public call: {accepted}"
    assert "checkpoint" not in inspect.signature(recording_workflow.build().run).parameters


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


def _framework_decode(pickled: bytes, type_key: str) -> object:
    """The framework's own decoder, on one envelope that claims ``type_key``."""
    from agent_framework._workflows._checkpoint_encoding import decode_checkpoint_value

    envelope = {"__pickled__": base64.b64encode(pickled).decode(), "__type__": type_key}
    return decode_checkpoint_value(envelope, allowed_types=frozenset())


# What each supported version's restricted unpickler does with a pickle that calls three-argument
# ``type(...)``: 1.23.0 builds the class (enough to run code through a pydantic base), 1.26.0
# refuses it. A version in the range but not listed here fails the test below until it is checked.
BUILTINS_TYPE_BUILDS_A_CLASS = {"1.23.0": True, "1.26.0": False}


def test_framework_unpickler_and_builtins_type_as_each_version_does() -> None:
    """Pinned per version so an upgrade that changes it is noticed. Either way the app decodes
    with ``resumable/checkpoints/pickle_guard.py``, not the framework's decoder: no version in the
    range has a size budget (the next test). If this fails, re-read docs/security.md
    (Checkpoints) and the comment on ``af_internals.CHECKPOINT_DATA_TYPES``."""
    assert INSTALLED in BUILTINS_TYPE_BUILDS_A_CLASS, f"check {INSTALLED}'s unpickler, then add it above"
    made = pickle.dumps(Call(type, "Made", (), {}))
    if BUILTINS_TYPE_BUILDS_A_CLASS[INSTALLED]:
        decoded = _framework_decode(made, "builtins:type")
        assert isinstance(decoded, type) and decoded.__name__ == "Made", (
            f"{INSTALLED}'s restricted unpickler no longer calls builtins:type; see this test's docstring"
        )
    else:
        with pytest.raises(WorkflowCheckpointException):
            _framework_decode(made, "builtins:type")


def test_framework_unpickler_has_no_size_budget() -> None:
    """On every supported version the framework's decoder loads what our scan refuses for its
    size: shared references nested 20 deep (2**20 leaves to anything that walks them, about 300
    bytes) and ``list(range(3_000_000))`` in about 60 bytes."""
    allowlist = pickle_guard.Allowlist.of(())
    for pickled, loaded in (
        (nested_shared_references(), lambda value: isinstance(value, list) and len(value) == 2),
        (huge_range(), lambda value: isinstance(value, list) and len(value) == 3_000_000),
    ):
        assert loaded(_framework_decode(pickled, "builtins:list")), (
            "the framework's decoder refused a bomb: re-read docs/security.md"
        )
        with pytest.raises(pickle_guard.UnsafePickle):
            pickle_guard.scan(pickled, allowlist, pickle_guard.ScanBudget.for_checkpoint(len(pickled), PickleLimits()))


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
