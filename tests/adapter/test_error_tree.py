"""The error tree drawn atop ``resumable/base/errors.py`` is the code's, every error has one
family, and ``functions_adapter/status_map.py`` gives every error a status of its own (or
its parent's), never only the catch-all 500 of ``ResumeError``."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

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


DOCS = Path(__file__).resolve().parents[2] / "docs"
# Codes that have no row in docs/api.md's error table, each with where it is documented
# instead (None: never an answer's code). Anything else answered must have a row.
_NOT_IN_API_TABLE: dict[str, tuple[str | None, str]] = {
    # OpenAI's error shape, on the Responses and Conversations routes only.
    "model_not_found": ("responses-api.md", "Responses API"),
    "unknown_parameter": ("responses-api.md", "Responses API"),
    "response_in_progress": ("responses-api.md", "Responses API"),
    "response_not_found": ("responses-api.md", "Responses API"),
    "conversation_deleting": ("conversations-api.md", "Conversations API"),
    "conversation_not_found": ("conversations-api.md", "Conversations API"),
    # A background run's recorded outcome (its record's error), not an answer's code.
    "cancelled": ("background-runs.md", "a background run's error"),
    # A background attempt's own outcomes: they end the attempt, never answered.
    "lease_lost": (None, "ends a background attempt"),
    "already_committed": (None, "ends a background attempt"),
    "progress_not_saved": (None, "ends a background attempt"),
    "handed_on": (None, "ends a background attempt"),
    # AG-UI's route answers it with the thread's history (ag_ui/route.py).
    "no_new_messages": (None, "AG-UI answers the history"),
}


def _api_error_table() -> dict[str, int]:
    """code -> status, from the rows of docs/api.md's Errors table."""
    section = (DOCS / "api.md").read_text().split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    return {code: int(status) for status, code in re.findall(r"^\| (\d{3}) \| `([a-z_]+)` \|", section, re.M)}


def _status(cls: type[ResumeError]) -> int:
    """What ``status_map`` answers for ``cls`` (its row or its nearest ancestor's)."""
    return next(STATUS[ancestor] for ancestor in cls.__mro__ if ancestor in STATUS)


@pytest.mark.parametrize("name", sorted(set(ERRORS) - {cls.__name__ for cls in FAMILIES} - {"ResumeError"}))
def test_every_answered_error_code_has_a_row_in_the_api_error_table(name: str) -> None:
    """docs/api.md's Errors table lists every code an /api route answers, with its status."""
    cls = ERRORS[name]
    table = _api_error_table()
    if cls.code in _NOT_IN_API_TABLE:
        page, _why = _NOT_IN_API_TABLE[cls.code]
        assert cls.code not in table, f"{cls.code} has a row in docs/api.md: drop it from _NOT_IN_API_TABLE"
        assert page is None or f"`{cls.code}`" in (DOCS / page).read_text(), f"{cls.code} is not in docs/{page}"
        return
    assert cls.code in table, f"add a row for {cls.code} ({name}) to docs/api.md's Errors table"
    assert table[cls.code] == _status(cls), f"docs/api.md answers {cls.code} with {table[cls.code]}"
