"""More than one app instance in one test process: each with its own per-process state.

What a worker process keeps to itself is its checkpoint and head caches
(``resumable.checkpoints.cache``) and its per-thread turn locks
(``resumable.core.thread_turns.process_locks``). ``separate_instances`` replaces each of
them with a proxy that hands every use to the current instance's own copy; the current
instance is a context variable, so it follows each asyncio task (and the tasks it starts).
A request made inside ``Instance.active()`` therefore behaves as one served by another
worker on the same storage: it sees no head this process cached and no lock this
process's turns hold, even while both run at once. The storage clients and the registered
functions are shared, as two workers share the same code.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import pytest

from resumable.checkpoints import cache as checkpoint_cache
from resumable.core import thread_turns


@dataclass
class Instance:
    """One worker's process state."""

    checkpoints: checkpoint_cache.CheckpointCache = field(default_factory=checkpoint_cache.CheckpointCache)
    heads: checkpoint_cache.HeadCache = field(default_factory=checkpoint_cache.HeadCache)
    locks: dict[str, Any] = field(default_factory=dict)
    users: dict[str, int] = field(default_factory=dict)

    @contextmanager
    def active(self) -> Iterator[None]:
        """What runs inside (and every task it starts) runs as this instance."""
        token = _current.set(self)
        try:
            yield
        finally:
            _current.reset(token)


_current: ContextVar[Instance | None] = ContextVar("app_instance", default=None)


class _Proxy:
    """Forwards attribute use to the current instance's object (or the process's own)."""

    def __init__(self, own: object, attr: str) -> None:
        object.__setattr__(self, "_own", own)
        object.__setattr__(self, "_attr", attr)

    def _target(self) -> object:
        instance = _current.get()
        return object.__getattribute__(self, "_own") if instance is None else getattr(instance, self._attr)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target(), name, value)


class _MappingProxy(MutableMapping[str, Any]):
    """A dict whose contents are the current instance's (or the process's own)."""

    def __init__(self, own: dict[str, Any], attr: str) -> None:
        self._own = own
        self._attr = attr

    def _target(self) -> dict[str, Any]:
        instance = _current.get()
        return self._own if instance is None else getattr(instance, self._attr)

    def __getitem__(self, key: str) -> Any:
        return self._target()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._target()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._target()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._target())

    def __len__(self) -> int:
        return len(self._target())


@contextmanager
def separate_instances(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make ``Instance.active()`` take effect for services built from now on."""
    locks = thread_turns.process_locks
    with monkeypatch.context() as patch:
        patch.setattr(checkpoint_cache, "_checkpoints", _Proxy(checkpoint_cache._checkpoints, "checkpoints"))
        patch.setattr(checkpoint_cache, "_heads", _Proxy(checkpoint_cache._heads, "heads"))
        patch.setattr(locks, "_locks", _MappingProxy(locks._locks, "locks"))
        patch.setattr(locks, "_users", _MappingProxy(locks._users, "users"))
        yield


__all__ = ["Instance", "separate_instances"]
