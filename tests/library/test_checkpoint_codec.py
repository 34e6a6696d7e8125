"""Decoding bytes from storage: the pickle guard, malformed data, size caps; and the save-time check."""

from __future__ import annotations

import base64
import json
import pickle

import pytest
from agent_framework import InMemoryCheckpointStorage, Message, WorkflowCheckpoint

from resumable.base.errors import CheckpointNotSaveable, CheckpointTooLarge, CheckpointUnreadable
from resumable.checkpoints import codec as checkpoint_codec
from resumable.checkpoints import pickle_guard
from resumable.checkpoints.codec import CheckpointCodec
from resumable.checkpoints.pickle_guard import PickleLimits, ScanBudget, UnsafeAllowlist, UnsafePickle
from tests import pickle_gadgets as gadgets
from tests import recording_workflow
from tests.pickle_gadgets import BOMBS, GADGETS, Call

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


# -- the pickle guard: every gadget is refused by the scan, before any unpickling ----------

MESSAGE = b"cagent_framework._types\nMessage\n"  # GLOBAL of an allowlisted class
CODEC_ALLOWLIST = CheckpointCodec().allowlist
P2 = pickle.PROTO + b"\x02"


def scan_alone(data: bytes, limits: PickleLimits = pickle_guard.DEFAULT_LIMITS) -> None:
    pickle_guard.scan(data, CODEC_ALLOWLIST, ScanBudget.for_checkpoint(len(data), limits), limits)


def in_a_checkpoint(data: bytes, pickled: bytes, type_key: str = "builtins:dict") -> bytes:
    return _with_raw_pickle(data, pickled, type_key)


def _with_raw_pickle(data: bytes, pickled: bytes, type_key: str) -> bytes:
    raw = json.loads(data)
    raw["state"]["injected"] = {"__pickled__": base64.b64encode(pickled).decode(), "__type__": type_key}
    return json.dumps(raw).encode()


@pytest.mark.parametrize("name", [*GADGETS, *BOMBS, "memo-index"])
async def test_every_gadget_and_bomb_is_refused_by_the_scan(name: str, tmp_path, monkeypatch) -> None:
    marker = tmp_path / "marker"
    if name in GADGETS:
        pickled = GADGETS[name](marker)
    elif name in BOMBS:
        pickled = BOMBS[name]()
    else:  # would make the C unpickler size its memo for 2**31 entries: never run it unguarded
        pickled = gadgets.memo_index_bomb()
    loads_called: list[bytes] = []
    monkeypatch.setattr(checkpoint_codec, "restricted_loads", lambda *a: loads_called.append(a[0]))
    with pytest.raises(UnsafePickle):
        scan_alone(pickled)
    data = in_a_checkpoint(CheckpointCodec().encode(await a_checkpoint()), pickled)
    with pytest.raises(CheckpointUnreadable):
        CheckpointCodec().decode(data)
    assert loads_called == [] and not marker.exists()


def test_build_may_not_plant_setstate_even_with_only_allowed_classes() -> None:
    # The payload names nothing but an allowlisted class; the dunder key is what is refused.
    planted = gadgets.setstate_on_allowed_class(pickle.dumps(Message, protocol=2))
    with pytest.raises(UnsafePickle, match="__setstate__"):
        scan_alone(planted)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (MESSAGE + b")\x81}b}b", "second BUILD"),
        (MESSAGE + b"N}X\x04\x00\x00\x00roleX\x01\x00\x00\x00xs\x86b", "BUILD on a class"),
        (b"]}b", "BUILD on a list"),
        (MESSAGE + b")\x81}X\x08\x00\x00\x00__dict__}X\t\x00\x00\x00__class__Nssb", "sets __class__"),
        (MESSAGE + b")\x81}K\x01Nsb", "key is not a string"),
        (MESSAGE + b")\x81X\x01\x00\x00\x00xb", "state is a str"),
    ],
    ids=["second-build", "build-on-a-class", "build-on-a-list", "dunder-in-dict", "non-string-key", "string-state"],
)
def test_build_acts_once_on_a_fresh_allowed_instance_with_plain_state(body: bytes, reason: str) -> None:
    with pytest.raises(UnsafePickle, match=reason):
        scan_alone(P2 + body + b".")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        # SETITEM/APPEND on an instance would call its __setitem__/append.
        (MESSAGE + b")\x81X\x01\x00\x00\x00kNs.", "adds items to 'object'"),
        (MESSAGE + b")\x81Na.", "adds items to 'object'"),
        (MESSAGE + b"(NNu.", "adds items to 'class'"),
        (b"\x82\x01.", "EXT1"),  # the copyreg extension registry
        (b"P1\n.", "PERSID"),
        (b"NQ.", "BINPERSID"),
        (b"cbuiltins\nstr\n(X\x01\x00\x00\x00xtR.", "calls builtins:str"),  # reference-only builtin
        (b"cbuiltins\nlist\n)R.", "calls builtins:list"),  # how the 61-byte bomb starts
        (b"(\x94.", "underflow"),  # MEMOIZE of a MARK
        (b"h\x05.", "unset slot"),
        (b"N.trailing", "after STOP"),
        (b"\x80", "malformed"),
    ],
    ids=[
        "setitem-on-instance",
        "append-to-instance",
        "setitems-on-class",
        "ext1",
        "persid",
        "binpersid",
        "call-str",
        "call-list",
        "memoize-a-mark",
        "get-unset",
        "trailing",
        "truncated",
    ],
)
def test_refused_opcode_patterns(body: bytes, reason: str) -> None:
    with pytest.raises(UnsafePickle, match=reason):
        scan_alone(P2 + body)


