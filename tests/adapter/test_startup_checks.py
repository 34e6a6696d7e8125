"""A bad ``WORKFLOW`` is reported when the host indexes the app, and by ``/api/health``,
not first by a run's 500 ``server_misconfigured``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from devtools.function_host import FunctionHost
from tests.serving import ROOT

pytestmark = pytest.mark.adapter

_INDEX = "import logging; logging.basicConfig(level=logging.INFO); import function_app"


def _index_with(workflow: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKFLOW": workflow}
    return subprocess.run(
        [sys.executable, "-c", _INDEX], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
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
