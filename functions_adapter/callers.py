"""Who is calling (its origin, from headers only the platform could have set), and whether
it may touch a thread: an optional hook named by ``THREAD_AUTHORIZER=module:function``
(``authorizers.py`` holds a ready one).

The hook is called as ``hook(route=..., thread_id=..., headers=..., metadata=...)`` and
returns true to allow (it may be async). A refusal is 403 ``forbidden``, decided before
anything runs or changes. The headers it sees never include an unverified principal:
``X-MS-CLIENT-PRINCIPAL*`` are passed on only when App Service Authentication (Easy
Auth) is on (``WEBSITE_AUTH_ENABLED=True``, set by the platform), because only then did
the platform itself put them there.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from starlette.requests import HTTPConnection

from functions_adapter.authorizers import principal_of
from functions_adapter.settings import SettingsError
from functions_adapter.thread_names import origin_for
from resumable.base import Forbidden
from resumable.threads import Caller

logger = logging.getLogger(__name__)
PRINCIPAL_HEADERS = ("x-ms-client-principal", "x-ms-client-principal-id", "x-ms-client-principal-name")
API_ORIGIN = "api"


def easy_auth_enabled(env: Mapping[str, str] | None = None) -> bool:
    return (os.environ if env is None else env).get("WEBSITE_AUTH_ENABLED", "").strip().lower() == "true"


def trusted_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The request's headers, lower-cased, without principal headers Easy Auth did not set.

    Principal headers (Easy Auth's, and a gateway's ``THREAD_PRINCIPAL_HEADER``) carry a
    name as UTF-8 bytes, which ASGI hands over as Latin-1 characters: they are read back as
    UTF-8 here, so ``Zoë 李`` is seen as sent.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    if not easy_auth_enabled():
        for name in PRINCIPAL_HEADERS:
            lowered.pop(name, None)
    gateway = os.environ.get("THREAD_PRINCIPAL_HEADER", "").strip().lower()
    for name in (*PRINCIPAL_HEADERS, gateway):
        if name in lowered:
            lowered[name] = _utf8(lowered[name])
    return lowered


def _utf8(value: str) -> str:
    """``value``'s Latin-1 characters read back as the UTF-8 bytes they were; as it is if
    they were no UTF-8."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


@lru_cache(maxsize=8)
def load(spec: str) -> Callable[..., Any]:
    module_name, _, attribute = spec.partition(":")
    try:
        hook = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise SettingsError(f"THREAD_AUTHORIZER {spec!r} cannot be imported: {exc}") from None
    if not callable(hook):
        raise SettingsError(f"THREAD_AUTHORIZER {spec!r} is not callable.")
    return hook


async def authorize(
    spec: str | None, *, route: str, thread_id: str, headers: Mapping[str, str], metadata: dict[str, str]
) -> None:
    """``Forbidden`` unless the configured hook allows this request (no hook: allowed)."""
    if not spec:
        return
    verdict = load(spec)(route=route, thread_id=thread_id, headers=trusted_headers(headers), metadata=metadata)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    if verdict is not True:
        logger.info("Thread authorizer refused %s on thread %s", route, thread_id)
        raise Forbidden("You may not use this thread.")


def origin_of(request: HTTPConnection) -> str:
    """Who sends this request, as its thread records it (see docs/security.md, "Ownership").

    The caller's principal, as the ready authorizer reads it (``THREAD_PRINCIPAL_HEADER``,
    or Easy Auth's), as ``principal:<id>``; without one, ``api``: every function-key caller
    is one origin. (An adapter's turn names its own origin, ``slack:<team>:<channel>`` or
    ``github:<repository id>``, in its ``turn_call.TurnCall``: no HTTP request carries it.)
    """
    return caller_origin(request.headers)


def caller_of(request: HTTPConnection) -> Caller:
    """The request's caller, as the library's reads of thread data take it."""
    return Caller(origin_of(request))


def caller_origin(headers: Mapping[str, str]) -> str:
    """A caller's origin from the headers its call arrived with (an HTTP route, an MCP tool
    call): ``principal:<id>`` with a trusted principal, else ``api``."""
    principal = principal_of(trusted_headers(headers))
    return API_ORIGIN if not principal else origin_for("principal", principal)
