"""Hostile pickles, built the way an attacker with write access to the container would.

Each gadget touches ``marker`` if it ever executes, so a test can prove that no code
ran by checking that the file does not exist. ``test_each_gadget_is_live`` checks that
every one of them really does run under a plain ``pickle.loads``: a test that refuses
them therefore refuses a working exploit, not a harmless blob.
"""

from __future__ import annotations

import functools
import operator
import pathlib
import pickle
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_framework._harness._loop import JudgeVerdict
from openai.types import CompletionUsage


class Call:
    """Pickles as ``fn(*args)``: each nesting level is one REDUCE at load time."""

    def __init__(self, fn: Any, *args: Any) -> None:
        self.fn, self.args = fn, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (self.fn, self.args)

    def __call__(self, *args: Any) -> None:  # pickle insists the reduce target is callable
        return None


def _touch_expression(marker: Path) -> str:
    return f"__import__('pathlib').Path({str(marker)!r}).touch()"


def type_with_pydantic_base(base: type) -> Callable[[Path], bytes]:
    """``type("E", (base,), {"__annotations__": {"x": "<expr>"}})``: pydantic evaluates the string."""

    def build(marker: Path) -> bytes:
        namespace = {"__annotations__": {"x": _touch_expression(marker)}}
        return pickle.dumps(Call(type, "E", (base,), namespace), protocol=pickle.HIGHEST_PROTOCOL)

    return build


def attrgetter_chain(marker: Path) -> bytes:
    """``attrgetter("touch")(PosixPath(marker))()``."""
    bound = Call(Call(operator.attrgetter, "touch"), Call(pathlib.PosixPath, str(marker)))
    return pickle.dumps(Call(bound), protocol=pickle.HIGHEST_PROTOCOL)


def partial_chain(marker: Path) -> bytes:
    """``partial(methodcaller("touch"), PosixPath(marker))()``."""
    partial = Call(functools.partial, Call(operator.methodcaller, "touch"), Call(pathlib.PosixPath, str(marker)))
    return pickle.dumps(Call(partial), protocol=pickle.HIGHEST_PROTOCOL)


def _body(data: bytes) -> bytes:
    """A pickle without its PROTO header and STOP, to splice into another one."""
    assert data[:1] == pickle.PROTO and data[-1:] == pickle.STOP
    body = data[2:-1]
    if body[:1] == pickle.FRAME:
        body = body[9:]
    return body


def _unicode(text: str) -> bytes:
    raw = text.encode()
    return pickle.BINUNICODE + struct.pack("<I", len(raw)) + raw


def setstate_on_allowed_class(payload: bytes, cls: str = "agent_framework._types\nMessage\n") -> bytes:
    """An allowed object whose first BUILD plants ``__setstate__ = <payload>`` on the
    instance; the second BUILD then calls it."""
    return (
        pickle.PROTO
        + b"\x02"
        + pickle.GLOBAL
        + cls.encode()
        + pickle.EMPTY_TUPLE
        + pickle.NEWOBJ
        + pickle.NONE
        + pickle.EMPTY_DICT
        + _unicode("__setstate__")
        + _body(payload)
        + pickle.SETITEM
        + pickle.TUPLE2
        + pickle.BUILD
        + pickle.EMPTY_DICT
        + pickle.BUILD
        + pickle.STOP
    )


def setstate_with_type_gadget(base: type) -> Callable[[Path], bytes]:
    def build(marker: Path) -> bytes:
        return setstate_on_allowed_class(type_with_pydantic_base(base)(marker))

    return build


def nested_shared_references(depth: int = 20) -> bytes:
    """A few hundred bytes that expand to 2**depth leaves in anything that walks them."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value, value]
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def huge_range(count: int = 3_000_000) -> bytes:
    """``list(range(count))`` in about 60 bytes."""
    return pickle.dumps(Call(list, range(count)), protocol=pickle.HIGHEST_PROTOCOL)


def memo_index_bomb() -> bytes:
    """A memo slot at index 2**31: the C unpickler would size its memo array to match."""
    return pickle.PROTO + b"\x04" + pickle.NONE + pickle.LONG_BINPUT + struct.pack("<I", 2**31) + pickle.STOP


def pickle_of_output_event() -> bytes:
    """A genuine framework event, but not a request: forged into the pending requests."""
    from agent_framework import WorkflowEvent

    return pickle.dumps(WorkflowEvent("output", data="forged", executor_id="responder"), pickle.HIGHEST_PROTOCOL)


def unguarded_loads(data: bytes) -> Any:
    """A plain ``pickle.loads``: shows a gadget works when nothing stands in its way."""
    return pickle.loads(data)


# Every gadget takes the marker path; every bomb takes nothing.
GADGETS: dict[str, Callable[[Path], bytes]] = {
    "type-openai-base": type_with_pydantic_base(CompletionUsage),
    "type-agent-framework-base": type_with_pydantic_base(JudgeVerdict),
    "attrgetter-chain": attrgetter_chain,
    "partial-chain": partial_chain,
    "build-setstate": setstate_with_type_gadget(JudgeVerdict),
}
BOMBS: dict[str, Callable[[], bytes]] = {
    "nested-shared-references": nested_shared_references,
    "huge-range": huge_range,
}
