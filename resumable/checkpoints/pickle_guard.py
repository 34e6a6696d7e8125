"""Decide whether a checkpoint pickle may be unpickled, before any unpickling happens.

Agent Framework 1.23.0's restricted unpickler admits ``builtins:type`` (and every class
under ``agent_framework.*`` and ``openai.types.*``), so a pickle can build a pydantic
subclass whose string annotation pydantic then evaluates: code execution from a blob.
This module does not trust any unpickler to be the boundary. It walks the opcodes with
``pickletools.genops`` and simulates the pickle machine's stack symbolically, so that
it knows what every call, attribute write and container insert would act on:

- globals may name only classes on an explicit allowlist, never functions or modules;
- only allowlisted classes may be called (``REDUCE``, ``NEWOBJ``, ``OBJ``, ``INST``);
- ``BUILD`` acts once, on a fresh instance of an allowlisted class, with a plain state
  whose keys are strings and carry no dunder names beyond pydantic's own;
- appends and item sets go only to lists, dicts and sets the pickle itself created;
- extensions, persistent IDs and out-of-band buffers are refused;
- the work is bounded: bytes, opcodes, memo slots, and the size the value would have if
  every shared reference were expanded (the nested-reference bomb), against a budget
  shared by every pickle of one checkpoint.

Only then is the pickle loaded, by ``restricted_loads``, whose ``find_class`` enforces
the same allowlist again.

This module is the guard's public face: ``scan`` and ``restricted_loads``, and the names
callers need. The parts, each importing only the ones before it:

- ``pickle_allowlist``: what a pickle may name, and the check that each entry is a data class;
- ``pickle_machine``: the symbolic machine's stack, memo, value nodes, limits and budget;
- ``pickle_opcodes``: every admitted opcode and what it does to the machine.
"""

from __future__ import annotations

import io
import pickle  # the one place checkpoints are unpickled, after the scan below
import pickletools
from typing import Any

from .pickle_allowlist import REFERENCE_ONLY_TYPES, Allowlist, UnsafeAllowlist
from .pickle_machine import DEFAULT_LIMITS, MAX_PICKLE_BYTES, PickleLimits, ScanBudget, UnsafePickle
from .pickle_opcodes import HANDLERS, OpcodeMachine

__all__ = [
    "DEFAULT_LIMITS",
    "MAX_PICKLE_BYTES",
    "REFERENCE_ONLY_TYPES",
    "Allowlist",
    "PickleLimits",
    "ScanBudget",
    "UnsafeAllowlist",
    "UnsafePickle",
    "restricted_loads",
    "scan",
]


def scan(data: bytes, allowlist: Allowlist, budget: ScanBudget, limits: PickleLimits = DEFAULT_LIMITS) -> None:
    """Raise ``UnsafePickle`` unless ``data`` may be handed to ``restricted_loads``."""
    if len(data) > limits.max_pickle_bytes:
        raise UnsafePickle(f"pickle of {len(data)} bytes is over the {limits.max_pickle_bytes}-byte limit")
    if data[:1] != pickle.PROTO:
        raise UnsafePickle("not a binary (protocol 2+) pickle")
    machine = OpcodeMachine(allowlist, budget, limits, len(data))
    handlers, remaining = HANDLERS, budget.opcodes
    try:
        for opcode, arg, position in pickletools.genops(data):
            remaining -= 1
            if remaining < 0:
                raise UnsafePickle("too many opcodes")
            name = opcode.name
            if name == "STOP":
                if position != len(data) - 1:
                    raise UnsafePickle("data after STOP")
                machine.stop()
                return
            handler = handlers.get(name)
            if handler is None:
                raise UnsafePickle(f"opcode {name} is not allowed")
            handler(machine, arg)
            if len(machine.stack) > limits.max_stack:
                raise UnsafePickle("the pickle's stack is too deep")
    except UnsafePickle:
        raise
    except Exception as exc:  # genops: truncated or malformed opcodes and arguments
        raise UnsafePickle(f"malformed pickle ({type(exc).__name__})") from None
    finally:
        budget.opcodes = remaining
    raise UnsafePickle("no STOP")


class _AllowlistUnpickler(pickle.Unpickler):
    """The same allowlist again, at load time: defence in depth behind ``scan``."""

    def __init__(self, data: bytes, allowlist: Allowlist) -> None:
        super().__init__(io.BytesIO(data), fix_imports=False)
        self._allowlist = allowlist

    def find_class(self, module: str, name: str) -> Any:
        key = f"{module}:{name}"
        if "." in name or not self._allowlist.may_reference(key):
            raise pickle.UnpicklingError(f"global {key} is not on the allowlist")
        resolved = super().find_class(module, name)
        if not isinstance(resolved, type) or f"{resolved.__module__}:{resolved.__qualname__}" != key:
            raise pickle.UnpicklingError(f"global {key} is not the class it names")
        return resolved

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent IDs are not allowed")


def restricted_loads(data: bytes, allowlist: Allowlist) -> Any:
    """Unpickle ``data`` that ``scan`` accepted; refuses any non-allowlisted global again."""
    return _AllowlistUnpickler(data, allowlist).load()
