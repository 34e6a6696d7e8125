"""The hashed locks match what the .in files declare, on every supported Python.

``scripts/lock.sh`` compiles ``requirements*.in`` into ``requirements*.txt``; setup, CI
and the remote build install only the locks. These tests fail when someone edits a .in
file without relocking, edits a lock by hand, or lets the deployed set differ from the
set the tests ran with.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCKS = {  # lock -> the .in file it is compiled from
    "requirements.txt": "requirements.in",
    "requirements-chat-agents.txt": "requirements-chat-agents.in",
    "requirements-dev.txt": "requirements-dev.in",
}


@dataclass(frozen=True)
class Locked:
    name: str
    version: str
    marker: str
    hashes: frozenset[str]
    via: frozenset[str]  # the requirement files and packages uv says pulled it in


def supported_pythons() -> list[str]:
    text = (ROOT / "pyproject.toml").read_text()
    low, beyond = re.search(r'requires-python = ">=3\.(\d+),<3\.(\d+)"', text).groups()
    return [f"3.{minor}" for minor in range(int(low), int(beyond))]


def environment(python: str) -> dict[str, str]:
    """Linux CPython ``python``: the markers the remote build (and these machines) evaluate."""
    return {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux"}


def applies(marker: str, python: str) -> bool:
    return not marker or Marker(marker).evaluate(environment(python))


def read_lock(name: str) -> list[Locked]:
    entries: list[Locked] = []
    for block in re.split(r"\n(?=[A-Za-z0-9])", (ROOT / name).read_text()):
        if block.startswith("#"):
            continue
        head = block.split(" \\", 1)[0]
        requirement = Requirement(head)
        (spec,) = requirement.specifier
        assert spec.operator == "==", head
        via = re.findall(r"#\s+(?:via\s+)?(-r \S+|[A-Za-z0-9][\w.-]*)\s*$", block, flags=re.MULTILINE)
        entries.append(
            Locked(
                name=canonicalize_name(requirement.name),
                version=spec.version,
                marker=str(requirement.marker or ""),
                hashes=frozenset(re.findall(r"--hash=(sha256:[0-9a-f]{64})", block)),
                via=frozenset(via),
            )
        )
    return entries


def declared(name: str) -> list[Requirement]:
    """Every requirement an .in file names, following its ``-r`` includes."""
    found: list[Requirement] = []
    for raw in (ROOT / name).read_text().splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if line.startswith("-r "):
            found += declared(line[3:].strip())
        elif line:
            found.append(Requirement(line))
    return found


@pytest.mark.parametrize("lock", LOCKS)
@pytest.mark.parametrize("python", supported_pythons())
def test_every_declared_pin_is_locked_at_that_version(lock: str, python: str) -> None:
    locked = {(e.name, e.version) for e in read_lock(lock) if applies(e.marker, python)}
    for requirement in declared(LOCKS[lock]):
        if requirement.marker and not requirement.marker.evaluate(environment(python)):
            continue
        (spec,) = requirement.specifier
        pin = (canonicalize_name(requirement.name), spec.version)
        assert pin in locked, f"{requirement} on {python}: run scripts/lock.sh"


@pytest.mark.parametrize("lock", LOCKS)
@pytest.mark.parametrize("python", supported_pythons())
def test_each_package_has_one_version_per_python(lock: str, python: str) -> None:
    names = [e.name for e in read_lock(lock) if applies(e.marker, python)]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("lock", LOCKS)
def test_only_declared_packages_are_locked_as_direct(lock: str) -> None:
    """A pin removed from the .in file must leave the lock too: uv marks what came from where."""
    sources = {f"-r {name}" for name in LOCKS.values()}
    direct = {e.name for e in read_lock(lock) if e.via & sources}
    assert direct == {canonicalize_name(r.name) for r in declared(LOCKS[lock])}


@pytest.mark.parametrize("lock", LOCKS)
def test_every_entry_is_hashed(lock: str) -> None:
    unhashed = [e.name for e in read_lock(lock) if not e.hashes]
    assert not unhashed


@pytest.mark.parametrize("lock", ["requirements.txt", "requirements-chat-agents.txt"])
def test_what_deploys_is_what_the_tests_ran(lock: str) -> None:
    """Each deployed version, marker and hash set is the dev lock's, which .venv holds."""
    dev = {(e.name, e.marker): e for e in read_lock("requirements-dev.txt")}
    for entry in read_lock(lock):
        tested = dev.get((entry.name, entry.marker))
        assert tested is not None, f"{entry.name} ({entry.marker}) is deployed but not in requirements-dev.txt"
        assert (tested.version, tested.hashes) == (entry.version, entry.hashes), entry.name


def test_relocking_changes_nothing(tmp_path: Path) -> None:
    """The locks are exactly what scripts/lock.sh resolves from the .in files today.

    The comparisons above only check the locks against each other and the declarations; a
    transitive entry deleted or narrowed in every lock at once passes them all and fails only
    in the remote build ("all requirements must have their versions pinned"). Resolving again
    (uv keeps every existing pin, so an intact lock comes back byte for byte) catches that.
    Needs PyPI, like scripts/setup.sh."""
    for name in ["pyproject.toml", "scripts/lock.sh", *LOCKS, *LOCKS.values()]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    uv = Path(sys.executable).parent / "uv"
    done = subprocess.run(
        ["bash", "scripts/lock.sh"],
        check=False,
        cwd=tmp_path,
        env={**os.environ, "UV": str(uv)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    changed = [name for name in LOCKS if (tmp_path / name).read_text() != (ROOT / name).read_text()]
    assert not changed, f"{changed} differ from a fresh scripts/lock.sh: run it and commit the result"


def test_the_default_deployment_leaves_out_the_model_client() -> None:
    """openai and agent-framework-openai (22 MB deployed, with their dependencies) are for chat-agents only."""
    names = {e.name for e in read_lock("requirements.txt")}
    assert names.isdisjoint({"openai", "agent-framework-openai"})
    assert {"openai", "agent-framework-openai"} <= {e.name for e in read_lock("requirements-chat-agents.txt")}


def test_this_venv_holds_exactly_the_locked_versions() -> None:
    """setup.sh installed the dev lock: every package it names for this Python is here at that version
    (agent-framework-core at the one ``scripts/try-framework.sh`` asked for, when it did)."""
    python = "{}.{}".format(*sys.version_info[:2])
    override = os.environ.get("AGENT_FRAMEWORK_CORE_VERSION")
    wrong = {}
    for entry in read_lock("requirements-dev.txt"):
        if entry.marker and not Marker(entry.marker).evaluate():
            continue  # for another Python or platform
        try:
            installed = metadata.version(entry.name)
        except metadata.PackageNotFoundError:
            installed = None
        wanted = override if override and entry.name == "agent-framework-core" else entry.version
        if installed != wanted:
            wrong[entry.name] = (entry.version, installed)
    assert not wrong, f"Python {python}: locked vs installed {wrong}; run scripts/setup.sh"
