"""``GET /api/a2a/{workflow}/.well-known/agent-card.json``: the workflow's agent card.

Apart from the JSON-RPC route (``route``) because a card reads no thread, run or key: serving
it must not load the turn call, the background-run modules and the storage clients those
pull in (most of the JSON-RPC route's first import).
"""

from __future__ import annotations

import os
import re

from fastapi import Request, Response

from functions_adapter.a2a.card import CardVersion, agent_card, openid_issuer
from functions_adapter.callers import easy_auth_enabled
from functions_adapter.http_responses import json_response
from functions_adapter.request_trace import traced
from functions_adapter.wiring import build_service, load_settings
from resumable.core.catalog import WorkflowRef

CARD_ROUTE = "a2a/{workflow}/.well-known/agent-card.json"
# A host name or address with an optional port: nothing that would change the URL's path or user.
_HOST = re.compile(r"(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")


def public_url(request: Request) -> str:
    """The URL the client reached. The Functions host forwards a request to the worker (the HTTP
    streaming extension) with YARP's default transform, which replaces the Host header with the
    worker's loopback address and sets ``X-Forwarded-Host`` to the one the client used, and
    Azure's front end ends TLS, saying the client's scheme in ``X-Forwarded-Proto``: the card
    names the endpoint the client reached, never the worker's port nor an ``http://`` one it
    would send its function key to in the clear. Both headers are set by the platform's proxies,
    as the Host header is; one that is not a host is ignored."""
    url = request.url
    forwarded_host = request.headers.get("x-forwarded-host", "").strip()
    if _HOST.fullmatch(forwarded_host):
        url = url.replace(netloc=forwarded_host)
    if request.headers.get("x-forwarded-proto", "").strip().lower() == "https":
        url = url.replace(scheme="https", port=None if url.port in (None, 80, 443) else url.port)
    return str(url)


async def handle_card(request: Request, workflow: str) -> Response:
    return await traced(request, CARD_ROUTE, lambda: _card(request, workflow))


async def _card(request: Request, workflow: str) -> Response:
    settings = load_settings()
    catalog = build_service(settings).catalog
    ref = WorkflowRef.parse(workflow)
    catalog.check(ref)
    entry = catalog.entry(ref.name)
    # The version a new context on this endpoint runs: the one the URL names, else the newest.
    version = CardVersion(ref.version or entry.newest, ref.version is not None, entry.policy)
    endpoint = public_url(request).split("?")[0].removesuffix("/.well-known/agent-card.json")
    issuer = openid_issuer(os.environ) if easy_auth_enabled() else None
    return json_response(agent_card(ref.name, endpoint, version, easy_auth_issuer=issuer))