def test_a_value_that_refers_to_itself_is_refused() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(UnsafePickle, match="itself"):
        scan_alone(pickle.dumps(loop))


def test_work_limits_apply() -> None:
    with pytest.raises(UnsafePickle, match="opcodes"):
        scan_alone(pickle.dumps(list(range(100))), PickleLimits(max_opcodes=50))
    with pytest.raises(UnsafePickle, match="over the"):
        scan_alone(pickle.dumps("x" * 100), PickleLimits(max_pickle_bytes=64))
    # One checkpoint's pickles share a budget: each alone fits, together they do not.
    shared = pickle.dumps([["a" * 1000] * 50])
    budget = ScanBudget(opcodes=10_000, nodes=10_000, bytes=120_000)
    pickle_guard.scan(shared, CODEC_ALLOWLIST, budget)
    pickle_guard.scan(shared, CODEC_ALLOWLIST, budget)
    with pytest.raises(UnsafePickle, match="budget"):
        pickle_guard.scan(shared, CODEC_ALLOWLIST, budget)


async def test_an_oversized_pickle_is_refused_before_base64_decoding() -> None:
    big = pickle.dumps("x" * (pickle_guard.MAX_PICKLE_BYTES + 1))
    data = in_a_checkpoint(CheckpointCodec().encode(await a_checkpoint()), big, "builtins:str")
    with pytest.raises(CheckpointUnreadable):
        CheckpointCodec().decode(data)


def test_the_unpickler_enforces_the_allowlist_without_the_scan() -> None:
    """Defence in depth: ``find_class`` refuses what the scan would have refused."""
    with pytest.raises(pickle.UnpicklingError):
        pickle_guard.restricted_loads(pickle.dumps(Call(type, "E", (), {})), CODEC_ALLOWLIST)
    with pytest.raises(pickle.UnpicklingError):  # a re-export: not the class's own name
        pickle_guard.restricted_loads(P2 + b"cagent_framework\nMessage\n.", CODEC_ALLOWLIST)


@pytest.mark.parametrize(
    "key",
    [
        "builtins:type",
        "builtins:getattr",
        "functools:partial",
        "operator:attrgetter",
        "os:system",
        "subprocess:Popen",
        "types:FunctionType",
        "codecs:StreamReader",
        "json:dumps",
        "abc:ABCMeta",
        "agent_framework:Message",
        "no_such_module:Thing",
        "notakey",
    ],
)
def test_only_data_classes_can_be_allowlisted(key: str) -> None:
    with pytest.raises(UnsafeAllowlist):
        CheckpointCodec(allowed_types=[key])


async def test_a_forged_pending_request_is_unreadable() -> None:
    data = CheckpointCodec().encode(await a_checkpoint())
    raw = json.loads(data)
    raw["pending_request_info_events"] = {"r1": "not an event"}
    with pytest.raises(CheckpointUnreadable):
        CheckpointCodec().decode(json.dumps(raw).encode())


async def test_encode_refuses_state_it_could_not_read_back() -> None:
    checkpoint = await a_checkpoint()
    checkpoint.state["app"] = AppState(3)
    with pytest.raises(CheckpointNotSaveable):
        CheckpointCodec().encode(checkpoint)
    key = f"{AppState.__module__}:{AppState.__qualname__}"
    assert CheckpointCodec(allowed_types=[key]).encode(checkpoint)
    checkpoint.state["app"] = lambda: None
    with pytest.raises(CheckpointNotSaveable):
        CheckpointCodec(allowed_types=[key]).encode(checkpoint)
