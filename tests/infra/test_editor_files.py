"""The .vscode/ files parse, name things that exist, and are committed but never deployed.

They are the files the Azure Functions extension writes for a Python v2 project, so F5
installs the requirements, runs `func host start` and attaches to the Python worker.
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
VSCODE = ROOT / ".vscode"
# What the app needs at run time: everything else in the repository stays out of the package.
DEPLOYED = {"function_app.py", "functions_adapter", "host.json", "requirements.txt", "resumable", "workflows"}


def _load(name: str) -> Any:
    return json.loads((VSCODE / name).read_text())


def _funcignore() -> list[str]:
    lines = (ROOT / ".funcignore").read_text().splitlines()
    return [line.rstrip("/") for line in lines if line.strip() and not line.startswith("#")]


def test_extensions_recommend_functions_python_and_azurite() -> None:
    recommended = {name.lower() for name in _load("extensions.json")["recommendations"]}
    assert {"ms-azuretools.vscode-azurefunctions", "ms-python.python", "azurite.azurite"} <= recommended


def test_settings_describe_this_project() -> None:
    settings = _load("settings.json")
    assert settings["azureFunctions.projectLanguage"] == "Python"
    assert settings["azureFunctions.projectRuntime"] == "~4"
    assert settings["azureFunctions.projectLanguageModel"] == 2
    assert settings["azureFunctions.scmDoBuildDuringDeployment"] is True
    venv = ROOT / settings["azureFunctions.pythonVenv"]
    assert (venv / "bin" / "python").exists(), f"{venv} is the venv scripts/setup.sh builds"
    deployed = ROOT / settings["azureFunctions.deploySubpath"]
    assert (deployed / "function_app.py").exists() and (deployed / "host.json").exists()


def test_azurite_settings_are_ones_the_pinned_azurite_extension_defines() -> None:
    """The Azurite extension must skip the API version check, like the README's command line."""
    manifest = json.loads((ROOT / "node_modules" / "azurite" / "package.json").read_text())
    defined = {key for section in manifest["contributes"]["configuration"] for key in section["properties"]}
    ours = {key: value for key, value in _load("settings.json").items() if key.startswith("azurite.")}
    assert set(ours) <= defined
    assert ours["azurite.skipApiVersionCheck"] is True


def test_tasks_install_requirements_then_start_the_host() -> None:
    settings = _load("settings.json")
    tasks = {task["label"]: task for task in _load("tasks.json")["tasks"]}
    host = next(task for task in tasks.values() if task["type"] == "func")
    assert host["command"] == "host start"
    assert host["isBackground"] is True
    install = tasks[host["dependsOn"]]
    for platform in ("linux", "osx"):
        command = install[platform]["command"].replace(
            "${config:azureFunctions.pythonVenv}", settings["azureFunctions.pythonVenv"]
        )
        words = command.split()
        assert (ROOT / words[0]).exists(), words[0]
        assert words[1:4] == ["-m", "pip", "install"]
        named = [words[i + 1] for i, word in enumerate(words) if word in ("-r", "-c")]
        assert named == ["requirements-dev.txt"]  # the hashed lock scripts/setup.sh installs
        assert all((ROOT / name).exists() for name in named), named


def test_launch_attaches_to_the_python_worker_after_starting_the_host() -> None:
    labels = {task["label"] for task in _load("tasks.json")["tasks"]}
    (attach,) = _load("launch.json")["configurations"]
    assert attach["request"] == "attach" and attach["type"] == "debugpy"
    # The Functions extension starts the worker under debugpy on 9091 when this task runs.
    assert attach["connect"]["port"] == 9091
    assert attach["preLaunchTask"] in labels


def test_vscode_is_committed_but_not_deployed() -> None:
    for name in ("extensions.json", "settings.json", "tasks.json", "launch.json"):
        ignored = subprocess.run(["git", "check-ignore", "-q", f".vscode/{name}"], cwd=ROOT, check=False)
        assert ignored.returncode == 1, f".vscode/{name} is git-ignored"
    assert ".vscode" in _funcignore()


def test_funcignore_leaves_out_everything_but_the_app() -> None:
    """A new top-level file is either part of the app or listed in .funcignore."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    top_level = {line.split("/", 1)[0] for line in tracked.splitlines()} | {".venv", "node_modules", ".hypothesis"}
    patterns = _funcignore()
    for name in sorted(top_level):
        ignored = any(fnmatch.fnmatch(name, pattern) for pattern in patterns)
        if name in DEPLOYED:
            assert not ignored, f"{name} is needed at run time but .funcignore leaves it out"
        else:
            assert ignored, f"{name} would be deployed: add it to .funcignore (or to DEPLOYED here)"


@pytest.mark.parametrize("name", ["extensions.json", "settings.json", "tasks.json", "launch.json"])
def test_each_file_is_plain_json(name: str) -> None:
    """VS Code accepts comments in these files; keep them plain so any tool can read them."""
    assert isinstance(_load(name), dict)
