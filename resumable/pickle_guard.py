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
"""

from __future__ import annotations

import importlib
import io
import pickle  # the one place checkpoints are unpickled, after the scan below
import pickletools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

# A single pickled value above this is refused (and, at save time, not written). Pickles
# hold one value each (a message, a request, an app object); JSON carries the structure
# around them. The largest seen here is a chat message; 512 KiB is ~130k tokens of text,
# past any model's output limit. A fixed ceiling rather than a setting: raising it widens
# what a tampered blob can make the decoder do, and the save-time check turns a workflow
# that outgrows it into a clear 500 (``checkpoint_not_saveable``) instead of a stuck thread.
MAX_PICKLE_BYTES = 512 * 1024

# Pydantic's ``__getstate__`` keys: the only dunder names a BUILD state may carry.
_PYDANTIC_STATE_KEYS = frozenset({"__dict__", "__pydantic_extra__", "__pydantic_fields_set__", "__pydantic_private__"})
# Classes that may appear as values (a request's ``response_type``) but are never called.
REFERENCE_ONLY_TYPES = frozenset(
    f"builtins:{name}" for name in ("str", "int", "float", "bool", "bytes", "list", "dict", "tuple", "set", "frozenset")
)
_STRINGS = frozenset(
    {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8"}
)
_ATOMS = frozenset(
    {
        "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
        "NONE", "NEWTRUE", "NEWFALSE", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8",
    }
)  # fmt: skip
_EMPTY = {"EMPTY_LIST": "list", "EMPTY_DICT": "dict", "EMPTY_SET": "set", "EMPTY_TUPLE": "tuple"}
_FROM_MARK = {"LIST": "list", "TUPLE": "tuple", "DICT": "dict", "FROZENSET": "frozenset"}
_TUPLE_N = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}
_MEMO_PUT = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_MEMO_GET = frozenset({"GET", "BINGET", "LONG_BINGET"})


class UnsafePickle(ValueError):
    """The pickle was refused; the message names the reason (for logs, never for callers)."""


@dataclass(frozen=True, slots=True)
class PickleLimits:
    """The work a checkpoint's pickles may cause: bytes, memo and stack per pickle;
    opcodes and expansion for all the pickles of one checkpoint together.

    Expansion is measured against the checkpoint's own size: legitimate data expands
    about 1:1 (pickle shares only objects that were shared), so ``expansion_factor``
    leaves wide headroom while a few hundred bytes can no longer stand for millions of
    nodes. The floors keep small checkpoints from being judged by ratio alone.
    """

    max_pickle_bytes: int = MAX_PICKLE_BYTES
    max_opcodes: int = 500_000
    max_memo: int = 100_000
    # The pickler batches containers by 1,000 items, so real stacks stay shallow; a cap
    # keeps a pickle of nothing but pushes from costing memory.
    max_stack: int = 10_000
    expansion_factor: int = 8
    expanded_nodes_floor: int = 50_000
    expanded_bytes_floor: int = 1024 * 1024


@dataclass(slots=True)
class ScanBudget:
    """What is left for the remaining pickles of one checkpoint."""

    opcodes: int
    nodes: int
    bytes: int

    @classmethod
    def for_checkpoint(cls, size_bytes: int, limits: PickleLimits) -> ScanBudget:
        return cls(
            opcodes=limits.max_opcodes,
            nodes=limits.expanded_nodes_floor + limits.expansion_factor * size_bytes,
            bytes=limits.expanded_bytes_floor + limits.expansion_factor * size_bytes,
        )


class UnsafeAllowlist(ValueError):
    """An allowlist entry that is not a plain data class: a configuration error."""


# Modules whose classes are tools rather than data (``functools.partial``,
# ``operator.attrgetter``, ``types.FunctionType``, ...): calling one can reach anything.
# Builtin containers and scalars need no entry: the pickle opcodes build them.
_DENIED_MODULE_ROOTS = frozenset(
    {
        "builtins", "functools", "operator", "importlib", "os", "posix", "nt", "subprocess", "sys",
        "types", "codecs", "pickle", "_pickle", "copyreg", "copy", "io", "_io", "shutil", "socket",
        "ctypes", "runpy", "code", "pty", "inspect", "typing", "asyncio", "threading", "multiprocessing",
        "pathlib", "tempfile", "marshal", "gc", "weakref", "pydoc", "webbrowser", "pydantic",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Allowlist:
    """Classes a checkpoint pickle may name (``module:qualname``).

    Build it with ``Allowlist.of`` so that every entry is checked to be a data class.
    """

    classes: frozenset[str]

    @classmethod
    def of(cls, keys: Iterable[str]) -> Allowlist:
        """Validate each ``module:qualname``; ``UnsafeAllowlist`` names the first bad one."""
        return _validated(frozenset(keys))

    def may_call(self, key: str) -> bool:
        return key in self.classes

    def may_reference(self, key: str) -> bool:
        return key in self.classes or key in REFERENCE_ONLY_TYPES


class _Mark:
    __slots__ = ()


_MARK = _Mark()


class _Node:
    """What a stack slot would hold: its kind, what it refers to, and its expanded size.

    ``nodes`` and ``size`` count the value as a walker would meet it, every shared
    reference once per path. They are final once the node is ``used`` (inside another
    value): the machine refuses to change a value after that, which also rules out
    cycles. Real pickles fill each container before its parent takes it.
    """

    __slots__ = ("built", "count", "dict_value", "dunders", "items", "key", "kind", "nodes", "size", "text", "used")

    def __init__(self, kind: str, key: str = "", text: str | None = None, size: int = 0) -> None:
        self.kind = kind  # str, atom, list, dict, set, frozenset, tuple, class, object
        self.key = key  # the class, for class and object nodes
        self.text = text  # the value, for str nodes
        self.nodes = 1
        self.size = size
        self.used = False
        self.built = False
        # Only what a BUILD state check needs is kept, so that adopted values can be freed:
        # a short tuple's items; a dict's dunder keys (or "" for a non-string key) and the
        # value under "__dict__".
        self.count = 0
        self.items: list[_Node] | None = None
        self.dunders: set[str] | None = None
        self.dict_value: _Node | None = None


_SCALAR = _Node("atom", size=8)
DEFAULT_LIMITS = PickleLimits()


def scan(data: bytes, allowlist: Allowlist, budget: ScanBudget, limits: PickleLimits = DEFAULT_LIMITS) -> None:
    """Raise ``UnsafePickle`` unless ``data`` may be handed to ``restricted_loads``."""
    if len(data) > limits.max_pickle_bytes:
        raise UnsafePickle(f"pickle of {len(data)} bytes is over the {limits.max_pickle_bytes}-byte limit")
    if data[:1] != pickle.PROTO:
        raise UnsafePickle("not a binary (protocol 2+) pickle")
    machine = _Machine(allowlist, budget, limits, len(data))
    handlers, remaining = _HANDLERS, budget.opcodes
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


class _Machine:
    """A symbolic pickle machine: tracks shapes, provenance and sizes, builds no values."""

    def __init__(self, allowlist: Allowlist, budget: ScanBudget, limits: PickleLimits, length: int) -> None:
        self.allowlist = allowlist
        self.budget = budget
        self.limits = limits
        self.length = length
        self.stack: list[_Node | _Mark] = []
        self.memo: dict[int, _Node] = {}

    # -- stack and size helpers --------------------------------------------------------

    def pop(self) -> _Node:
        if not self.stack or self.stack[-1] is _MARK:
            raise UnsafePickle("stack underflow")
        return self.stack.pop()  # type: ignore[return-value]

    def top(self) -> _Node:
        if not self.stack or self.stack[-1] is _MARK:
            raise UnsafePickle("stack underflow")
        return self.stack[-1]  # type: ignore[return-value]

    def pop_to_mark(self) -> list[_Node]:
        stack = self.stack
        for index in range(len(stack) - 1, -1, -1):
            if stack[index] is _MARK:
                items = stack[index + 1 :]
                del stack[index:]
                return items  # type: ignore[return-value]
        raise UnsafePickle("no MARK")

    def adopt(self, parent: _Node, items: list[_Node]) -> _Node:
        """Put ``items`` inside ``parent``; from now on they may not change."""
        nodes, size = parent.nodes, parent.size
        for item in items:
            if item is parent:
                raise UnsafePickle("the value refers to itself")
            item.used = True
            nodes += item.nodes
            size += item.size
        if nodes > self.budget.nodes or size > self.budget.bytes:
            raise UnsafePickle("the value expands past the checkpoint's budget (shared-reference bomb)")
        parent.nodes, parent.size = nodes, size
        if parent.kind == "tuple":
            parent.items = items if parent.count == 0 and len(items) <= 3 else None
        elif parent.kind == "dict":
            _note_keys(parent, items)
        parent.count += len(items)
        return parent

    def stop(self) -> None:
        if len(self.stack) != 1:
            raise UnsafePickle("STOP with other than one value on the stack")
        result = self.pop()
        self.budget.nodes -= result.nodes
        self.budget.bytes -= result.size
        if self.budget.nodes < 0 or self.budget.bytes < 0:
            raise UnsafePickle("the value expands past the checkpoint's budget (shared-reference bomb)")

    # -- the opcodes -----------------------------------------------------------------

    def string(self, arg: str | bytes) -> None:
        self.stack.append(_Node("str", text=arg if isinstance(arg, str) else None, size=len(arg)))

    def atom(self, arg: Any) -> None:
        if isinstance(arg, bytes | bytearray):
            self.stack.append(_Node("atom", size=len(arg)))
        else:  # None, a bool or a number: one shared node, never a container or a target
            self.stack.append(_SCALAR)

    def empty(self, arg: None, kind: str) -> None:
        self.stack.append(_Node(kind))

    def from_mark(self, arg: None, kind: str) -> None:
        items = self.pop_to_mark()
        if kind == "dict" and len(items) % 2:
            raise UnsafePickle("DICT with an odd number of items")
        self.stack.append(self.adopt(_Node(kind), items))

    def tuple_n(self, count: int) -> None:
        items = [self.pop() for _ in range(count)][::-1]
        self.stack.append(self.adopt(_Node("tuple"), items))

    def put(self, index: int) -> None:
        if not 0 <= index < self.limits.max_memo:
            raise UnsafePickle(f"memo index {index} is out of range")
        self.memo[index] = self.top()

    def memoize(self, arg: None) -> None:
        index = len(self.memo)
        if index >= self.limits.max_memo:
            raise UnsafePickle(f"memo index {index} is out of range")
        top = self.stack[-1] if self.stack else _MARK
        if top is _MARK:
            raise UnsafePickle("stack underflow")
        self.memo[index] = top  # type: ignore[assignment]

    def get(self, index: int) -> None:
        node = self.memo.get(index)
        if node is None:
            raise UnsafePickle("memo GET of an unset slot")
        self.stack.append(node)

    def proto(self, arg: int) -> None:
        if not 2 <= arg <= pickle.HIGHEST_PROTOCOL:
            raise UnsafePickle(f"protocol {arg}")

    def frame(self, arg: int) -> None:
        if arg > self.length:
            raise UnsafePickle("frame longer than the pickle")

    def mark(self, arg: None) -> None:
        self.stack.append(_MARK)

    def pop_one(self, arg: None) -> None:
        if self.stack and self.stack[-1] is _MARK:
            self.stack.pop()
        else:
            self.pop()

    def pop_mark(self, arg: None) -> None:
        self.pop_to_mark()

    def dup(self, arg: None) -> None:
        self.stack.append(self.top())

    def _mutable(self, target: _Node, kind: str) -> _Node:
        if target.kind != kind:
            raise UnsafePickle(f"adds items to {target.kind!r}, which is not a {kind} the pickle created")
        if target.used:
            raise UnsafePickle(f"changes a {kind} after it was placed in another value")
        return target

    def append(self, arg: None) -> None:
        item = self.pop()
        self.adopt(self._mutable(self.top(), "list"), [item])

    def appends(self, arg: None) -> None:
        items = self.pop_to_mark()
        self.adopt(self._mutable(self.top(), "list"), items)

    def setitem(self, arg: None) -> None:
        value, key = self.pop(), self.pop()
        self.adopt(self._mutable(self.top(), "dict"), [key, value])

    def setitems(self, arg: None) -> None:
        items = self.pop_to_mark()
        if len(items) % 2:
            raise UnsafePickle("SETITEMS with an odd number of items")
        self.adopt(self._mutable(self.top(), "dict"), items)

    def additems(self, arg: None) -> None:
        items = self.pop_to_mark()
        self.adopt(self._mutable(self.top(), "set"), items)

    # -- globals, calls and BUILD ----------------------------------------------------

    def _class(self, module: str, name: str) -> _Node:
        key = f"{module}:{name}"
        if "." in name or not self.allowlist.may_reference(key):
            raise UnsafePickle(f"global {key} is not on the allowlist")
        return _Node("class", key=key)

    def global_(self, arg: str) -> None:
        module, _, name = arg.partition(" ")
        self.stack.append(self._class(module, name))

    def stack_global(self, arg: None) -> None:
        name, module = self.pop(), self.pop()
        if name.text is None or module.text is None:
            raise UnsafePickle("STACK_GLOBAL of something that is not a string")
        self.stack.append(self._class(module.text, name.text))

    def _instance(self, cls: _Node, args: list[_Node]) -> _Node:
        if cls.kind != "class" or not self.allowlist.may_call(cls.key):
            raise UnsafePickle(f"calls {cls.key or cls.kind}, which is not an allowed class")
        return self.adopt(_Node("object", key=cls.key), args)

    def reduce(self, arg: None) -> None:
        args, cls = self.pop(), self.pop()
        if args.kind != "tuple":
            raise UnsafePickle("REDUCE arguments are not a tuple")
        self.stack.append(self._instance(cls, [args]))

    def newobj(self, arg: None) -> None:
        args, cls = self.pop(), self.pop()
        if args.kind != "tuple":
            raise UnsafePickle("NEWOBJ arguments are not a tuple")
        self.stack.append(self._instance(cls, [args]))

    def newobj_ex(self, arg: None) -> None:
        kwargs, args, cls = self.pop(), self.pop(), self.pop()
        if args.kind != "tuple" or kwargs.kind != "dict":
            raise UnsafePickle("NEWOBJ_EX arguments are not a tuple and a dict")
        self.stack.append(self._instance(cls, [args, kwargs]))

    def obj(self, arg: None) -> None:
        items = self.pop_to_mark()
        if not items:
            raise UnsafePickle("OBJ without a class")
        self.stack.append(self._instance(items[0], items[1:]))

    def inst(self, arg: str) -> None:
        module, _, name = arg.partition(" ")
        items = self.pop_to_mark()
        self.stack.append(self._instance(self._class(module, name), items))

    def build(self, arg: None) -> None:
        state = self.pop()
        target = self.top()
        if target.kind != "object":
            raise UnsafePickle(f"BUILD on a {target.kind}, not an instance of an allowed class")
        if target.built:
            raise UnsafePickle(f"a second BUILD on one {target.key} instance")
        if target.used:
            raise UnsafePickle(f"BUILD on a {target.key} after it was placed in another value")
        _check_state(state)
        target.built = True
        self.adopt(target, [state])


def _handlers() -> dict[str, Callable[[_Machine, Any], None]]:
    """Opcode name -> what the machine does with it. Anything missing is refused."""
    table: dict[str, Callable[[_Machine, Any], None]] = {
        **dict.fromkeys(_STRINGS, _Machine.string),
        **dict.fromkeys(_ATOMS, _Machine.atom),
        **{name: partial(_Machine.empty, kind=kind) for name, kind in _EMPTY.items()},
        **{name: partial(_Machine.from_mark, kind=kind) for name, kind in _FROM_MARK.items()},
        **dict.fromkeys(_MEMO_PUT, _Machine.put),
        **dict.fromkeys(_MEMO_GET, _Machine.get),
        "MEMOIZE": _Machine.memoize,
        "PROTO": _Machine.proto,
        "FRAME": _Machine.frame,
        "MARK": _Machine.mark,
        "POP": _Machine.pop_one,
        "POP_MARK": _Machine.pop_mark,
        "DUP": _Machine.dup,
        "APPEND": _Machine.append,
        "APPENDS": _Machine.appends,
        "SETITEM": _Machine.setitem,
        "SETITEMS": _Machine.setitems,
        "ADDITEMS": _Machine.additems,
        "GLOBAL": _Machine.global_,
        "STACK_GLOBAL": _Machine.stack_global,
        "REDUCE": _Machine.reduce,
        "NEWOBJ": _Machine.newobj,
        "NEWOBJ_EX": _Machine.newobj_ex,
        "OBJ": _Machine.obj,
        "INST": _Machine.inst,
        "BUILD": _Machine.build,
    }
    for name, count in _TUPLE_N.items():
        table[name] = lambda machine, arg, count=count: machine.tuple_n(count)
    return table


def _check_state(state: _Node) -> None:
    """A BUILD state: a dict, or ``(dict | None, dict)`` with slot values."""
    if state.kind == "dict":
        _check_state_dict(state)
    elif state.kind == "tuple" and state.count == 2 and state.items is not None:
        first, slots = state.items
        if first.kind == "dict":
            _check_state_dict(first)
        elif first.kind != "atom":  # None
            raise UnsafePickle("BUILD state is not a dict")
        if slots.kind != "dict":
            raise UnsafePickle("BUILD slot state is not a dict")
        _check_state_dict(slots)
    else:
        raise UnsafePickle(f"BUILD state is a {state.kind}")


def _check_state_dict(state: _Node, *, allow_pydantic: bool = True) -> None:
    for key in state.dunders or ():
        if key == "":
            raise UnsafePickle("BUILD state key is not a string")
        if not (allow_pydantic and key in _PYDANTIC_STATE_KEYS):
            raise UnsafePickle(f"BUILD state sets {key}")
    if state.dunders and "__dict__" in state.dunders:
        inner = state.dict_value
        if inner is None or inner.kind != "dict":
            raise UnsafePickle("BUILD state __dict__ is not a dict")
        _check_state_dict(inner, allow_pydantic=False)


def _note_keys(target: _Node, pairs: list[_Node]) -> None:
    """Record a dict's keys that matter to a BUILD state check: dunders and non-strings."""
    for key, value in zip(pairs[0::2], pairs[1::2], strict=True):
        text = key.text
        if text is not None and not (text.startswith("__") and text.endswith("__")):
            continue
        if target.dunders is None:
            target.dunders = set()
        if len(target.dunders) >= len(_PYDANTIC_STATE_KEYS) + 1:
            target.dunders.add("<many dunder keys>")  # refused if ever used as a state
            continue
        target.dunders.add(text or "")
        if text == "__dict__":
            target.dict_value = value


_HANDLERS = _handlers()


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


@lru_cache(maxsize=32)
def _validated(keys: frozenset[str]) -> Allowlist:
    for key in sorted(keys):
        module, _, qualname = key.partition(":")
        if not module or not qualname or "." in qualname:
            raise UnsafeAllowlist(f"{key!r} is not a 'module:ClassName' key")
        if module.split(".")[0] in _DENIED_MODULE_ROOTS:
            raise UnsafeAllowlist(f"{key!r}: classes from {module} are never allowed in checkpoints")
        try:
            resolved = getattr(importlib.import_module(module), qualname)
        except (ImportError, AttributeError) as exc:
            raise UnsafeAllowlist(f"{key!r} cannot be imported ({type(exc).__name__})") from None
        if not isinstance(resolved, type) or issubclass(resolved, type):
            raise UnsafeAllowlist(f"{key!r} is not a data class (functions and metaclasses are never allowed)")
        if f"{resolved.__module__}:{resolved.__qualname__}" != key:
            raise UnsafeAllowlist(f"{key!r} is an alias; use {resolved.__module__}:{resolved.__qualname__}")
    return Allowlist(keys)
