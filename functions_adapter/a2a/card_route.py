"""``GET /api/a2a/{workflow}/.well-known/agent-card.json``: the workflow's agent card.

Apart from the JSON-RPC route (``route``) because a card reads no thread, run or key: serving
it must not load the turn call, the background-run modules and the storage clients those
pull in (most of the JSON-RPC route's first import).
"""

from __future__ import annotations

import os

from fastapi import Request, Response

from functions_adapter.a2a.card import CardVersion, agent_card, openid_issuer
from functions_adapter.callers import easy_auth_enabled
from functions_adapter.http_responses import json_response
from functions_adapter.request_trace import traced
from functions_adapter.wiring import build_service, load_settings
from resumable.core.catalog import WorkflowRef

CARD_ROUTE = "a2a/{workflow}/.well-known/agent-card.json"


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
    url = request.url
    # Azure's front end ends TLS and calls the worker over plain HTTP, saying the client's
    # scheme in X-Forwarded-Proto: the card names the endpoint the client reached, never an
    # http:// one it would send its function key to in the clear.
    if request.headers.get("x-forwarded-proto", "").strip().lower() == "https":
        url = url.replace(scheme="https", port=None if url.port in (None, 80, 443) else url.port)
    endpoint = str(url).split("?")[0].removesuffix("/.well-known/agent-card.json")
    issuer = openid_issuer(os.environ) if easy_auth_enabled() else None
    return json_response(agent_card(ref.name, endpoint, version, easy_auth_issuer=issuer))
