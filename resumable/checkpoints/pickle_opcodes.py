"""The opcode table: every opcode a checkpoint pickle may use, and what each does to the machine.

An opcode that is not in ``HANDLERS`` is refused, so what is missing here matters as much
as what is present: extensions (``EXT*``), persistent IDs (``PERSID``, ``BINPERSID``) and
out-of-band buffers (``NEXT_BUFFER``, ``READONLY_BUFFER``) have no entry. Each handler
checks what the opcode would act on: globals must be allowlisted classes, only those may
be called, items go only into containers the pickle built itself, and ``BUILD`` acts once
on a fresh instance.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from functools import partial
from typing import Any

from .pickle_machine import MARK, Machine, Node, TypeNotAllowed, UnsafePickle, check_state

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

_SCALAR = Node("atom", size=8)


class OpcodeMachine(Machine):
    """The machine with its opcodes: tracks shapes, provenance and sizes, builds no values."""

    def string(self, arg: str | bytes) -> None:
        self.stack.append(Node("str", text=arg if isinstance(arg, str) else None, size=len(arg)))

    def atom(self, arg: Any) -> None:
        if isinstance(arg, bytes | bytearray):
            self.stack.append(Node("atom", size=len(arg)))
        else:  # None, a bool or a number: one shared node, never a container or a target
            self.stack.append(_SCALAR)

    def empty(self, arg: None, kind: str) -> None:
        self.stack.append(Node(kind))

    def from_mark(self, arg: None, kind: str) -> None:
        items = self.pop_to_mark()
        if kind == "dict" and len(items) % 2:
            raise UnsafePickle("DICT with an odd number of items")
        self.stack.append(self.adopt(Node(kind), items))

    def tuple_n(self, count: int) -> None:
        items = [self.pop() for _ in range(count)][::-1]
        self.stack.append(self.adopt(Node("tuple"), items))

    def put(self, index: int) -> None:
        if not 0 <= index < self.limits.max_memo:
            raise UnsafePickle(f"memo index {index} is out of range")
        self.memo[index] = self.top()

    def memoize(self, arg: None) -> None:
        index = len(self.memo)
        if index >= self.limits.max_memo:
            raise UnsafePickle(f"memo index {index} is out of range")
        top = self.stack[-1] if self.stack else MARK
        if top is MARK:
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
        self.stack.append(MARK)

    def pop_one(self, arg: None) -> None:
        if self.stack and self.stack[-1] is MARK:
            self.stack.pop()
        else:
            self.pop()

    def pop_mark(self, arg: None) -> None:
        self.pop_to_mark()

    def dup(self, arg: None) -> None:
        self.stack.append(self.top())

    def _mutable(self, target: Node, kind: str) -> Node:
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

    def _class(self, module: str, name: str) -> Node:
        key = f"{module}:{name}"
        if "." in name or not self.allowlist.may_reference(key):
            raise TypeNotAllowed(f"global {key} is not on the allowlist", key)
        return Node("class", key=key)

    def global_(self, arg: str) -> None:
        module, _, name = arg.partition(" ")
        self.stack.append(self._class(module, name))

    def stack_global(self, arg: None) -> None:
        name, module = self.pop(), self.pop()
        if name.text is None or module.text is None:
            raise UnsafePickle("STACK_GLOBAL of something that is not a string")
        self.stack.append(self._class(module.text, name.text))

    def _instance(self, cls: Node, args: list[Node]) -> Node:
        if cls.kind == "class" and not self.allowlist.may_call(cls.key):
            raise TypeNotAllowed(f"calls {cls.key}, which is not an allowed class", cls.key)
        if cls.kind != "class":
            raise UnsafePickle(f"calls {cls.kind}, which is not an allowed class")
        return self.adopt(Node("object", key=cls.key), args)

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
        check_state(state)
        target.built = True
        self.adopt(target, [state])


def _handlers() -> dict[str, Callable[[OpcodeMachine, Any], None]]:
    """Opcode name -> what the machine does with it. Anything missing is refused."""
    table: dict[str, Callable[[OpcodeMachine, Any], None]] = {
        **dict.fromkeys(_STRINGS, OpcodeMachine.string),
        **dict.fromkeys(_ATOMS, OpcodeMachine.atom),
        **{name: partial(OpcodeMachine.empty, kind=kind) for name, kind in _EMPTY.items()},
        **{name: partial(OpcodeMachine.from_mark, kind=kind) for name, kind in _FROM_MARK.items()},
        **dict.fromkeys(_MEMO_PUT, OpcodeMachine.put),
        **dict.fromkeys(_MEMO_GET, OpcodeMachine.get),
        "MEMOIZE": OpcodeMachine.memoize,
        "PROTO": OpcodeMachine.proto,
        "FRAME": OpcodeMachine.frame,
        "MARK": OpcodeMachine.mark,
        "POP": OpcodeMachine.pop_one,
        "POP_MARK": OpcodeMachine.pop_mark,
        "DUP": OpcodeMachine.dup,
        "APPEND": OpcodeMachine.append,
        "APPENDS": OpcodeMachine.appends,
        "SETITEM": OpcodeMachine.setitem,
        "SETITEMS": OpcodeMachine.setitems,
        "ADDITEMS": OpcodeMachine.additems,
        "GLOBAL": OpcodeMachine.global_,
        "STACK_GLOBAL": OpcodeMachine.stack_global,
        "REDUCE": OpcodeMachine.reduce,
        "NEWOBJ": OpcodeMachine.newobj,
        "NEWOBJ_EX": OpcodeMachine.newobj_ex,
        "OBJ": OpcodeMachine.obj,
        "INST": OpcodeMachine.inst,
        "BUILD": OpcodeMachine.build,
    }
    for name, count in _TUPLE_N.items():
        table[name] = lambda machine, arg, count=count: machine.tuple_n(count)
    return table


HANDLERS = _handlers()
