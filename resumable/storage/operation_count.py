"""How many storage requests one piece of work made (an HTTP request, say): a counter in a
context variable, incremented by every client's request hook.

A host starts a count around the work it wants counted (``counting``); whatever the work
awaits, and the tasks it starts, share the count, while other work in flight keeps its own.
Every request the SDK sends counts, its retries included: the count is what storage bills.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass
class OperationCount:
    total: int = 0


_current: ContextVar[OperationCount | None] = ContextVar("storage_operation_count", default=None)


@contextmanager
def counting() -> Iterator[OperationCount]:
    """Count the storage requests made inside this block (and by tasks it starts)."""
    count = OperationCount()
    token = _current.set(count)
    try:
        yield count
    finally:
        _current.reset(token)


def note(_request: Any = None) -> None:
    """A client's request hook: one more request for the count in progress, if any."""
    count = _current.get()
    if count is not None:
        count.total += 1
