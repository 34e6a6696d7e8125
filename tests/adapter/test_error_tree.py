"""The error tree drawn atop ``resumable/base/errors.py`` is the code's, every error has one
family, and ``functions_adapter/status_map.py`` gives every error a status of its own (or
its parent's), never only the catch-all 500 of ``ResumeError``."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

import functions_adapter
import resumable
from functions_adapter.status_map import STATUS
from resumable.base import errors
from resumable.base.errors import FAMILIES, ResumeError

# One drawn line: tree rails, the class, its code (families have none), its module if elsewhere.
_LINE = re.compile(
    r"^    (?P<rails>(?:│   |    )*)(?P<branch>[├└]── )?(?P<name>\w+)"
    r"(?:\s+(?P<code>[a-z_]+))?(?:\s+\[(?P<path>[\w/.]+)\])?$"
)


def _every_error() -> dict[str, type[ResumeError]]:
    """Every ``ResumeError`` subclass the app defines, once all its modules are imported."""
    for package in (resumable, functions_adapter):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(module.name)
    found: dict[str, type[ResumeError]] = {}
    todo = [ResumeError]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith(("resumable.", "functions_adapter.")):
            assert cls.__name__ not in found, f"two errors named {cls.__name__}"
            found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


ERRORS = _every_error()


def _drawn() -> dict[str, tuple[str | None, str | None, str | None]]:
    """name -> (drawn parent, drawn code, drawn module path) from the module's docstring."""
    drawing = errors.__doc__.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    drawn: dict[str, tuple[str | None, str | None, str | None]] = {}
    stack: list[str] = []
    for line in drawing.splitlines():
        match = _LINE.match(line)
        assert match, f"not a tree line: {line!r}"
        depth = len(match["rails"]) // 4 + (1 if match["branch"] else 0)
        del stack[depth:]
        drawn[match["name"]] = (stack[-1] if stack else None, match["code"], match["path"])
        stack.append(match["name"])
    return drawn


def test_the_drawn_tree_is_every_error_with_its_parent_code_and_module() -> None:
    drawn = _drawn()
    assert sorted(drawn) == sorted(ERRORS), "draw every error (and only those) atop resumable/base/errors.py"
    for name, (parent, code, path) in drawn.items():
        cls = ERRORS[name]
        expected_parent = None if cls is ResumeError else cls.__bases__[0].__name__
        assert parent == expected_parent, f"{name} is drawn under {parent}, not {expected_parent}"
        # A family is drawn without a code: it is never raised. The configuration family is its one error.
        is_bare_family = cls in FAMILIES and cls is not errors.ServerMisconfigured
        assert code == (None if is_bare_family else cls.code), f"{name} is drawn with code {code}"
        module = cls.__module__.replace(".", "/") + ".py"
        assert (path or "resumable/base/errors.py") == module, f"{name} is drawn in {path}, not {module}"


@pytest.mark.parametrize("name", sorted(set(ERRORS) - {"ResumeError"}))
def test_every_error_descends_from_exactly_one_family(name: str) -> None:
    families = [family.__name__ for family in FAMILIES if issubclass(ERRORS[name], family)]
    assert len(families) == 1, f"{name} is in {families or 'no family'}"


@pytest.mark.parametrize("name", sorted(set(ERRORS) - {cls.__name__ for cls in FAMILIES} - {"ResumeError"}))
def test_every_error_has_a_status_row_of_its_own_or_its_parents(name: str) -> None:
    """Never only the catch-all row: a new error gets a deliberate status."""
    below_family = [cls for cls in ERRORS[name].__mro__ if issubclass(cls, ResumeError) and cls not in FAMILIES]
    rows = [cls for cls in below_family if cls is not ResumeError and cls in STATUS]
    assert rows, f"{name} has no row in functions_adapter/status_map.py"


def test_no_family_has_a_status_row_except_the_configuration_family() -> None:
    """A family is never raised; a row for it would hide a member that lacks its own."""
    assert [family for family in FAMILIES if family in STATUS] == [errors.ServerMisconfigured]


def test_the_internal_signals_named_in_the_docstring_live_where_it_says_and_are_not_shown() -> None:
    named = re.findall(r"``(\w+)``(?: and ``(\w+)``)? \(``([\w/.]+\.py)``", errors.__doc__)
    assert len(named) >= 4
    for first, second, path in named:
        module = importlib.import_module("resumable." + path.removesuffix(".py").replace("/", "."))
        for name in filter(None, (first, second)):
            signal = getattr(module, name)
            assert signal.__module__ == module.__name__, name
            assert not issubclass(signal, ResumeError), f"{name} reaches callers: give it a family"
