"""The symbolic pickle machine: its stack, memo and value nodes, sized against a budget.

The guard never runs a pickle to learn what it does. ``Machine`` stands in for the pickle
machine: each stack slot holds a ``Node`` that records the value's kind, the class it is
an instance of, and how big it would be with every shared reference expanded. What each
opcode does to it is in ``pickle_opcodes``; this module holds the state, the rule that a
value may not change once it is inside another, the limits and budget the work is
measured against, and the check on what a ``BUILD`` may set.
"""

from __future__ import annotations

from dataclasses import dataclass

from .pickle_allowlist import Allowlist

# A single pickled value above this is refused (and, at save time, not written). Pickles
# hold one value each (a message, a request, an app object); JSON carries the structure
# around them. The largest seen here is a chat message; 512 KiB is ~130k tokens of text,
# past any model's output limit. A fixed ceiling rather than a setting: raising it widens
# what a tampered blob can make the decoder do, and the save-time check turns a workflow
# that outgrows it into a clear 500 (``checkpoint_not_saveable``) instead of a stuck thread.
MAX_PICKLE_BYTES = 512 * 1024

# Pydantic's ``__getstate__`` keys: the only dunder names a BUILD state may carry.
_PYDANTIC_STATE_KEYS = frozenset({"__dict__", "__pydantic_extra__", "__pydantic_fields_set__", "__pydantic_private__"})


class UnsafePickle(ValueError):
    """The pickle was refused; the message names the reason (for logs, never for callers)."""


class TypeNotAllowed(UnsafePickle):
    """The pickle names a class that is not on the allowlist: ``type_key`` (``module:qualname``)."""

    def __init__(self, message: str, type_key: str) -> None:
        super().__init__(message)
        self.type_key = type_key


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


DEFAULT_LIMITS = PickleLimits()


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


class _Mark:
    __slots__ = ()


MARK = _Mark()


class Node:
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
        self.items: list[Node] | None = None
        self.dunders: set[str] | None = None
        self.dict_value: Node | None = None


class Machine:
    """A symbolic pickle machine's state; ``pickle_opcodes.OpcodeMachine`` adds the opcodes."""

    def __init__(self, allowlist: Allowlist, budget: ScanBudget, limits: PickleLimits, length: int) -> None:
        self.allowlist = allowlist
        self.budget = budget
        self.limits = limits
        self.length = length
        self.stack: list[Node | _Mark] = []
        self.memo: dict[int, Node] = {}

    # -- stack and size helpers --------------------------------------------------------

    def pop(self) -> Node:
        if not self.stack or self.stack[-1] is MARK:
            raise UnsafePickle("stack underflow")
        return self.stack.pop()  # type: ignore[return-value]

    def top(self) -> Node:
        if not self.stack or self.stack[-1] is MARK:
            raise UnsafePickle("stack underflow")
        return self.stack[-1]  # type: ignore[return-value]

    def pop_to_mark(self) -> list[Node]:
        stack = self.stack
        for index in range(len(stack) - 1, -1, -1):
            if stack[index] is MARK:
                items = stack[index + 1 :]
                del stack[index:]
                return items  # type: ignore[return-value]
        raise UnsafePickle("no MARK")

    def adopt(self, parent: Node, items: list[Node]) -> Node:
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


def check_state(state: Node) -> None:
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


def _check_state_dict(state: Node, *, allow_pydantic: bool = True) -> None:
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


def _note_keys(target: Node, pairs: list[Node]) -> None:
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
