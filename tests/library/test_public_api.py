"""The library's public API is what docs/library-api.md lists: each surface's ``__all__``,
name for name, and every listed name imports."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "library-api.md"
SURFACES = ["resumable", "resumable.threads", "resumable.background", "resumable.base"]


def documented(surface: str) -> set[str]:
    """The names in the first column of the table under ``## `surface```."""
    section = PAGE.read_text().split(f"## `{surface}`\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", row)}


@pytest.mark.parametrize("surface", SURFACES)
def test_each_surface_exports_exactly_the_documented_names(surface: str) -> None:
    module = importlib.import_module(surface)
    assert sorted(module.__all__) == sorted(documented(surface))
    assert len(module.__all__) == len(set(module.__all__))


@pytest.mark.parametrize("surface", SURFACES)
def test_every_exported_name_imports(surface: str) -> None:
    module = importlib.import_module(surface)
    missing = [name for name in module.__all__ if getattr(module, name, None) is None]
    assert missing == []
    assert set(module.__all__) <= set(dir(module))


def test_the_root_no_longer_exports_internals() -> None:
    import resumable

    internals = {"HeldClaim", "RunQueue", "RunRecords", "ThreadOrder", "RunOwner"}
    assert internals.isdisjoint(resumable.__all__)
    with pytest.raises(AttributeError):
        resumable.HeldClaim  # noqa: B018


def test_a_name_not_documented_would_fail() -> None:
    assert "HeldClaim" not in documented("resumable")
    assert "ThreadRunner" in documented("resumable")


@pytest.mark.parametrize("surface", SURFACES)
def test_no_exported_name_is_also_a_submodule(surface: str) -> None:
    """Importing ``surface.<name>`` binds the submodule as the package's attribute, so an
    exported function of that name would turn into a module once anything imported it (a
    join answered 500 ``'module' object is not callable`` that way, depending on test order)."""
    import pkgutil

    module = importlib.import_module(surface)
    submodules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    assert set(module.__all__) & submodules == set()
