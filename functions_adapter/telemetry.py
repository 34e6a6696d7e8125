"""Export traces and logs to Application Insights, only when it is configured; and keep
per-request chatter of libraries out of the logs, configured or not.

``azure-monitor-opentelemetry`` is imported here and nowhere else, and only when
``APPLICATIONINSIGHTS_CONNECTION_STRING`` is set, so a cold start without it pays
nothing. With ``APPLICATIONINSIGHTS_AUTHENTICATION_STRING=ClientId=...;Authorization=AAD``
(what infra/ sets) telemetry is sent as the managed identity, since local auth is off.
"""

from __future__ import annotations

import logging
from typing import Any

from functions_adapter.settings import TelemetrySettings

logger = logging.getLogger(__name__)
_configured = False

# Loggers that say at INFO, on every request, what is not news: Agent Framework's workflow
# package logs "Dead-end executors detected" each time a workflow is built (once a request)
# and "Starting superstep", "Created checkpoint", "Workflow completed" for every superstep.
# Their warnings and errors still show. The app's own line per request is request_trace's.
QUIET_LOGGERS: dict[str, int] = {
    "agent_framework._workflows": logging.WARNING,
}


def quiet_chatty_loggers() -> None:
    """Set the levels in ``QUIET_LOGGERS``, unless a level was set already (a deliberate
    choice, such as DEBUG while investigating, wins)."""
    for name, level in QUIET_LOGGERS.items():
        chatty = logging.getLogger(name)
        if chatty.level == logging.NOTSET:
            chatty.setLevel(level)


def configure(settings: TelemetrySettings | None = None) -> bool:
    """Set up the Azure Monitor exporters once per process; False when not configured.
    Quiets ``QUIET_LOGGERS`` either way."""
    global _configured  # noqa: PLW0603 - one exporter pipeline per process
    quiet_chatty_loggers()
    settings = settings or TelemetrySettings.from_env()
    if _configured or not settings.connection_string:
        return _configured
    from azure.monitor.opentelemetry import configure_azure_monitor  # noqa: PLC0415 - only when configured

    options: dict[str, Any] = {"connection_string": settings.connection_string}
    if settings.aad_client_id is not None:
        from azure.identity import ManagedIdentityCredential  # noqa: PLC0415

        options["credential"] = ManagedIdentityCredential(client_id=settings.aad_client_id or None)
    configure_azure_monitor(**options)
    _configured = True
    logger.info("Azure Monitor OpenTelemetry exporter configured")
    return True
