"""A package's public names, each imported from its defining module on first use (PEP 562).

A surface that imported everything it names would make ``from resumable.threads.pointers
import ...`` pay for housekeeping, and ``import function_app`` load background runs: the
cold start is pinned by ``tests/library/test_cold_start.py``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``; ``exports`` maps a name to its module,
    relative to ``package`` (``"pointers"`` for ``package.pointers``, ``"..base.errors"`` for a
    sibling package's module)."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        relative = module if module.startswith(".") else f".{module}"
        value = getattr(importlib.import_module(relative, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
