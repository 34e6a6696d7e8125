"""``GET /api/console`` and its files: the page and its modules, only when ``CONSOLE_ENABLED``.

The files hold no data (every call the page makes goes to the API with the caller's key), so
the route is anonymous; off, it answers exactly as an unknown route does. Each answer carries
a strict Content-Security-Policy (scripts and styles from this origin only, nothing inline,
no frames, no form posts) and ``Cache-Control: no-store``. Only the folder's own files are
served, by a name the listing found, so no request can name a path.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from fastapi import Request, Response

from functions_adapter.errors import NotFound
from functions_adapter.http_responses import error_response
from functions_adapter.request_trace import traced
from functions_adapter.wiring import load_settings

STATIC = Path(__file__).resolve().parent / "static"
PAGE = "index.html"
_ASSET = re.compile(r"[a-z0-9][a-z0-9-]*\.(js|css|svg|png)")
_TYPES = {
    "html": "text/html; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "svg": "image/svg+xml",
    "png": "image/png",
}
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


@functools.cache
def files() -> dict[str, bytes]:
    """The folder's servable files, read once: the page and each asset with an allowed name."""
    return {
        path.name: path.read_bytes()
        for path in STATIC.iterdir()
        if path.is_file() and (path.name == PAGE or _ASSET.fullmatch(path.name))
    }


async def handle_page(request: Request) -> Response:
    return await traced(request, "console", lambda: _serve(PAGE, request))


async def handle_asset(request: Request, name: str) -> Response:
    return await traced(request, "console/{asset}", lambda: _serve(name, request, page=False))


async def _serve(name: str, request: Request, *, page: bool = True) -> Response:
    """The page at ``/api/console`` only; the file route serves assets only."""
    settings = load_settings()  # a malformed CONSOLE_ENABLED is 500 server_misconfigured
    allowed = name == PAGE if page else _ASSET.fullmatch(name) is not None
    found = files().get(name) if settings.console_enabled and allowed else None
    if found is None:
        return _secured(error_response(NotFound(f"No function of this app answers GET {request.url.path}.")))
    return _secured(Response(found, media_type=_TYPES[name.rsplit(".", 1)[1]]))


def _secured(response: Response) -> Response:
    response.headers.update(HEADERS)
    return response
