"""The routes about the app itself: ``/api/health`` and ``/api/openapi.json``; and the
start-up checks that find a bad ``WORKFLOW``, or an Agent Framework outside the supported
range, when the host indexes the app, not at the first request.

The OpenAPI document is data (``openapi.json`` beside this module), read once: the
routes are Azure Functions triggers, so no web framework could derive it, and
``tests/infra/test_openapi.py`` holds it to the routes ``function_app`` registers.
"""

from __future__ import annotations

import json
import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from fastapi import Request, Response

from functions_adapter.http_responses import json_response
from functions_adapter.request_trace import traced
from functions_adapter.settings import SettingsError
from functions_adapter.wiring import workflow_spec
from resumable import __version__
from resumable.checkpoints import af_internals

logger = logging.getLogger(__name__)
DOCUMENT = Path(__file__).with_name("openapi.json")


@lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route, with this release's version."""
    document: dict[str, Any] = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    document["info"]["version"] = __version__
    return document


def workflow_problem() -> str | None:
    """Why the ``WORKFLOW`` setting names no loadable workflow, or None if it loads.

    The spec is cached once it loads; the first request would import it anyway.
    """
    name = os.environ.get("WORKFLOW", "").strip() or "default"
    try:
        workflow_spec(name)
    except SettingsError as exc:
        return str(exc)
    except Exception as exc:  # an import error in the workflow's module: say which, keep serving
        return f"WORKFLOW {name!r} failed to load: {type(exc).__name__}: {exc}"
    return None


def check_at_startup() -> bool:
    """Log an error now if ``WORKFLOW`` is bad (every run would answer 500
    ``server_misconfigured``), and a warning if the installed Agent Framework is outside the
    supported range (runs are tried: the contract tests, not this check, say what broke);
    True when the workflow loads."""
    framework = af_internals.framework_version_problem(af_internals.installed_framework_version())
    if framework is not None:
        logger.warning("Unsupported Agent Framework at start-up: %s.", framework)
    problem = workflow_problem()
    if problem is not None:
        logger.error("Configuration error at start-up: %s. Runs will answer 500 server_misconfigured.", problem)
    return problem is None


async def handle_health() -> Response:
    """``GET /api/health``: liveness, versions (the Agent Framework installed, and whether it
    is in the supported range), and the settings that keep runs from working (by name; the
    reason is in the logs). Touches no storage, and logs no request line: probes call it
    every few seconds."""
    misconfigured = [] if workflow_problem() is None else ["WORKFLOW"]
    framework = af_internals.installed_framework_version()
    body = {
        "status": "misconfigured" if misconfigured else "ok",
        "version": __version__,
        "agent_framework": framework,
        "agent_framework_supported": af_internals.is_supported_framework(framework),
        "agent_framework_range": f"{af_internals.OLDEST_SUPPORTED} to {af_internals.NEWEST_SUPPORTED}",
        "misconfigured": misconfigured,
    }
    return json_response(body)


async def handle_openapi(request: Request) -> Response:
    """``GET /api/openapi.json``: the OpenAPI document."""

    async def document() -> Response:
        return json_response(openapi_document())

    return await traced(request, "openapi.json", document)
