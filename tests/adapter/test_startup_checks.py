"""A bad ``WORKFLOW`` is reported when the host indexes the app, and by ``/api/health``,
not first by a run's 500 ``server_misconfigured``; so is an Agent Framework outside the
supported range (a warning: runs are still tried)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from devtools.function_host import FunctionHost
from resumable.checkpoints import af_internals
from tests.serving import ROOT

pytestmark = pytest.mark.adapter

_INDEX = "import logging; logging.basicConfig(level=logging.INFO); import function_app"


# The package metadata reporting another agent-framework-core, as an installed one would.
_REPORTING = (
    "import importlib.metadata as m; real = m.version; "
    "m.version = lambda name: {version!r} if name == 'agent-framework-core' else real(name); "
)


def _index_with(workflow: str, framework: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKFLOW": workflow}
    code = (_REPORTING.format(version=framework) if framework else "") + _INDEX
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
    )


def test_an_unknown_workflow_is_logged_when_the_app_is_indexed() -> None:
    logged = _index_with("no-such-workflow").stderr
    assert "Configuration error at start-up" in logged
    assert "no-such-workflow" in logged and "server_misconfigured" in logged


def test_a_known_workflow_logs_no_configuration_error() -> None:
    assert "Configuration error" not in _index_with("default").stderr


async def test_health_names_a_workflow_setting_that_does_not_load(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKFLOW", "no-such-workflow")
    response = await host.request("GET", "/api/health")
    assert response.status == 200  # alive: restarting the instance would not fix a setting
    body = await response.json()
    assert body["status"] == "misconfigured" and body["misconfigured"] == ["WORKFLOW"]
    assert "no-such-workflow" not in json.dumps(body)  # the reason is in the logs, not for anyone


async def test_health_is_ok_when_the_workflow_loads(host: FunctionHost) -> None:
    body = await (await host.request("GET", "/api/health")).json()
    assert body["status"] == "ok" and body["misconfigured"] == []


def test_a_framework_outside_the_range_is_logged_when_the_app_is_indexed() -> None:
    logged = _index_with("default", framework="1.22.0").stderr
    assert "Unsupported Agent Framework at start-up: agent-framework-core 1.22.0 is installed" in logged
    assert f"{af_internals.OLDEST_SUPPORTED} to {af_internals.NEWEST_SUPPORTED}" in logged
    assert "Configuration error" not in logged


def test_the_installed_framework_logs_no_warning() -> None:
    assert "Unsupported Agent Framework" not in _index_with("default").stderr


@pytest.fixture
def framework_reported_as(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The package metadata says 1.27.0 is installed, for this test only."""
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "1.27.0" if name == "agent-framework-core" else real(name)
    )
    af_internals.installed_framework_version.cache_clear()
    yield
    af_internals.installed_framework_version.cache_clear()


async def test_health_reports_the_installed_framework_and_the_supported_range(host: FunctionHost) -> None:
    body = await (await host.request("GET", "/api/health")).json()
    assert body["agent_framework"] == importlib.metadata.version("agent-framework-core")
    assert body["agent_framework_supported"] is True
    assert body["agent_framework_range"] == f"{af_internals.OLDEST_SUPPORTED} to {af_internals.NEWEST_SUPPORTED}"


@pytest.mark.usefixtures("framework_reported_as")
async def test_health_says_when_the_installed_framework_is_outside_the_range(host: FunctionHost) -> None:
    body = await (await host.request("GET", "/api/health")).json()
    assert body["agent_framework"] == "1.27.0" and body["agent_framework_supported"] is False
    assert body["status"] == "ok"  # alive and configured: the version is reported, not refused
