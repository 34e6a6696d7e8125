"""The classes a checkpoint pickle may name, and the check that each one is a data class.

An allowlist is the guard's only source of trust: the scan (``pickle_opcodes``) lets a
pickle reference and call only what is listed, and ``restricted_loads`` enforces the same
list again at load time. Entries are validated once, when the allowlist is built, so a
configuration that lists a function, a metaclass or a tool module (``functools``,
``operator``, ``os``, ...) fails at start-up instead of opening a hole.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

# Classes that may appear as values (a request's ``response_type``) but are never called.
REFERENCE_ONLY_TYPES = frozenset(
    f"builtins:{name}" for name in ("str", "int", "float", "bool", "bytes", "list", "dict", "tuple", "set", "frozenset")
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
