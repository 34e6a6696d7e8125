"""A workflow's A2A agent card (v1.0 shape: ``supportedInterfaces``), one per hosted workflow.

What each field comes from (docs/a2a.md, "The card"): ``version`` is the catalog's version
label a new context on this endpoint runs; the security schemes are what the platform
checks: the function key always (the routes are FUNCTION level), and an Entra ID token as
well when App Service Authentication (Easy Auth) is on in front of the app.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PROTOCOL_VERSION = "1.0"
FUNCTION_KEY = "functionKey"
ENTRA_ID = "entraId"
# The issuer infra/app/function-app.bicep configures is https://login.microsoftonline.com/<tenant>/v2.0;
# the app is given no tenant setting, so without the platform's issuer the card names Entra ID's
# multi-tenant one (its discovery document leads a client to the same sign-in endpoints).
# Ours (Bicep sets it to the issuer authsettingsV2 validates), then the platform's, if present.
ISSUER_SETTINGS = ("EASY_AUTH_ISSUER", "WEBSITE_AUTH_OPENID_ISSUER")
FALLBACK_ISSUER = "https://login.microsoftonline.com/common/v2.0"
DISCOVERY_PATH = "/.well-known/openid-configuration"


@dataclass(frozen=True, slots=True)
class CardVersion:
    """The version a card names, and what a turn on its endpoint does with a thread's version."""

    label: str
    pinned_by_request: bool  # the endpoint names ``name@version``
    policy: str  # the workflow's catalog policy: ``pinned`` or ``upgrade``

    def turn_rule(self) -> str:
        if self.pinned_by_request:
            return (
                f"Every turn runs version {self.label}: a thread on an older version moves to it, "
                "one on a newer version is refused."
            )
        if self.policy == "upgrade":
            return (
                f"A new context starts on version {self.label}; an existing one moves to the newest at its next turn."
            )
        return f"A new context starts on version {self.label}; an existing one stays on the version it started on."


def openid_issuer(env: Mapping[str, str]) -> str:
    """The Entra ID issuer Easy Auth validates tokens against: the first of ``ISSUER_SETTINGS``
    that is an https URL, else the multi-tenant issuer (see ``FALLBACK_ISSUER``)."""
    for name in ISSUER_SETTINGS:
        issuer = env.get(name, "").strip()
        if issuer.startswith("https://"):
            return issuer.rstrip("/")
    return FALLBACK_ISSUER


def agent_card(workflow: str, endpoint: str, version: CardVersion, *, easy_auth_issuer: str | None) -> dict[str, Any]:
    """The card for ``workflow`` served at ``endpoint`` (the absolute ``/api/a2a/{workflow}`` URL).

    ``easy_auth_issuer``: None when Easy Auth is off; else its issuer, and a caller needs both
    a token from it and the function key (one security requirement naming both schemes).
    """
    schemes: dict[str, Any] = {
        FUNCTION_KEY: {
            "apiKeySecurityScheme": {
                "location": "header",
                "name": "x-functions-key",
                "description": "An Azure Functions key (function or host key).",
            }
        }
    }
    if easy_auth_issuer is not None:
        schemes[ENTRA_ID] = {
            "openIdConnectSecurityScheme": {
                "openIdConnectUrl": easy_auth_issuer + DISCOVERY_PATH,
                "description": (
                    "An Entra ID access token for the app's registration (audience api://<client ID>), "
                    "sent as Authorization: Bearer; App Service Authentication checks it before the "
                    "function key is checked."
                ),
            }
        }
    return {
        "name": workflow,
        "description": f"The hosted workflow {workflow!r}: each context is a durable thread, each task one turn.",
        "version": version.label,
        "supportedInterfaces": [{"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION}],
        "capabilities": {"streaming": True, "pushNotifications": True},
        "securitySchemes": schemes,
        "securityRequirements": [{"schemes": {name: {"list": []} for name in schemes}}],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [
            {
                "id": f"{workflow}-turn",
                "name": f"{workflow} turn",
                "description": f"One turn of the workflow on the context's thread. {version.turn_rule()}",
                "tags": ["workflow", "thread"],
            }
        ],
    }
